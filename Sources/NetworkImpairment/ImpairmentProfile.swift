import NIOCore

/// A description of how bad one direction of a network path is.
///
/// The machines this project runs on have no `netem`, yet the transport must be shown to
/// survive loss, bursts, delay, jitter, reordering, duplication and corruption. A profile is
/// the plain-value recipe for that: ``ImpairmentModel`` applies it to datagrams in process
/// with a virtual clock, ``UDPImpairmentRelay`` applies it between real sockets, and
/// `gk-impair` builds one from its command line. Every field defaults to a perfect network,
/// so `ImpairmentProfile()` passes datagrams through unchanged and in order.
///
/// Effects are applied per datagram in this order: burst loss, independent loss, duplication;
/// then, for each copy separately, corruption, reordering and jitter.
public struct ImpairmentProfile: Sendable, Equatable {
    // MARK: - Loss

    /// The probability that a datagram is dropped, independently of every other datagram.
    /// Applies on top of ``burstLoss``.
    public var loss: Double

    /// Correlated loss (Gilbert–Elliott), or `nil` for none.
    public var burstLoss: BurstLoss?

    // MARK: - Timing

    /// The fixed one-way delay added to every datagram.
    public var delay: TimeAmount

    /// The upper bound of an extra, uniformly random delay in `0...jitter` drawn for each
    /// datagram (and each duplicate). As with `netem`, datagrams may overtake each other.
    public var jitter: TimeAmount

    /// The probability that a datagram is held back by an extra ``reorderDelay``, so that
    /// datagrams sent after it overtake it.
    public var reorderProbability: Double

    /// How long a datagram selected by ``reorderProbability`` is held back.
    public var reorderDelay: TimeAmount

    // MARK: - Damage

    /// The probability that a datagram is delivered twice. The copy gets its own jitter,
    /// corruption and reordering decisions.
    public var duplicateProbability: Double

    /// The probability that a datagram has exactly one uniformly chosen bit flipped. Empty
    /// datagrams have no bit to flip and are delivered unchanged.
    public var corruptProbability: Double

    // MARK: - Creating a profile

    /// Creates a profile; every omitted argument means "no impairment of that kind".
    public init(
        loss: Double = 0,
        burstLoss: BurstLoss? = nil,
        delay: TimeAmount = .zero,
        jitter: TimeAmount = .zero,
        reorderProbability: Double = 0,
        reorderDelay: TimeAmount = .zero,
        duplicateProbability: Double = 0,
        corruptProbability: Double = 0
    ) {
        self.loss = loss
        self.burstLoss = burstLoss
        self.delay = delay
        self.jitter = jitter
        self.reorderProbability = reorderProbability
        self.reorderDelay = reorderDelay
        self.duplicateProbability = duplicateProbability
        self.corruptProbability = corruptProbability
    }

    /// A perfect network: no loss, no delay, no damage.
    public static let perfect = ImpairmentProfile()

    // MARK: - Validation

    /// Checks every field: probabilities must be in `0...1` (NaN is rejected), durations
    /// must not be negative, and ``burstLoss`` must be reachable (see ``BurstLoss/validate()``).
    ///
    /// ``ImpairmentModel`` and ``UDPImpairmentRelay`` require a valid profile.
    public func validate() throws(ValidationError) {
        try Self.checkProbability(self.loss, field: "loss")
        try Self.checkProbability(self.reorderProbability, field: "reorderProbability")
        try Self.checkProbability(self.duplicateProbability, field: "duplicateProbability")
        try Self.checkProbability(self.corruptProbability, field: "corruptProbability")
        try Self.checkDuration(self.delay, field: "delay")
        try Self.checkDuration(self.jitter, field: "jitter")
        try Self.checkDuration(self.reorderDelay, field: "reorderDelay")
        try self.burstLoss?.validate()
    }

    private static func checkProbability(_ value: Double, field: String) throws(ValidationError) {
        guard value >= 0, value <= 1 else {
            throw .probabilityOutOfRange(field: field, value: value)
        }
    }

    private static func checkDuration(_ value: TimeAmount, field: String) throws(ValidationError) {
        guard value.nanoseconds >= 0 else {
            throw .negativeDuration(field: field, value: value)
        }
    }
}
