import NIOCore

/// Spreads a window's worth of packets over the round trip instead of bursting them.
///
/// A token bucket filled at `gain × cwnd / SRTT` (gain 2 in slow start, 1.25 afterwards, as Linux
/// paces). The bucket holds the larger of ten packets and one millisecond of sending, so on a fast
/// path (where the event loop's own scheduling granularity is the limit) bursts are allowed and
/// pacing costs nothing, while on a slow path packets leave evenly.
struct Pacer: Sendable {
    private var tokens: Double
    private var lastUpdate: NIODeadline?
    private let maxDatagramSize: Int

    init(maxDatagramSize: Int) {
        self.maxDatagramSize = maxDatagramSize
        self.tokens = Double(10 * maxDatagramSize)
    }

    /// The earliest time a packet of `bytes` may leave; `now` when it may leave at once.
    mutating func earliestSendTime(
        bytes: Int,
        now: NIODeadline,
        congestionWindow: Int,
        smoothedRTT: TimeAmount?,
        inSlowStart: Bool
    ) -> NIODeadline {
        guard let rtt = smoothedRTT, rtt.nanoseconds > 0 else { return now }
        let gain = inSlowStart ? 2.0 : 1.25
        let bytesPerNanosecond = gain * Double(congestionWindow) / Double(rtt.nanoseconds)
        let capacity = max(Double(10 * self.maxDatagramSize), bytesPerNanosecond * 1_000_000)
        if let last = self.lastUpdate, now > last {
            self.tokens = min(capacity, self.tokens + bytesPerNanosecond * Double((now - last).nanoseconds))
        } else if self.lastUpdate == nil {
            self.tokens = capacity
        }
        self.lastUpdate = now
        if self.tokens >= Double(bytes) { return now }
        let wait = (Double(bytes) - self.tokens) / bytesPerNanosecond
        return now + .nanoseconds(Int64(wait.rounded(.up)))
    }

    mutating func onPacketSent(bytes: Int) {
        self.tokens -= Double(bytes)
    }
}
