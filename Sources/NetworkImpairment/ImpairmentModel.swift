import NIOCore

/// A bad network as a plain value: datagrams and the current time go in, damaged, delayed and
/// reordered datagrams come out when they are due.
///
/// The model does no I/O and reads no clock (it is "sans-I/O"): the caller passes the time to
/// every call. A property test drives it with a virtual clock and sees exactly what a real
/// path with this ``ImpairmentProfile`` could do, in microseconds and reproducibly;
/// ``UDPImpairmentRelay`` drives the same code with `NIODeadline.now()` and event loop timers.
///
/// Determinism: every decision comes from ``SeededRandom`` streams derived from `seed`, one
/// stream per kind of decision, so the same seed, profile and submissions (same order, same
/// times, same payload lengths) produce exactly the same outputs on every platform. Because
/// the streams are separate, adding jitter to a profile does not change which datagrams are
/// lost.
///
/// A pass-through profile (``ImpairmentProfile/perfect``) delivers every datagram at its
/// submission time, unchanged and in submission order.
public struct ImpairmentModel<Element: ImpairableDatagram> {
    // MARK: - State

    /// The profile this model applies.
    public let profile: ImpairmentProfile

    /// What the model has done so far.
    public private(set) var statistics = ImpairmentStatistics()

    private var queue = DeliveryQueue<Element>()
    private var random: DecisionStreams
    private var burst: GilbertElliottState?

    // MARK: - Creating a model

    /// Creates a model that applies `profile`, with every random decision determined by `seed`.
    ///
    /// - Precondition: `profile` is valid; check untrusted profiles with
    ///   ``ImpairmentProfile/validate()`` first.
    public init(profile: ImpairmentProfile, seed: UInt64) {
        do {
            try profile.validate()
        } catch {
            preconditionFailure("\(error) (call ImpairmentProfile.validate() before creating an ImpairmentModel)")
        }
        self.profile = profile
        self.random = DecisionStreams(seed: seed)
        self.burst = profile.burstLoss.map(GilbertElliottState.init)
    }

    // MARK: - Feeding datagrams

    /// Hands a datagram to the network at time `now`.
    ///
    /// The model decides here whether it is lost, duplicated or corrupted and when each copy
    /// is due; the copies then wait until ``popDue(at:)`` is called at or after that time.
    public mutating func submit(_ datagram: Element, at now: NIODeadline) {
        self.statistics.submitted += 1
        if self.decideLoss() {
            self.statistics.dropped += 1
            return
        }
        let duplicate = self.random.duplicate.chance(self.profile.duplicateProbability)
        self.schedule(datagram, submittedAt: now)
        if duplicate {
            self.statistics.duplicated += 1
            self.schedule(datagram, submittedAt: now)
        }
    }

    // MARK: - Taking datagrams out

    /// Removes and returns the next datagram whose delivery time is not after `now`, or `nil`
    /// if none is due yet.
    ///
    /// Datagrams come out in delivery-time order; datagrams due at the same time come out in
    /// the order they were submitted (an original before its duplicate).
    public mutating func popDue(at now: NIODeadline) -> Element? {
        guard let datagram = self.queue.popFirst(notAfter: now) else { return nil }
        self.statistics.delivered += 1
        return datagram
    }

    /// The delivery time of the next datagram, or `nil` if nothing is in flight. A driver
    /// sleeps (or arms a timer) until then.
    public var nextDeliveryTime: NIODeadline? {
        self.queue.earliestDeadline
    }

    /// The number of datagrams (copies) in flight.
    public var pendingCount: Int {
        self.queue.count
    }

    // MARK: - Decisions

    /// Steps burst loss and independent loss for one datagram. Each configured kind draws
    /// exactly once per datagram, whatever the other decided.
    private mutating func decideLoss() -> Bool {
        var lost = false
        if var state = self.burst {
            lost = state.step(using: &self.random.burst)
            self.burst = state
        }
        let independentLoss = self.random.loss.chance(self.profile.loss)
        return lost || independentLoss
    }

    /// Decides corruption, reordering and jitter for one copy and queues it.
    private mutating func schedule(_ datagram: Element, submittedAt now: NIODeadline) {
        var copy = datagram
        if self.random.corrupt.chance(self.profile.corruptProbability), copy.impairableByteCount > 0 {
            copy.flipBit(at: self.random.corrupt.next(below: copy.impairableByteCount * 8))
            self.statistics.corrupted += 1
        }
        var deadline = now + self.profile.delay
        if self.random.reorder.chance(self.profile.reorderProbability) {
            deadline = deadline + self.profile.reorderDelay
            self.statistics.reordered += 1
        }
        let jitter = self.profile.jitter.nanoseconds
        if jitter > 0 {
            let extra = self.random.jitter.next(below: UInt64(jitter) + 1)
            deadline = deadline + .nanoseconds(Int64(extra))
        }
        self.queue.insert(copy, deadline: deadline)
    }
}

extension ImpairmentModel: Sendable where Element: Sendable {}

// MARK: - Random streams

/// One independent generator per kind of decision, all derived from the model's seed.
private struct DecisionStreams: Sendable {
    var burst: SeededRandom
    var loss: SeededRandom
    var duplicate: SeededRandom
    var corrupt: SeededRandom
    var reorder: SeededRandom
    var jitter: SeededRandom

    init(seed: UInt64) {
        func stream(_ tag: UInt64) -> SeededRandom {
            SeededRandom(seed: SplitMix64.mix(seed ^ SplitMix64.mix(tag)))
        }
        self.burst = stream(1)
        self.loss = stream(2)
        self.duplicate = stream(3)
        self.corrupt = stream(4)
        self.reorder = stream(5)
        self.jitter = stream(6)
    }
}
