import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// The two calls a session layer needs on top of single sends: one message to several links,
/// all or nothing; and a disconnect timeout changed while links are open.
@Suite("Batch sends and live disconnect timeouts")
struct BatchAndTimeoutTests {
    /// A node with links to two others, and a send buffer of `capacity` bytes.
    static func star(capacity: Int = 10_000) -> (network: VirtualNetwork, hub: Int, links: [LinkID], receivers: [(node: Int, link: LinkID)]) {
        var network = VirtualNetwork()
        var configuration = TransportConfiguration()
        configuration.sendBufferCapacity = capacity
        let hub = network.addNode(configuration: configuration)
        var links: [LinkID] = []
        var receivers: [(Int, LinkID)] = []
        for _ in 0..<2 {
            let other = network.addNode()
            let (link, remote) = network.openLink(from: hub, to: other)!
            links.append(link)
            receivers.append((other, remote))
        }
        network.run(for: .milliseconds(100))
        return (network, hub, links, receivers)
    }

    @Test func aBatchReachesEveryLinkInOrder() throws {
        var (network, hub, links, receivers) = Self.star()
        for sequence in 0..<3 {
            try network.nodes[hub].machine.send(links.map { (ByteBuffer.numbered(sequence, size: 100), $0) }, mode: .reliable)
        }
        network.run(for: .seconds(1))
        for (node, link) in receivers {
            #expect(network.nodes[node].received(on: link, mode: .reliable).map(\.sequenceNumber) == [0, 1, 2])
        }
    }

