import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// Links between multi-homed endpoints (PROTOCOL §6.7), in virtual time: when the path a link
/// uses dies (an interface went down), the link moves to another of the peer's addresses, loses
/// nothing, and the peer follows it; a healthy link never moves; with every path dead it keeps
/// trying until the disconnect timeout.
@Suite("Links moving to another of the peer's addresses")
struct LinkPathTests {
    /// Node 0 connects to node 1 over network 0; both are on network 1 too, and each link knows
    /// both of the peer's addresses.
    static func multiHomed(_ profile: ImpairmentProfile = .perfect) -> (VirtualNetwork, LinkID, LinkID) {
        var net = VirtualNetwork()
        net.addNode(profile: profile)
        net.addNode(profile: profile)
        net.nodes[0].aliases = [VirtualNetwork.address(1, network: 1)]
        net.nodes[1].aliases = [VirtualNetwork.address(2, network: 1)]
        let (a, b) = net.openLink(from: 0, to: 1)!
        net.nodes[0].machine.setAlternateAddresses([VirtualNetwork.address(2), VirtualNetwork.address(2, network: 1)], for: a)
        net.nodes[1].machine.setAlternateAddresses([VirtualNetwork.address(1), VirtualNetwork.address(1, network: 1)], for: b)
        return (net, a, b)
    }

    static func moves(_ node: SimulatedNode) -> [SocketAddress] {
        node.events.compactMap { if case .linkMoved(_, _, let to) = $0 { to } else { nil } }
    }

    static func remote(_ net: VirtualNetwork, _ node: Int, _ link: LinkID) -> SocketAddress? {
        net.nodes[node].machine.links[link.rawValue]?.machine.remoteAddress
    }

    /// Every datagram to network `dead` is lost (its interface went down).
    static func cut(_ net: inout VirtualNetwork, networks dead: @escaping @Sendable () -> Set<Int>) {
        net.interceptor = { datagram in !dead().contains(VirtualNetwork.network(of: datagram.destination)) }
    }

