import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Tells a loss caused by congestion from a random one (PROTOCOL §8.6), so that the window
/// shrinks for the first and not for the second.
///
/// A bottleneck that drops packets because its queue is full first raises the round-trip time by
/// the queue's delay; a lossy radio or a noisy cable drops packets without raising it. So a loss
/// is taken as congestion when the smallest RTT of the last two round trips stands above the
/// path's minimum by a quarter of it (at least ``minimumQueueDelay``, at most
/// ``maximumQueueDelay``): a standing queue, which jitter alone does not make, since jitter
/// leaves some packets fast. A loss is taken as
/// congestion too, whatever the delay, when the recent loss rate (a moving average over about
/// ``lossRateSample`` packets) exceeds ``congestiveLossRate``: a policer that drops without
/// queueing, or a path far over its capacity. This is the idea of TCP Veno and Westwood (delay
/// and delivery tell the two apart), kept to one rule.
struct LossEvidence: Sendable {
    /// A recent loss rate above this is congestion, whatever the delay.
    static let congestiveLossRate = 0.15
    /// The loss rate is an exponential moving average in which each packet weighs
    /// 1/``lossRateSample``, judged once that many packets were seen: 5 % random loss then stays
    /// well below 15 % (several standard deviations), which a count over one round trip of a fast
    /// path (a handful of packets) could not promise.
    static let lossRateSample = 128
    /// The smallest queueing delay that counts as a standing queue.
    static let minimumQueueDelay = TimeAmount.milliseconds(1)
    /// The largest: below the 5 ms an AQM such as CoDel keeps a queue at, so that its drops count
    /// as congestion whatever the path's RTT.
    static let maximumQueueDelay = TimeAmount.milliseconds(4)

    private var currentMinimumRTT: TimeAmount?
    private var previousMinimumRTT: TimeAmount?
    private var roundEnd: NIODeadline?
    private var averageLossRate = 0.0
    private var packetsSeen = 0

    /// The smallest RTT of the last two round trips.
    var recentMinimumRTT: TimeAmount? {
        switch (self.currentMinimumRTT, self.previousMinimumRTT) {
        case let (current?, previous?): min(current, previous)
        case let (current, previous): current ?? previous
        }
    }

    /// The recent share of packets lost among those acknowledged or declared lost; 0 until
    /// ``lossRateSample`` packets were seen.
    var recentLossRate: Double { self.packetsSeen >= Self.lossRateSample ? self.averageLossRate : 0 }

    /// An RTT sample (the peer's acknowledgement delay taken off).
    mutating func onRTTSample(_ sample: TimeAmount, now: NIODeadline, smoothedRTT: TimeAmount) {
        self.advance(now: now, smoothedRTT: smoothedRTT)
        self.currentMinimumRTT = min(self.currentMinimumRTT ?? sample, sample)
    }

    mutating func onAcknowledged(packets: Int, now: NIODeadline, smoothedRTT: TimeAmount) {
        self.advance(now: now, smoothedRTT: smoothedRTT)
        let keep = 1.0 - 1.0 / Double(Self.lossRateSample)
        self.averageLossRate *= packets == 1 ? keep : pow(keep, Double(packets))
        self.packetsSeen += packets
    }

    mutating func onLost(now: NIODeadline, smoothedRTT: TimeAmount) {
        self.advance(now: now, smoothedRTT: smoothedRTT)
        self.averageLossRate += (1 - self.averageLossRate) / Double(Self.lossRateSample)
        self.packetsSeen += 1
    }

    /// Whether losses now point at congestion, given the path's smallest RTT ever seen.
    func isCongestive(pathMinimumRTT: TimeAmount?) -> Bool {
        if self.recentLossRate > Self.congestiveLossRate { return true }
        guard let path = pathMinimumRTT, let recent = self.recentMinimumRTT else { return true }
        return recent > path + Self.standingQueueThreshold(pathMinimumRTT: path)
    }

    /// The queueing delay above the path's minimum RTT that counts as a standing queue: a quarter
    /// of the minimum, at least ``minimumQueueDelay`` and at most ``maximumQueueDelay``.
    static func standingQueueThreshold(pathMinimumRTT path: TimeAmount) -> TimeAmount {
        min(max(path / 4, Self.minimumQueueDelay), Self.maximumQueueDelay)
    }

    /// Rounds are one smoothed RTT long. A round with no RTT sample keeps the last one's
    /// minimum: the queue has not been seen to drain.
    private mutating func advance(now: NIODeadline, smoothedRTT: TimeAmount) {
        guard let end = self.roundEnd else {
            self.roundEnd = now + smoothedRTT
            return
        }
        guard now >= end else { return }
        self.previousMinimumRTT = self.currentMinimumRTT ?? self.previousMinimumRTT
        self.currentMinimumRTT = nil
        self.roundEnd = now + smoothedRTT
    }
}