    @Test func aFullBufferOnOneLinkRefusesTheWholeBatch() throws {
        var (network, hub, links, receivers) = Self.star()
        // Fill the second link without letting anything leave.
        try network.nodes[hub].machine.send(.numbered(99, size: 9_950), on: links[1], mode: .reliable)
        #expect(throws: TransportError.bufferFull) {
            try network.nodes[hub].machine.send(links.map { (ByteBuffer.numbered(1, size: 100), $0) }, mode: .reliable)
        }
        network.run(for: .seconds(1))
        // Nothing of the refused batch went anywhere, not even to the link with room.
        #expect(network.nodes[receivers[0].node].received(on: receivers[0].link, mode: .reliable).isEmpty)
        #expect(network.nodes[receivers[1].node].received(on: receivers[1].link, mode: .reliable).map(\.sequenceNumber) == [99])
        // Once the buffer has drained, the same batch goes through.
        try network.nodes[hub].machine.send(links.map { (ByteBuffer.numbered(1, size: 100), $0) }, mode: .reliable)
        network.run(for: .seconds(1))
        #expect(network.nodes[receivers[0].node].received(on: receivers[0].link, mode: .reliable).map(\.sequenceNumber) == [1])
        #expect(network.nodes[receivers[1].node].received(on: receivers[1].link, mode: .reliable).map(\.sequenceNumber) == [99, 1])
    }

    @Test func messagesForOneLinkInABatchAreCheckedBehindEachOther() throws {
        var (network, hub, links, receivers) = Self.star()
        // Each fits alone; together they overflow the first link's buffer.
        let batch = [(ByteBuffer.numbered(1, size: 6_000), links[0]), (ByteBuffer.numbered(2, size: 6_000), links[0]), (ByteBuffer.numbered(3, size: 10), links[1])]
        #expect(throws: TransportError.bufferFull) { try network.nodes[hub].machine.send(batch, mode: .reliable) }
        network.run(for: .seconds(1))
        for (node, link) in receivers {
            #expect(network.nodes[node].received(on: link, mode: .reliable).isEmpty)
        }
    }

    @Test func anUnknownLinkOrATooBigMessageRefusesTheBatchWithItsOwnError() throws {
        var (network, hub, links, receivers) = Self.star()
        let unknown = LinkID(rawValue: 999_999)
        #expect(throws: TransportError.linkNotOpen) {
            try network.nodes[hub].machine.send([(ByteBuffer.numbered(1, size: 10), links[0]), (ByteBuffer.numbered(1, size: 10), unknown)], mode: .reliable)
        }
        let limit = TransportConfiguration().maxUnreliableMessageSize
        #expect(throws: TransportError.dataTooBig(size: limit + 1, limit: limit)) {
            try network.nodes[hub].machine.send([(ByteBuffer.numbered(1, size: 10), links[0]), (ByteBuffer.numbered(2, size: limit + 1), links[1])], mode: .unreliable)
        }
        network.run(for: .seconds(1))
        for (node, link) in receivers {
            #expect(network.nodes[node].received(on: link, mode: .reliable).isEmpty)
            #expect(network.nodes[node].received(on: link, mode: .unreliable).isEmpty)
        }
        // An empty batch is no error and sends nothing.
        try network.nodes[hub].machine.send([], mode: .reliable)
    }

    /// Opens a link from a to b, lets `change` act on a's machine, then silences b and returns
    /// how a's link ended and how long after the silence began (virtual time). b's last packet
    /// came up to 100 ms before the silence.
    static func silencedPeer(_ change: (inout EndpointMachine) throws -> Void) rethrows -> (reasons: [LinkCloseReason], after: TimeAmount) {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        _ = network.openLink(from: a, to: b)!
        network.run(for: .milliseconds(100))
        try change(&network.nodes[a].machine)
        network.interceptor = { $0.source != VirtualNetwork.address(2) }
        let silentSince = network.now
        network.run(for: .seconds(120)) { !$0.nodes[a].closeReasons.isEmpty }
        return (network.nodes[a].closeReasons, network.now - silentSince)
    }

    @Test func aSilentPeerIsDeclaredGoneExactlyTheDisconnectTimeoutAfterItsLastPacket() throws {
        var configuration = TransportConfiguration()
        configuration.disconnectTimeout = .seconds(3)
        var network = VirtualNetwork()
        let a = network.addNode(configuration: configuration, profile: ImpairmentProfile(delay: .milliseconds(7)))
        let b = network.addNode(configuration: configuration, profile: ImpairmentProfile(delay: .milliseconds(7)))
        let (link, _) = network.openLink(from: a, to: b)!
        // Some traffic, then b falls silent at an instant of no particular meaning.
        for sequence in 0..<20 { try network.nodes[a].machine.send(.numbered(sequence, size: 500), on: link, mode: .reliable) }
        network.run(for: .milliseconds(1_234))
        let silenced = network.nodes[b].address
        network.interceptor = { $0.source != silenced }
        let lastHeard = try #require(network.lastDelivered[silenced])
        // Not a nanosecond before the timeout: still open one tick earlier.
        network.run(for: lastHeard + .seconds(3) - .nanoseconds(1) - network.now)
        #expect(network.nodes[a].closeReasons.isEmpty)
        network.run(for: .seconds(10)) { !$0.nodes[a].closeReasons.isEmpty }
        #expect(network.nodes[a].closeReasons == [.timedOut])
        #expect(network.now == lastHeard + .seconds(3))
    }

    @Test func aShorterTimeoutAppliesToLinksAlreadyOpen() throws {
        let (reasons, after) = try Self.silencedPeer { try $0.setDisconnectTimeout(.seconds(2)) }
        #expect(reasons == [.timedOut])
        // 2 s after b's last packet, not the default 20 s.
        #expect(after >= .milliseconds(1_900) && after <= .seconds(2))
    }

    @Test func aLongerTimeoutKeepsASilentPeerPastTheDefault() throws {
        let (reasons, after) = try Self.silencedPeer { try $0.setDisconnectTimeout(.seconds(60)) }
        #expect(reasons == [.timedOut])
        #expect(after >= .milliseconds(59_900) && after <= .seconds(60))
    }

    @Test func anInvalidTimeoutIsRefusedAndChangesNothing() throws {
        let standard = TransportConfiguration().disconnectTimeout
        let (reasons, after) = Self.silencedPeer { machine in
            #expect(throws: TransportError.invalidConfiguration("disconnectTimeout must be positive")) {
                try machine.setDisconnectTimeout(.zero)
            }
            #expect(machine.configuration.disconnectTimeout == standard)
        }
        #expect(reasons == [.timedOut])
        #expect(after >= standard - .milliseconds(100) && after <= standard)
    }
}