    @Test func aPathThatDiesIsLeftForThePeersOtherAddressWithoutLosingAMessage() {
        var (net, a, b) = Self.multiHomed(ImpairmentProfile(delay: .milliseconds(10)))
        for sequence in 0..<400 { net.nodes[0].outgoing.append((a, .numbered(sequence, size: 700), .reliable)) }
        for sequence in 0..<400 { net.nodes[1].outgoing.append((b, .numbered(sequence, size: 700), .reliable)) }
        net.run(for: .milliseconds(25))
        // Mid-transfer.
        #expect(net.nodes[1].received(on: b, mode: .reliable).count < 400)
        Self.cut(&net) { [0] }
        let died = net.now
        #expect(net.run(for: .seconds(30)) { net in
            net.nodes[1].received(on: b, mode: .reliable).count == 400 && net.nodes[0].received(on: a, mode: .reliable).count == 400
        })
        // In order, once each, both ways; the link never closed.
        #expect(net.nodes[1].received(on: b, mode: .reliable).map(\.sequenceNumber) == (0..<400).map { $0 })
        #expect(net.nodes[0].received(on: a, mode: .reliable).map(\.sequenceNumber) == (0..<400).map { $0 })
        #expect(net.nodes[0].closeReasons.isEmpty && net.nodes[1].closeReasons.isEmpty)
        // Both ends now use network 1: one moved by itself, the other followed it (or moved too).
        #expect(Self.remote(net, 0, a) == VirtualNetwork.address(2, network: 1))
        #expect(Self.remote(net, 1, b) == VirtualNetwork.address(1, network: 1))
        #expect(Self.moves(net.nodes[0]).first == VirtualNetwork.address(2, network: 1))
        // The first move came after three retransmission timeouts without an answer, at least 1 s.
        let moved = net.nodes[0].machine.endpointStatistics.linkMoves
        #expect(moved >= 1 && moved <= 2, "\(moved) moves")
        #expect(net.now - died < .seconds(30))
    }

    @Test func anAddressWithoutARouteIsLeftAtOnce() {
        var (net, a, b) = Self.multiHomed()
        Self.cut(&net) { [0] }
        // The driver found no route to the peer's network-0 address.
        net.nodes[0].machine.handleUnroutable(VirtualNetwork.address(2), now: net.now) { VirtualNetwork.network(of: $0) != 0 }
        #expect(Self.moves(net.nodes[0]) == [])  // events are collected by the driver's next poll
        #expect(net.nodes[0].machine.pollEvent().map { if case .linkMoved(a, VirtualNetwork.address(2), VirtualNetwork.address(2, network: 1)) = $0 { true } else { false } } == true)
        #expect(Self.remote(net, 0, a) == VirtualNetwork.address(2, network: 1))
        // Its PING reaches the peer at once, which follows it to network 1.
        net.nodes[0].outgoing.append((a, .numbered(1, size: 100), .reliable))
        #expect(net.run(for: .milliseconds(100)) { $0.nodes[1].received(on: b, mode: .reliable).count == 1 })
        #expect(Self.remote(net, 1, b) == VirtualNetwork.address(1, network: 1))
        // An address of another link's peer, or one with nowhere else usable, moves nothing.
        net.nodes[0].machine.handleUnroutable(VirtualNetwork.address(9), now: net.now) { _ in true }
        net.nodes[0].machine.handleUnroutable(VirtualNetwork.address(2, network: 1), now: net.now) { _ in false }
        #expect(net.nodes[0].machine.endpointStatistics.linkMoves == 1)
    }

    @Test(arguments: [0.0, 0.1]) func aHealthyLinkNeverMovesIdleOrBusyUnderRandomLoss(loss: Double) {
        var (net, a, b) = Self.multiHomed(ImpairmentProfile(loss: loss, delay: .milliseconds(20)))
        for sequence in 0..<2_000 { net.nodes[0].outgoing.append((a, .numbered(sequence, size: 500), .reliable)) }
        #expect(net.run(for: .seconds(120)) { $0.nodes[1].received(on: b, mode: .reliable).count == 2_000 })
        net.run(for: .seconds(60))  // idle: keepalives only
        #expect(net.nodes[0].machine.endpointStatistics.linkMoves == 0)
        #expect(net.nodes[1].machine.endpointStatistics.linkMoves == 0)
        #expect(Self.remote(net, 0, a) == VirtualNetwork.address(2))
    }

    @Test func withEveryPathDeadTheLinkTriesEachInTurnThenTimesOutAndAPathThatComesBackIsUsed() {
        var (net, a, _) = Self.multiHomed()
        nonisolated(unsafe) var dead: Set<Int> = [0, 1]
        net.interceptor = { datagram in !dead.contains(VirtualNetwork.network(of: datagram.destination)) }
        net.nodes[0].outgoing.append((a, .numbered(1, size: 100), .reliable))
        net.run(for: .seconds(6))
        // It went back and forth between the two addresses, at most once a second.
        let tried = Self.moves(net.nodes[0])
        #expect(tried.count >= 2 && tried.count <= 6, "\(tried)")
        #expect(zip(tried, tried.dropFirst()).allSatisfy { $0 != $1 })
        // Network 0 comes back: the link returns to it and stays.
        dead = [1]
        #expect(net.run(for: .seconds(10)) { Self.remote($0, 0, a) == VirtualNetwork.address(2) && $0.nodes[1].received(on: LinkID(rawValue: $0.nodes[1].openedLinks[0].rawValue), mode: .reliable).count == 1 })
        #expect(net.nodes[0].closeReasons.isEmpty)
        // Now everything dies for good: the disconnect timeout still ends the link.
        dead = [0, 1]
        #expect(net.run(for: .seconds(40)) { $0.nodes[0].closeReasons == [.timedOut] })
    }

    @Test func aLinkWithoutOtherAddressesNeverMoves() {
        var net = VirtualNetwork()
        net.addNode()
        net.addNode()
        let (a, _) = net.openLink(from: 0, to: 1)!
        net.interceptor = { _ in false }
        net.nodes[0].outgoing.append((a, .numbered(1, size: 100), .reliable))
        net.nodes[0].machine.handleUnroutable(VirtualNetwork.address(2), now: net.now) { _ in true }
        #expect(net.run(for: .seconds(40)) { $0.nodes[0].closeReasons == [.timedOut] })
        #expect(Self.moves(net.nodes[0]).isEmpty)
        // Its own address among the alternatives is no alternative.
        net.nodes[0].machine.setAlternateAddresses([VirtualNetwork.address(2)], for: a)
        #expect(net.nodes[0].machine.endpointStatistics.linkMoves == 0)
    }
}
