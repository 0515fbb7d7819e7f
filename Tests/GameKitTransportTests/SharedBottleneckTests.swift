import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// Flows of ours through one drop-tail bottleneck in the virtual network (PROTOCOL §8.3, §8.6):
/// slow start stops before a deep queue fills, and a flow that starts second gets its share.
/// `gk-bench fairness` measures the same through a real kernel queue, beside kernel TCP and ENet.
@Suite("A shared bottleneck")
struct SharedBottleneckTests {
    /// A sender and a receiver 0.5 ms apart each way, the sender's egress through `bottleneck`.
    static func network(_ bottleneck: VirtualBottleneck, seed: UInt64 = 1) -> VirtualNetwork {
        var network = VirtualNetwork()
        network.addNode(profile: ImpairmentProfile(delay: .microseconds(500)), seed: seed)
        network.addNode(profile: ImpairmentProfile(delay: .microseconds(500)), seed: seed)
        network.bottlenecks[0] = bottleneck
        return network
    }

    /// Opens a link from node 0 to node 1 and starts an endless stream of 1000-byte messages on it.
    static func startFlow(_ network: inout VirtualNetwork) throws -> (sender: LinkID, receiver: LinkID) {
        let opened = network.openLink(from: 0, to: 1)
        let (link, peerLink) = try #require(opened)
        network.nodes[0].streams[link] = .init(size: 1000)
        return (link, peerLink)
    }

    @Test func slowStartEndsBeforeADeepQueueFills() throws {
        // 20 Mbit/s with 100 ms of queue (250 KB) on a 1 ms path: slow start alone would double
        // the window until the queue overflows.
        var network = Self.network(VirtualBottleneck(bytesPerSecond: 2_500_000, queueLimit: .milliseconds(100)))
        let flow = try Self.startFlow(&network)
        network.run(for: .seconds(1))
        let statistics = try #require(network.nodes[0].machine.linkStatistics(flow.sender))
        #expect(statistics.slowStartEndedByDelay)
        #expect(network.bottlenecks[0]!.dropped == 0 && statistics.packetsLost == 0, "\(statistics)")
        #expect(statistics.congestionWindow < 150_000, "\(statistics)")
        // And the link still fills the bottleneck: at least 90 % of its rate over the second.
        let delivered = network.nodes[1].received(on: flow.receiver, mode: .reliable).count
        #expect(delivered >= 2_250, "\(delivered)")
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func aFlowThatStartsSecondGetsItsShare(seed: UInt64) throws {
        // 8 Mbit/s with 100 ms of queue (100 KB); the second flow starts 10–40 ms after the
        // first, when the first has begun to fill the queue. With slow start ended only by a loss,
        // the first of seed 1 delivered 3.2 times what the second did, and seed 3 the reverse 1.6.
        var network = Self.network(VirtualBottleneck(bytesPerSecond: 1_000_000, queueLimit: .milliseconds(100)), seed: seed)
        let first = try Self.startFlow(&network)
        network.run(for: .milliseconds(Int64(seed) * 10))
        let second = try Self.startFlow(&network)
        network.run(for: .seconds(10))
        let delivered = [first, second].map { network.nodes[1].received(on: $0.receiver, mode: .reliable).count }
        // Together they fill the link (1,000 messages a second), and neither gets less than 0.6
        // of what the other gets.
        #expect(delivered[0] + delivered[1] >= 9_500, "\(delivered)")
        #expect(Double(delivered.min()!) >= 0.6 * Double(delivered.max()!), "\(delivered)")
    }
}
