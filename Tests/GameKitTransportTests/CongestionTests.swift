import NIOCore
import Testing

@testable import GameKitTransport

@Suite("RTT estimation and congestion control")
struct CongestionTests {
    @Test func rttFollowsRFC6298() {
        var rtt = RTTEstimator(initialRTT: .milliseconds(100))
        #expect(rtt.retransmissionTimeout(peerMaxAckDelay: .zero, bounds: .zero...(.seconds(60))) == .milliseconds(300))
        rtt.addSample(.milliseconds(40), ackDelay: .zero)
        #expect(rtt.smoothed == .milliseconds(40))
        #expect(rtt.variation == .milliseconds(20))
        rtt.addSample(.milliseconds(80), ackDelay: .zero)
        // RTTVAR = 3/4·20 + 1/4·|40 − 80| = 25; SRTT = 7/8·40 + 1/8·80 = 45.
        #expect(rtt.variation == .milliseconds(25))
        #expect(rtt.smoothed == .milliseconds(45))
        #expect(rtt.retransmissionTimeout(peerMaxAckDelay: .milliseconds(5), bounds: .zero...(.seconds(60))) == .milliseconds(150))
        #expect(rtt.retransmissionTimeout(peerMaxAckDelay: .zero, bounds: .milliseconds(200)...(.seconds(60))) == .milliseconds(200))
        #expect(rtt.retransmissionTimeout(peerMaxAckDelay: .zero, bounds: .zero...(.milliseconds(100))) == .milliseconds(100))
    }

    @Test func ackDelayIsSubtractedButNeverBelowTheMinimum() {
        var rtt = RTTEstimator(initialRTT: .milliseconds(100))
        rtt.addSample(.milliseconds(10), ackDelay: .zero)
        rtt.addSample(.milliseconds(30), ackDelay: .milliseconds(15))
        // 30 − 15 = 15 ≥ minimum 10: adjusted.
        #expect(rtt.smoothed == .nanoseconds((10_000_000 * 7 + 15_000_000) / 8))
        var other = RTTEstimator(initialRTT: .milliseconds(100))
        other.addSample(.milliseconds(10), ackDelay: .zero)
        other.addSample(.milliseconds(12), ackDelay: .milliseconds(5))
        // 12 − 5 < 10: not adjusted.
        #expect(other.smoothed == .nanoseconds((10_000_000 * 7 + 12_000_000) / 8))
    }

    static let mss = 1200
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func slowStartDoublesTheWindowEachRoundTrip() {
        var cubic = CubicCongestionController(maxDatagramSize: Self.mss)
        #expect(cubic.congestionWindow == 10 * Self.mss)
        var now = self.start
        for _ in 0..<3 {
            let window = cubic.congestionWindow
            let packets = window / Self.mss
            for _ in 0..<packets { cubic.onPacketSent(bytes: Self.mss) }
            #expect(!cubic.canSend(bytes: Self.mss))
            now = now + .milliseconds(10)
            for _ in 0..<packets {
                cubic.onPacketAcknowledged(bytes: Self.mss, timeSent: now - .milliseconds(10), now: now, smoothedRTT: .milliseconds(10))
            }
            cubic.onAcknowledgementsProcessed()
            #expect(cubic.congestionWindow == 2 * window)
        }
    }

    @Test func lossCutsTheWindowByBetaOncePerRecoveryPeriod() {
        var cubic = CubicCongestionController(maxDatagramSize: Self.mss)
        for _ in 0..<10 { cubic.onPacketSent(bytes: Self.mss) }
        let window = cubic.congestionWindow
        let sentAt = self.start
        cubic.onPacketLost(bytes: Self.mss, timeSent: sentAt, now: self.start + .milliseconds(10))
        #expect(cubic.congestionWindow == Int(Double(window) * 0.7))
        // Another loss from the same flight: no second cut.
        cubic.onPacketLost(bytes: Self.mss, timeSent: sentAt, now: self.start + .milliseconds(11))
        #expect(cubic.congestionWindow == Int(Double(window) * 0.7))
        #expect(!cubic.isInSlowStart)
        #expect(cubic.lossReductions == 1 && cubic.congestiveLosses == 2)
        // A loss of a packet sent after recovery began: cut again.
        cubic.onPacketLost(bytes: Self.mss, timeSent: self.start + .milliseconds(20), now: self.start + .milliseconds(30))
        #expect(cubic.congestionWindow == Int(Double(Int(Double(window) * 0.7)) * 0.7))
        #expect(cubic.lossReductions == 2 && cubic.congestiveLosses == 3)
        // A random loss cuts nothing and counts no reduction.
        cubic.onPacketLost(bytes: Self.mss, timeSent: self.start + .milliseconds(40), now: self.start + .milliseconds(50), congestive: false)
        #expect(cubic.lossReductions == 2 && cubic.randomLosses == 1)
    }

