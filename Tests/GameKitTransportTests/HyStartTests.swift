import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// The first slow start ends when the RTT rises (PROTOCOL §8.3): the rule alone, round by round,
/// and inside the CUBIC controller.
@Suite("Slow start's RTT exit")
struct HyStartTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// Feeds one round of `samples` RTT samples: the first acknowledges a packet sent as the
    /// round begins, after the previous round's start (so a round starts), the rest packets sent
    /// long before. Returns the time after it and whether a sample ended slow start.
    static func round(_ hyStart: inout HyStart, at now: NIODeadline, rtt: TimeAmount, samples: Int = 8) -> (NIODeadline, ended: Bool) {
        var decisions: [HyStart.Decision] = []
        let end = Self.round(&hyStart, at: now, rtt: rtt, samples: samples, decisions: &decisions)
        return (end, decisions.contains(.exit))
    }

    static func round(_ hyStart: inout HyStart, at start: NIODeadline, rtt: TimeAmount, samples: Int = 8, decisions: inout [HyStart.Decision]) -> NIODeadline {
        var now = start
        for index in 0..<samples {
            now = now + .microseconds(100)
            let sent = index == 0 ? start : NIODeadline.uptimeNanoseconds(0)
            decisions.append(hyStart.onRTTSample(rtt, timeSent: sent, now: now))
        }
        return now + rtt
    }

    @Test func aSteadyRTTLeavesSlowStartAlone() {
        var hyStart = HyStart()
        var now = self.start
        for _ in 0..<20 {
            let (next, ended) = Self.round(&hyStart, at: now, rtt: .milliseconds(10))
            #expect(!ended)
            now = next
        }
        #expect(hyStart.phase == .slowStart && !hyStart.exitedOnRTT)
    }

    @Test func aRiseOfAnEighthOfTheLastRoundsMinimumEndsItAndFiveRoundsConfirmIt() {
        var hyStart = HyStart()
        var (now, _) = Self.round(&hyStart, at: self.start, rtt: .milliseconds(10))
        // 10 ms: the threshold is max(1 ms, min(10/8 ms, 16 ms)) = 1.25 ms. A rise of 1.2 ms is
        // not enough; the next round is compared with that one.
        var ended: Bool
        (now, ended) = Self.round(&hyStart, at: now, rtt: .microseconds(11_200))
        #expect(!ended)
        (now, ended) = Self.round(&hyStart, at: now, rtt: .microseconds(12_300))
        #expect(!ended)
        (now, ended) = Self.round(&hyStart, at: now, rtt: .microseconds(13_900))
        #expect(ended && hyStart.exitedOnRTT)
        #expect(hyStart.phase == .confirming(baseline: .microseconds(13_900), roundsLeft: HyStart.confirmationRounds))
        // Rounds that stay at or above the baseline confirm it; the fifth one after is the last.
        for left in (1..<HyStart.confirmationRounds).reversed() {
            (now, ended) = Self.round(&hyStart, at: now, rtt: .microseconds(13_900))
            #expect(hyStart.phase == .confirming(baseline: .microseconds(13_900), roundsLeft: left))
        }
        (now, _) = Self.round(&hyStart, at: now, rtt: .milliseconds(14))
        #expect(hyStart.phase == .done && hyStart.exitedOnRTT)
        // Once over, nothing more is decided, even a fall.
        #expect(hyStart.onRTTSample(.milliseconds(1), timeSent: now, now: now + .milliseconds(1)) == .none)
    }

    @Test func anRTTThatFallsBackWhileConfirmingResumesSlowStart() {
        var hyStart = HyStart()
        var (now, _) = Self.round(&hyStart, at: self.start, rtt: .milliseconds(10))
        (now, _) = Self.round(&hyStart, at: now, rtt: .milliseconds(12))
        #expect(hyStart.phase == .confirming(baseline: .milliseconds(12), roundsLeft: HyStart.confirmationRounds))
        var decisions: [HyStart.Decision] = []
        now = Self.round(&hyStart, at: now, rtt: .microseconds(11_900), decisions: &decisions)
        #expect(decisions == Array(repeating: .none, count: HyStart.samplesPerRound - 1) + [.resume])
        #expect(hyStart.phase == .slowStart && hyStart.resumptions == 1 && !hyStart.exitedOnRTT)
    }

    @Test func fewerThanEightSamplesDecideNothing() {
        var hyStart = HyStart()
        var (now, _) = Self.round(&hyStart, at: self.start, rtt: .milliseconds(10))
        var ended: Bool
        (now, ended) = Self.round(&hyStart, at: now, rtt: .milliseconds(30), samples: HyStart.samplesPerRound - 1)
        #expect(!ended && hyStart.phase == .slowStart)
        // The round's eighth sample decides.
        #expect(hyStart.onRTTSample(.milliseconds(30), timeSent: self.start, now: now) == .exit)
    }

    @Test func jitterKeepsResumingSlowStart() {
        // 10 ms ± 8 ms, uniform: a round's smallest of eight samples often stands a millisecond
        // above the last round's, and as often below it again.
        var random = SeededRandom(seed: 7)
        var hyStart = HyStart()
        var now = self.start
        var roundsInSlowStart = 0
        for _ in 0..<200 {
            let roundStart = now
            for index in 0..<8 {
                now = now + .microseconds(100)
                let rtt = TimeAmount.microseconds(Int64.random(in: 2_000...18_000, using: &random))
                _ = hyStart.onRTTSample(rtt, timeSent: index == 0 ? roundStart : .uptimeNanoseconds(0), now: now)
            }
            if hyStart.phase == .slowStart { roundsInSlowStart += 1 }
            now = now + .milliseconds(10)
        }
        // Every exit but perhaps the last was undone, and most rounds grew as slow start does.
        #expect(hyStart.exits > 10 && hyStart.resumptions >= hyStart.exits - 1, "\(hyStart)")
        #expect(roundsInSlowStart > 100, "\(roundsInSlowStart)")
    }

    @Test func theThresholdIsAnEighthOfTheRTTBetweenOneAndSixteenMilliseconds() {
        #expect(HyStart.threshold(lastRoundMinimum: .microseconds(1_500)) == .milliseconds(1))
        #expect(HyStart.threshold(lastRoundMinimum: .milliseconds(40)) == .milliseconds(5))
        #expect(HyStart.threshold(lastRoundMinimum: .milliseconds(400)) == .milliseconds(16))
        for base in [TimeAmount.microseconds(1_500), .milliseconds(40), .milliseconds(400)] {
            let threshold = HyStart.threshold(lastRoundMinimum: base)
            var below = HyStart()
            var (now, _) = Self.round(&below, at: self.start, rtt: base)
            #expect(!Self.round(&below, at: now, rtt: base + threshold - .microseconds(10)).ended, "\(base)")
            var at = HyStart()
            (now, _) = Self.round(&at, at: self.start, rtt: base)
            #expect(Self.round(&at, at: now, rtt: base + threshold).ended, "\(base)")
        }
    }

    @Test func theControllerAvoidsCongestionFromTheWindowReached() {
        let mss = 1200
        var cubic = CubicCongestionController(maxDatagramSize: mss)
        var now = self.start
        /// One round: a window's worth sent and acknowledged, each acknowledgement with an RTT
        /// sample. Returns the growth.
        func round(rtt: TimeAmount) -> Int {
            let before = cubic.congestionWindow
            let packets = before / mss
            let sent = now
            for _ in 0..<packets { cubic.onPacketSent(bytes: mss) }
            now = now + rtt
            for _ in 0..<packets {
                cubic.onRTTSample(rtt, timeSent: sent, now: now)
                cubic.onPacketAcknowledged(bytes: mss, timeSent: sent, now: now, smoothedRTT: rtt)
            }
            cubic.onAcknowledgementsProcessed()
            return cubic.congestionWindow - before
        }
        // The rule runs from 16 packets on: from the seventh acknowledgement of the first round.
        #expect(round(rtt: .milliseconds(10)) == 10 * mss)
        #expect(round(rtt: .milliseconds(10)) == 20 * mss)
        #expect(cubic.isInSlowStart && cubic.hyStart.phase == .slowStart)
        // The RTT rises by 3 ms (the threshold is 1.25 ms): the eighth sample ends slow start at
        // the window reached then, and the rest of the round grows by CUBIC's curve, far less.
        let growth = round(rtt: .milliseconds(13))
        #expect(!cubic.isInSlowStart)
        #expect(cubic.slowStartThreshold == 40 * mss + 7 * mss)
        #expect(growth > 7 * mss && growth < 8 * mss, "\(growth)")
        #expect(cubic.hyStart.exitedOnRTT)
        // A round that falls back below 13 ms resumes slow start: the window doubles again.
        let window = cubic.congestionWindow
        let resumed = round(rtt: .milliseconds(10))
        #expect(cubic.isInSlowStart && cubic.hyStart.resumptions == 1)
        #expect(resumed > window / 2, "\(resumed)")
    }

    @Test func belowSixteenPacketsTheRuleDoesNotRun() {
        var cubic = CubicCongestionController(maxDatagramSize: 1200)
        var now = self.start
        for rtt in stride(from: 10, through: 200, by: 10) {
            for index in 0..<8 {
                now = now + .microseconds(100)
                cubic.onRTTSample(.milliseconds(Int64(rtt)), timeSent: index == 0 ? now : self.start, now: now)
            }
        }
        #expect(cubic.isInSlowStart && cubic.hyStart.phase == .slowStart && cubic.hyStart.exits == 0)
    }

    @Test func aLossEndsTheRuleForGood() {
        let mss = 1200
        var cubic = CubicCongestionController(maxDatagramSize: mss)
        for _ in 0..<10 { cubic.onPacketSent(bytes: mss) }
        cubic.onPacketLost(bytes: mss, timeSent: self.start, now: self.start + .milliseconds(10))
        #expect(cubic.hyStart.phase == .done && !cubic.hyStart.exitedOnRTT)
        #expect(!cubic.isInSlowStart)
    }
}
