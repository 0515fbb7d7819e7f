import NIOCore
import NetworkImpairment
import PropertyBased
import Testing

@testable import GameKitTransport

/// Random loss, duplication, reordering and jitter (seeded, so every failure reproduces) through
/// the in-process network: reliable messages arrive exactly once and in order; unreliable
/// messages arrive whole, at most once, or not at all.
@Suite("Properties under impairment")
struct ImpairmentPropertyTests {
    static func profile(loss: Int, duplicate: Int, reorder: Int, jitter: Int) -> ImpairmentProfile {
        ImpairmentProfile(
            loss: Double(loss) / 100,
            delay: .milliseconds(3),
            jitter: .milliseconds(Int64(jitter)),
            reorderProbability: Double(reorder) / 100,
            reorderDelay: .milliseconds(12),
            duplicateProbability: Double(duplicate) / 100
        )
    }

    /// Message sizes from a seed: mostly small, some spanning several packets.
    static func sizes(seed: Int, count: Int) -> [Int] {
        var random = SeededRandom(seed: UInt64(seed))
        return (0..<count).map { _ in
            switch random.next(below: 10) {
            case 0: 8 + random.next(below: 20_000)
            case 1, 2: 8 + random.next(below: 1500)
            default: 8 + random.next(below: 300)
            }
        }
    }

    /// A network with A and B under the profile, a link between them, and `count` messages of
    /// seeded sizes queued on A in `mode`.
    static func scenario(
        mode: SendMode, loss: Int, duplicate: Int, reorder: Int, jitter: Int, seed: Int
    ) -> (network: VirtualNetwork, sender: LinkID, receiver: LinkID, sent: [ByteBuffer])? {
        var network = VirtualNetwork()
        let profile = Self.profile(loss: loss, duplicate: duplicate, reorder: reorder, jitter: jitter)
        let a = network.addNode(profile: profile, seed: UInt64(seed))
        let b = network.addNode(profile: profile, seed: UInt64(seed) &+ 17)
        guard let (sender, receiver) = network.openLink(from: a, to: b, limit: .seconds(60)) else {
            Issue.record("link did not open (loss \(loss)%)")
            return nil
        }
        let sent = Self.sizes(seed: seed, count: 120).enumerated().map { ByteBuffer.numbered($0.offset, size: $0.element) }
        for message in sent { network.nodes[a].outgoing.append((sender, message, mode)) }
        return (network, sender, receiver, sent)
    }

    static let impairments = (Gen.int(in: 0...25), Gen.int(in: 0...20), Gen.int(in: 0...20), Gen.int(in: 0...8), Gen.int(in: 0...1_000_000))

    @Test func reliableDeliveryIsExactlyOnceAndInOrder() async {
        let (loss, duplicate, reorder, jitter, seed) = Self.impairments
        await propertyCheck(count: 12, input: loss, duplicate, reorder, jitter, seed) { loss, duplicate, reorder, jitter, seed in
            guard let scenario = Self.scenario(mode: .reliable, loss: loss, duplicate: duplicate, reorder: reorder, jitter: jitter, seed: seed) else { return }
            var network = scenario.network
            let (receiver, sent) = (scenario.receiver, scenario.sent)
            network.run(for: .seconds(300)) { $0.nodes[1].received(on: receiver, mode: .reliable).count >= sent.count }
            let received = network.nodes[1].received(on: receiver, mode: .reliable)
            #expect(received == sent, "loss \(loss)% dup \(duplicate)% reorder \(reorder)% jitter \(jitter) ms seed \(seed)")
        }
    }

    @Test func unreliableDeliveryIsWholeAtMostOnceOrNotAtAll() async {
        let (loss, duplicate, reorder, jitter, seed) = Self.impairments
        await propertyCheck(count: 12, input: loss, duplicate, reorder, jitter, seed) { loss, duplicate, reorder, jitter, seed in
            guard let scenario = Self.scenario(mode: .unreliable, loss: loss, duplicate: duplicate, reorder: reorder, jitter: jitter, seed: seed) else { return }
            var network = scenario.network
            let (sender, receiver, sent) = (scenario.sender, scenario.receiver, scenario.sent)
            network.run(for: .seconds(30)) { $0.nodes[0].outgoing.isEmpty && $0.nodes[0].machine.links[sender.rawValue]?.machine.unreliableQueue.isEmpty == true }
            network.run(for: .seconds(3))
            var seen = Set<Int>()
            for message in network.nodes[1].received(on: receiver, mode: .unreliable) {
                guard let sequence = message.sequenceNumber, sent.indices.contains(sequence) else {
                    Issue.record("unknown message")
                    continue
                }
                #expect(message == sent[sequence], "message \(sequence) arrived altered")
                #expect(seen.insert(sequence).inserted, "message \(sequence) arrived twice")
            }
            if loss == 0, duplicate == 0, reorder == 0 {
                #expect(seen.count == sent.count)
            }
        }
    }
}
