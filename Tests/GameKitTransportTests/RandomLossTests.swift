import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// Random loss is not congestion (PROTOCOL §8.6), and reordering is not loss (§7.4): a bulk
/// transfer in the seeded virtual network, 5 ms each way, with random loss, with a bottleneck's
/// queue, and with jitter that reorders.
@Suite("Random loss, congestion and reordering")
struct RandomLossTests {
    struct Outcome {
        var delivered: Int
        var statistics: LinkStatistics
        var bottleneckDrops: Int
    }

    /// Sends 1000-byte messages from node 0 to node 1 for `seconds` of virtual time.
    static func transfer(
        loss: Double = 0, jitter: TimeAmount = .zero, bottleneck: VirtualNetwork.Bottleneck? = nil,
        toleratesRandomLoss: Bool = true, seconds: Int64 = 2, messages: Int = 15_000
    ) throws -> Outcome {
        var network = VirtualNetwork()
        var configuration = TransportConfiguration()
        configuration.toleratesRandomLoss = toleratesRandomLoss
        let sender = network.addNode(configuration: configuration, profile: ImpairmentProfile(loss: loss, delay: .milliseconds(5), jitter: jitter), seed: 11)
        let receiver = network.addNode(configuration: configuration, profile: ImpairmentProfile(delay: .milliseconds(5), jitter: jitter), seed: 11)
        let opened = network.openLink(from: sender, to: receiver)
        let (link, peerLink) = try #require(opened)
        if let bottleneck { network.bottlenecks[sender] = bottleneck }
        for index in 0..<messages { network.nodes[sender].outgoing.append((link, .numbered(index, size: 1000), .reliable)) }
        network.run(for: .seconds(seconds))
        let received = network.nodes[receiver].received(on: peerLink, mode: .reliable)
        // Whatever the path did, what arrived arrived once and in order.
        #expect(received.map(\.sequenceNumber) == Array(0..<received.count))
        return Outcome(
            delivered: received.count, statistics: try #require(network.nodes[sender].machine.linkStatistics(link)),
            bottleneckDrops: network.bottlenecks[sender]?.dropped ?? 0)
    }

    @Test func lossEvidenceReadsAStandingQueueOrAHighLossRateAsCongestion() {
        var evidence = LossEvidence()
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let path = TimeAmount.milliseconds(10)
        // Nothing known yet: a loss counts as congestion.
        #expect(evidence.isCongestive(pathMinimumRTT: nil))
        /// 100 µs steps (a 10 ms round holds 100): an RTT sample, then a loss every `lossEvery`
        /// packets, else an acknowledgement.
        func feed(_ steps: Int, rtt: TimeAmount, lossEvery: Int) {
            for step in 1...steps {
                now = now + .microseconds(100)
                evidence.onRTTSample(rtt, now: now, smoothedRTT: path)
                if step % lossEvery == 0 {
                    evidence.onLost(now: now, smoothedRTT: path)
                } else {
                    evidence.onAcknowledged(packets: 1, now: now, smoothedRTT: path)
                }
            }
        }
        // 5 % loss at the path's minimum RTT: random.
        feed(2_000, rtt: path, lossEvery: 20)
        #expect(!evidence.isCongestive(pathMinimumRTT: path))
        #expect(abs(evidence.recentLossRate - 0.05) < 0.02, "\(evidence.recentLossRate)")
        // A standing queue of 4 ms for two rounds: congestion.
        feed(300, rtt: path + .milliseconds(4), lossEvery: 20)
        #expect(evidence.isCongestive(pathMinimumRTT: path))
        // Under a quarter of the minimum (2.5 ms here): not.
        feed(300, rtt: path + .milliseconds(2), lossEvery: 20)
        #expect(!evidence.isCongestive(pathMinimumRTT: path))
        // A policer: a third lost with no delay at all: congestion, by the rate.
        feed(600, rtt: path, lossEvery: 3)
        #expect(evidence.recentLossRate > LossEvidence.congestiveLossRate)
        #expect(evidence.isCongestive(pathMinimumRTT: path))
    }