    @Test func congestionAvoidanceGrowsTowardTheOldMaximumThenBeyond() {
        var cubic = CubicCongestionController(maxDatagramSize: Self.mss, initialWindowPackets: 100)
        for _ in 0..<100 { cubic.onPacketSent(bytes: Self.mss) }
        cubic.onPacketLost(bytes: Self.mss, timeSent: self.start, now: self.start)
        let reduced = cubic.congestionWindow
        var now = self.start
        var windows: [Int] = []
        for _ in 0..<200 {
            now = now + .milliseconds(20)
            let packets = cubic.congestionWindow / Self.mss
            for _ in 0..<packets { cubic.onPacketSent(bytes: Self.mss) }
            for _ in 0..<packets {
                cubic.onPacketAcknowledged(bytes: Self.mss, timeSent: now - .milliseconds(10), now: now, smoothedRTT: .milliseconds(20))
            }
            cubic.onAcknowledgementsProcessed()
            windows.append(cubic.congestionWindow)
        }
        #expect(windows.first! > reduced)
        #expect(zip(windows, windows.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(windows.last! > 100 * Self.mss)
    }

    @Test func applicationLimitedSendersDoNotGrowTheWindow() {
        var cubic = CubicCongestionController(maxDatagramSize: Self.mss)
        let window = cubic.congestionWindow
        for _ in 0..<50 {
            cubic.onPacketSent(bytes: Self.mss)
            cubic.onPacketAcknowledged(bytes: Self.mss, timeSent: self.start, now: self.start + .milliseconds(1), smoothedRTT: .milliseconds(1))
            cubic.onAcknowledgementsProcessed()
        }
        #expect(cubic.congestionWindow == window)
    }

    @Test func timeoutRestartsFromTheMinimumAndASpuriousOneIsUndone() {
        var cubic = CubicCongestionController(maxDatagramSize: Self.mss)
        for _ in 0..<10 { cubic.onPacketSent(bytes: Self.mss) }
        let window = cubic.congestionWindow
        cubic.onRetransmissionTimeout(now: self.start)
        #expect(cubic.congestionWindow == 2 * Self.mss)
        cubic.onAcknowledgementAfterTimeout(originalTransmissionAcknowledged: true)
        #expect(cubic.congestionWindow == window)
        cubic.onRetransmissionTimeout(now: self.start + .seconds(1))
        cubic.onAcknowledgementAfterTimeout(originalTransmissionAcknowledged: false)
        #expect(cubic.congestionWindow == 2 * Self.mss)
    }

    @Test func pacerLetsABurstThroughThenSpacesPackets() {
        var pacer = Pacer(maxDatagramSize: Self.mss)
        let now = self.start
        // 120 kB window over 100 ms: 1.5 MB/s at gain 1.25; the bucket holds 10 packets.
        var sentAtOnce = 0
        while pacer.earliestSendTime(bytes: Self.mss, now: now, congestionWindow: 120_000, smoothedRTT: .milliseconds(100), inSlowStart: false) == now {
            pacer.onPacketSent(bytes: Self.mss)
            sentAtOnce += 1
            if sentAtOnce > 100 { break }
        }
        #expect(sentAtOnce == 10)
        let next = pacer.earliestSendTime(bytes: Self.mss, now: now, congestionWindow: 120_000, smoothedRTT: .milliseconds(100), inSlowStart: false)
        #expect(next > now && next - now <= .microseconds(800))
        // Without an RTT estimate there is no pacing.
        #expect(pacer.earliestSendTime(bytes: Self.mss, now: now, congestionWindow: 120_000, smoothedRTT: nil, inSlowStart: false) == now)
    }
}
