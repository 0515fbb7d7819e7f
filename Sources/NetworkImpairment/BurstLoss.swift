/// Correlated ("bursty") loss described the way people measure it: how much is lost on
/// average, and how many datagrams in a row go missing once loss starts.
///
/// Real links rarely lose datagrams independently: a Wi-Fi fade or a full router queue takes
/// out several in a row, and that is what breaks naive retransmission and jitter buffers.
/// This is the simplified Gilbert–Elliott model: a two-state Markov chain, stepped once per
/// datagram. In the bad state every datagram is lost, in the good state none. With
/// `r = 1 / meanBurstLength` (bad → good) and `p = r · averageLoss / (1 − averageLoss)`
/// (good → bad), the stationary loss rate is `averageLoss` and bursts have geometrically
/// distributed lengths with mean `meanBurstLength`.
public struct BurstLoss: Sendable, Equatable, Codable {
    // MARK: - Parameters

    /// The long-run fraction of datagrams lost by bursts, in `0..<1`.
    public var averageLoss: Double

    /// The mean number of consecutive datagrams lost once a burst starts; at least 1.
    public var meanBurstLength: Double

    /// Creates a burst loss description. Call ``ImpairmentProfile/validate()`` (or
    /// ``validate()``) before use: not every pair is reachable (see ``validate()``).
    public init(averageLoss: Double, meanBurstLength: Double) {
        self.averageLoss = averageLoss
        self.meanBurstLength = meanBurstLength
    }

    // MARK: - Markov chain

    /// The probability of moving from the bad (losing) state back to the good state at each
    /// datagram: `r = 1 / meanBurstLength`.
    public var badToGoodProbability: Double {
        1 / self.meanBurstLength
    }

    /// The probability of moving from the good state into a loss burst at each datagram:
    /// `p = r · averageLoss / (1 − averageLoss)`.
    public var goodToBadProbability: Double {
        self.badToGoodProbability * self.averageLoss / (1 - self.averageLoss)
    }

    // MARK: - Validation

    /// Checks that the parameters describe a real Markov chain.
    ///
    /// `averageLoss` must be in `0..<1`, `meanBurstLength` finite and at least 1, and the
    /// derived `p` at most 1, which means `averageLoss ≤ meanBurstLength / (meanBurstLength + 1)`
    /// (short bursts cannot add up to a high loss rate).
    public func validate() throws(ImpairmentProfile.ValidationError) {
        guard self.averageLoss >= 0, self.averageLoss < 1 else {
            throw .invalidBurstLoss(self, reason: "averageLoss must be at least 0 and less than 1")
        }
        guard self.meanBurstLength.isFinite, self.meanBurstLength >= 1 else {
            throw .invalidBurstLoss(self, reason: "meanBurstLength must be a finite number of at least 1 datagram")
        }
        let reachable = self.meanBurstLength / (self.meanBurstLength + 1)
        guard self.averageLoss <= reachable else {
            throw .invalidBurstLoss(
                self,
                reason: "averageLoss can be at most \(reachable) with bursts of mean length \(self.meanBurstLength)"
            )
        }
    }
}

// MARK: - State

/// The running state of a ``BurstLoss`` chain inside an ``ImpairmentModel``.
struct GilbertElliottState: Sendable {
    private let goodToBad: Double
    private let badToGood: Double
    /// Whether the chain is in the bad (losing) state. It starts in the good state.
    private(set) var isBad = false

    init(_ burstLoss: BurstLoss) {
        self.goodToBad = burstLoss.goodToBadProbability
        self.badToGood = burstLoss.badToGoodProbability
    }

    /// Steps the chain for one datagram and returns whether that datagram is lost.
    /// Draws exactly one number per call.
    mutating func step(using random: inout SeededRandom) -> Bool {
        let draw = random.nextDouble()
        if self.isBad {
            if draw < self.badToGood { self.isBad = false }
        } else {
            if draw < self.goodToBad { self.isBad = true }
        }
        return self.isBad
    }
}
