import NIOCore

/// Round-trip time estimation and the retransmission timeout of RFC 6298.
///
/// Samples come from acknowledgements of packets sent once (packet numbers are never reused, so
/// every sample is unambiguous and Karn's rule is not needed). The peer's reported acknowledgement
/// delay is subtracted as RFC 9002 §5.3 does, but never below the minimum RTT seen.
struct RTTEstimator: Sendable {
    /// The clock granularity G of RFC 6298.
    static let granularity = TimeAmount.milliseconds(1)

    /// The RTT assumed before the first sample.
    let initialRTT: TimeAmount
    /// SRTT; nil until the first sample.
    private(set) var smoothed: TimeAmount?
    /// RTTVAR.
    private(set) var variation: TimeAmount
    private(set) var latest: TimeAmount = .zero
    /// The latest sample with the peer's acknowledgement delay taken off (as SRTT uses it).
    private(set) var latestAdjusted: TimeAmount = .zero
    private(set) var minimum: TimeAmount?

    init(initialRTT: TimeAmount) {
        self.initialRTT = initialRTT
        self.variation = initialRTT / 2
    }

    var smoothedOrInitial: TimeAmount { self.smoothed ?? self.initialRTT }

    mutating func addSample(_ sample: TimeAmount, ackDelay: TimeAmount) {
        let sample = max(sample, .nanoseconds(1))
        self.latest = sample
        let minimum = min(self.minimum ?? sample, sample)
        self.minimum = minimum
        var adjusted = sample
        if sample - ackDelay >= minimum {
            adjusted = sample - ackDelay
        }
        self.latestAdjusted = adjusted
        guard let smoothed = self.smoothed else {
            // RFC 6298 (2.2): SRTT <- R, RTTVAR <- R/2.
            self.smoothed = adjusted
            self.variation = adjusted / 2
            return
        }
        // RFC 6298 (2.3) with alpha = 1/8 and beta = 1/4.
        let difference = smoothed > adjusted ? smoothed - adjusted : adjusted - smoothed
        self.variation = (self.variation * 3 + difference) / 4
        self.smoothed = (smoothed * 7 + adjusted) / 8
    }

    /// RTO = SRTT + max(G, 4·RTTVAR), plus the peer's maximum acknowledgement delay, clamped to
    /// `bounds`. Before the first sample, SRTT is the initial RTT.
    func retransmissionTimeout(peerMaxAckDelay: TimeAmount, bounds: ClosedRange<TimeAmount>) -> TimeAmount {
        let base = self.smoothedOrInitial + max(Self.granularity, self.variation * 4) + peerMaxAckDelay
        return min(max(base, bounds.lowerBound), bounds.upperBound)
    }
}