    @Test func aStandingQueueIsAQuarterOfTheRTTBetweenOneAndFourMilliseconds() {
        let cases: [(path: TimeAmount, threshold: TimeAmount)] = [
            (.microseconds(500), .milliseconds(1)),  // a LAN: the 1 ms floor
            (.milliseconds(10), .microseconds(2_500)),
            (.milliseconds(40), .milliseconds(4)),  // CoDel keeps 5 ms: its drops count
            (.milliseconds(300), .milliseconds(4)),  // the cap, whatever the path
        ]
        for (path, threshold) in cases {
            #expect(LossEvidence.standingQueueThreshold(pathMinimumRTT: path) == threshold)
            var evidence = LossEvidence()
            var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
            for _ in 0..<3 {
                now = now + path
                evidence.onRTTSample(path + threshold + .microseconds(1), now: now, smoothedRTT: path)
            }
            #expect(evidence.isCongestive(pathMinimumRTT: path), "\(path)")
            var quiet = LossEvidence()
            for _ in 0..<3 {
                now = now + path
                quiet.onRTTSample(path + threshold, now: now, smoothedRTT: path)
            }
            #expect(!quiet.isCongestive(pathMinimumRTT: path), "\(path)")
        }
    }

    @Test func randomLossCostsRetransmissionsNotTheWindow() throws {
        let tolerant = try Self.transfer(loss: 0.05)
        let classic = try Self.transfer(loss: 0.05, toleratesRandomLoss: false)
        let clean = try Self.transfer()
        // Most losses on a path with no queue are taken as random, and the window keeps growing:
        // at least twice what classic CUBIC delivers, and half of what the clean path does.
        #expect(tolerant.statistics.randomLosses > 10 * tolerant.statistics.congestiveLosses, "\(tolerant.statistics)")
        #expect(classic.statistics.randomLosses == 0 && classic.statistics.congestiveLosses > 0)
        #expect(tolerant.delivered >= 2 * classic.delivered, "tolerant \(tolerant.delivered), classic \(classic.delivered)")
        #expect(tolerant.delivered * 2 >= clean.delivered, "tolerant \(tolerant.delivered), clean \(clean.delivered)")
        #expect(tolerant.statistics.congestionWindow > 2 * classic.statistics.congestionWindow)
    }

    @Test func aBottlenecksFullQueueShrinksTheWindowAsCUBICDoes() throws {
        // 4 MB/s with a 20 ms queue: 10 ms of path, so about 60 KB of window fills the pipe
        // and the queue; a window that kept growing would lose more and more.
        let bottleneck = VirtualNetwork.Bottleneck(bytesPerSecond: 4_000_000, queueLimit: .milliseconds(20))
        let tolerant = try Self.transfer(bottleneck: bottleneck)
        let classic = try Self.transfer(bottleneck: bottleneck, toleratesRandomLoss: false)
        #expect(tolerant.bottleneckDrops > 0)
        // The queue's delay marks its drops as congestion, and the window stays near what the
        // path holds, as classic CUBIC's does.
        #expect(tolerant.statistics.congestiveLosses > tolerant.statistics.randomLosses, "\(tolerant.statistics)")
        #expect(tolerant.statistics.congestionWindow < 4 * 140_000, "\(tolerant.statistics)")
        #expect(tolerant.bottleneckDrops <= 2 * max(classic.bottleneckDrops, 1), "tolerant \(tolerant.bottleneckDrops), classic \(classic.bottleneckDrops)")
        #expect(tolerant.delivered <= classic.delivered * 5 / 4 && classic.delivered <= tolerant.delivered * 5 / 4, "tolerant \(tolerant.delivered), classic \(classic.delivered)")
    }

    @Test func reorderingIsNotLossAndAReductionItCausedIsUndone() throws {
        // 5 ms ± 2 ms each way: packets overtake each other by up to 4 ms, and nothing is lost.
        // Every loss counts as congestion here (as classic CUBIC), so that the reductions the
        // reordering causes are there to be undone.
        let jittery = try Self.transfer(jitter: .milliseconds(4), toleratesRandomLoss: false)
        let clean = try Self.transfer()
        #expect(jittery.statistics.reorderingSeen)
        // Every loss declared was reordering; once seen, loss is decided by time, and the window
        // keeps most of the clean path's delivery.
        #expect(jittery.statistics.spuriousLosses > 0 && jittery.statistics.reductionsUndone > 0, "\(jittery.statistics)")
        #expect(jittery.delivered * 2 >= clean.delivered, "jittery \(jittery.delivered), clean \(clean.delivered)")
    }
}
