import NIOCore
import NetworkImpairment
import Testing

@_spi(Machine) @testable import GameKitOnline
@testable import OpenGameKit

/// Online sessions end to end in virtual time (``OnlineWorld``): the room, the relay, direct
/// paths, server rooms and NATs, seeded, datagram for datagram the same on every run.
@Suite("Online sessions in virtual time")
struct OnlineWorldTests {
    static func address(_ ip: String, _ port: Int) -> SocketAddress { try! SocketAddress(ipAddress: ip, port: port) }
    static let alice = address("198.51.100.10", 4000)
    static let bob = address("203.0.113.20", 5000)

    /// Alice (peer 1) creates a room at `aliceAt`; Bob (peer 2) joins it from `bobAt`; both see
    /// each other available. Returns the world and their host indexes.
    static func pair(
        seed: UInt64 = 1, aliceAt: SocketAddress = alice, bobAt: SocketAddress = bob, aliceMode: GKSessionMode = .peer,
        directPaths: Bool = true, configure: (inout OnlineWorld) -> Void = { _ in }
    ) throws -> (OnlineWorld, Int, Int) {
        var world = OnlineWorld(seed: seed)
        configure(&world)
        let a = world.addSession("Alice", peerID: 1, mode: aliceMode, at: aliceAt, request: .create, directPaths: directPaths)
        #expect(world.run(for: .seconds(5)) { $0.session(a).online.room.code != nil })
        let code = try #require(world.session(a).online.room.code)
        let b = world.addSession("Bob", peerID: 2, at: bobAt, request: .join(code), directPaths: directPaths)
        #expect(world.run(for: .seconds(5)) { $0.session(b).state(of: 1) == .stateAvailable })
        return (world, a, b)
    }

    /// Bob connects to Alice (who accepts); both connected.
    static func connect(_ world: inout OnlineWorld, _ a: Int, _ b: Int) {
        world.act(on: b) { $0.session.connect(to: 1, timeout: .seconds(10)) }
        #expect(world.run(for: .seconds(5)) { $0.session(a).hasRequest(from: 2) })
        world.act(on: a) { try? $0.session.accept(2) }
        #expect(world.run(for: .seconds(5)) { $0.session(a).state(of: 2) == .stateConnected && $0.session(b).state(of: 1) == .stateConnected })
    }

    /// Bob sends `count` numbered reliable messages to Alice, one every `interval`.
    static func send(_ world: inout OnlineWorld, from b: Int, to peer: UInt32, _ prefix: String, count: Int, every interval: TimeAmount) {
        for index in 0..<count {
            world.act(on: b) { node in #expect(throws: Never.self) { try node.session.send(ByteBuffer(string: "\(prefix)\(index)"), to: [peer], mode: .reliable) } }
            world.network.advance(by: interval)
        }
    }

    @Test func aLinkOpenedThroughTheRelayMovesToADirectPathWithoutLosingOrReordering() throws {
        var (world, a, b) = try Self.pair()
        Self.connect(&world, a, b)
        #expect(world.session(b).path(to: 1) == .relayed)
        Self.send(&world, from: b, to: 1, "m", count: 400, every: .milliseconds(5))
        #expect(world.run(for: .seconds(5)) { $0.session(a).received.count >= 400 })
        #expect(world.session(b).path(to: 1) == .direct(Self.alice))
        #expect(world.session(a).path(to: 2) == .direct(Self.bob))
        #expect(world.session(a).received.map(\.1) == (0..<400).map { "m\($0)" })
        // Some went through the relay first, with the relay's header written in place.
        #expect(world.session(b).online.room.statistics.relayedOut > 0)
        // Once direct, the relay carries nothing more of theirs.
        let relayed = world.rendezvous.server.currentStatistics.relayedBytes
        Self.send(&world, from: b, to: 1, "d", count: 100, every: .milliseconds(1))
        #expect(world.run(for: .seconds(5)) { $0.session(a).received.count >= 500 })
        #expect(world.rendezvous.server.currentStatistics.relayedBytes == relayed)
        // The same link all along.
        #expect(!world.session(a).reported(.peerChanged(2, .stateDisconnected)))
    }

    @Test func aSeededRunRepeatsDatagramForDatagram() throws {
        func trace(seed: UInt64) throws -> [String] {
            var (world, a, b) = try Self.pair(seed: seed)
            nonisolated(unsafe) var trace: [String] = []
            world.network.interceptor = { datagram in
                trace.append("\(datagram.source)>\(datagram.destination):\(datagram.bytes.readableBytes)")
                return true
            }
            Self.connect(&world, a, b)
            Self.send(&world, from: b, to: 1, "m", count: 50, every: .milliseconds(5))
            world.run(for: .seconds(2))
            return trace
        }
        let first = try trace(seed: 7)
        #expect(first.count > 100)
        #expect(try trace(seed: 7) == first)
    }

    @Test func aDirectPathThatDiesFallsBackToTheRelayAndComesBackWithoutLosingAMessage() throws {
        var (world, a, b) = try Self.pair()
        Self.connect(&world, a, b)
        Self.send(&world, from: b, to: 1, "m", count: 100, every: .milliseconds(5))
        #expect(world.run(for: .seconds(5)) { $0.session(b).path(to: 1) != .relayed && $0.session(a).path(to: 2) != .relayed })
        // Nothing passes between the two any more; both still reach the rendezvous.
        world.network.interceptor = { datagram in
            !([Self.alice, Self.bob].contains(datagram.source) && [Self.alice, Self.bob].contains(datagram.destination))
        }
        Self.send(&world, from: b, to: 1, "n", count: 200, every: .milliseconds(50))
        #expect(world.run(for: .seconds(10)) { $0.session(b).path(to: 1) == .relayed && $0.session(a).received.count >= 300 })
        // The direct path comes back: after the retry delay, sending checks again.
        world.network.interceptor = nil
        world.network.advance(by: .seconds(15))
        Self.send(&world, from: b, to: 1, "o", count: 100, every: .milliseconds(20))
        #expect(world.run(for: .seconds(5)) { $0.session(b).path(to: 1) == .direct(Self.alice) && $0.session(a).received.count >= 400 })
        let expected = (0..<100).map { "m\($0)" } + (0..<200).map { "n\($0)" } + (0..<100).map { "o\($0)" }
        #expect(world.session(a).received.map(\.1) == expected)
        #expect(!world.session(a).reported(.peerChanged(2, .stateDisconnected)))
    }

    @Test func aRendezvousGoneAfterTheDirectPathIsUpLeavesTheConnectionAsItIsAndIsJoinedAgainWhenBack() throws {
        var (world, a, b) = try Self.pair()
        Self.connect(&world, a, b)
        Self.send(&world, from: b, to: 1, "m", count: 50, every: .milliseconds(5))
        #expect(world.run(for: .seconds(5)) { $0.session(b).path(to: 1) == .direct(Self.alice) && $0.session(a).path(to: 2) == .direct(Self.bob) })
        world.rendezvous.stopped = true
        // A minute without the rendezvous: the link stays up and carries everything.
        Self.send(&world, from: b, to: 1, "n", count: 60, every: .seconds(1))
        #expect(world.run(for: .seconds(5)) { $0.session(a).received.count >= 110 })
        #expect(world.session(a).received.map(\.1) == (0..<50).map { "m\($0)" } + (0..<60).map { "n\($0)" })
        #expect(world.session(a).state(of: 2) == .stateConnected && world.session(b).state(of: 1) == .stateConnected)
        #expect(world.session(b).path(to: 1) == .direct(Self.alice))
        // The sessions noticed, and did not give the room up.
        #expect(world.session(b).roomEvents.contains(.rendezvousLost))
        #expect(!world.session(b).roomEvents.contains { if case .failed = $0 { true } else { false } })
        // The rendezvous comes back: both are in the room again, with the same code, relay ready.
        let code = world.session(a).online.room.code
        world.rendezvous.stopped = false
        #expect(world.run(for: .seconds(30)) { world in
            world.rendezvous.server.currentStatistics.members == 2 && world.session(a).online.room.relayReady && world.session(b).online.room.relayReady
        })
        #expect(world.session(b).online.room.code == code)
        #expect(world.session(a).state(of: 2) == .stateConnected)
    }

    @Test func overIPv6TheRoomTheRelayAndTheDirectPathWorkAlike() throws {
        let alice6 = Self.address("2001:db8:1::10", 4000)
        let bob6 = Self.address("2001:db8:2::20", 5000)
        var world = OnlineWorld(rendezvousAddress: Self.address("2001:db8::1", 7878))
        let a = world.addSession("Alice", peerID: 1, at: alice6, request: .create)
        #expect(world.run(for: .seconds(5)) { $0.session(a).online.room.code != nil })
        let code = try #require(world.session(a).online.room.code)
        let b = world.addSession("Bob", peerID: 2, at: bob6, request: .join(code))
        #expect(world.run(for: .seconds(5)) { $0.session(b).state(of: 1) == .stateAvailable })
        Self.connect(&world, a, b)
        Self.send(&world, from: b, to: 1, "m", count: 100, every: .milliseconds(5))
        #expect(world.run(for: .seconds(5)) { $0.session(a).received.count >= 100 })
        #expect(world.session(b).path(to: 1) == .direct(alice6))
        #expect(world.session(a).received.map(\.1) == (0..<100).map { "m\($0)" })
    }

    @Test func aServerInARoomTakesClientsAndRelaysBetweenThemWhenAskedTo() throws {
        var world = OnlineWorld()
        let server = world.addSession("Server", peerID: 1, mode: .server, at: Self.alice, request: .create, relaysBetweenClients: true)
        #expect(world.run(for: .seconds(5)) { $0.session(server).online.room.code != nil })
        let code = try #require(world.session(server).online.room.code)
        let c1 = world.addSession("One", peerID: 2, mode: .client, at: Self.bob, request: .join(code))
        let c2 = world.addSession("Two", peerID: 3, mode: .client, at: Self.address("192.0.2.30", 6000), request: .join(code))
        for (client, peer, other) in [(c1, UInt32(2), UInt32(3)), (c2, 3, 2)] {
            #expect(world.run(for: .seconds(5)) { $0.session(client).state(of: 1) == .stateAvailable })
            // Clients are not visible to each other in the room: only the server is.
            #expect(world.session(client).state(of: other) == nil)
            world.act(on: client) { $0.session.connect(to: 1, timeout: .seconds(10)) }
            #expect(world.run(for: .seconds(5)) { $0.session(server).hasRequest(from: peer) })
            world.act(on: server) { try? $0.session.accept(peer) }
            #expect(world.run(for: .seconds(5)) { $0.session(client).state(of: 1) == .stateConnected })
        }
        // The server introduces its clients; One sends to Two through it.
        #expect(world.run(for: .seconds(5)) { $0.session(c1).state(of: 3) == .stateConnected })
        world.act(on: c1) { node in #expect(throws: Never.self) { try node.session.send(ByteBuffer(string: "hi two"), to: [3], mode: .reliable) } }
        #expect(world.run(for: .seconds(5)) { $0.session(c2).received.map(\.1) == ["hi two"] })
        #expect(world.session(c2).received.first?.0 == 2)
    }

    // MARK: - Behind NATs

    /// Alice behind one home NAT and Bob behind another, both with `mapping` and `filtering`.
    static func behindNATs(_ mapping: VirtualNATs.Mapping, _ filtering: VirtualNATs.Filtering) throws -> (OnlineWorld, Int, Int) {
        try Self.pair(aliceAt: Self.address("10.1.0.2", 4000), bobAt: Self.address("10.2.0.2", 5000)) { world in
            world.nats.add(.init(inside: "10.1.", publicIP: "198.51.100.1", mapping: mapping, filtering: filtering))
            world.nats.add(.init(inside: "10.2.", publicIP: "203.0.113.1", mapping: mapping, filtering: filtering))
        }
    }

    @Test(arguments: [VirtualNATs.Filtering.endpointIndependent, .addressDependent, .addressAndPortDependent])
    func behindEndpointIndependentNATsTheMembersPunchADirectPath(_ filtering: VirtualNATs.Filtering) throws {
        var (world, a, b) = try Self.behindNATs(.endpointIndependent, filtering)
        Self.connect(&world, a, b)
        Self.send(&world, from: b, to: 1, "m", count: 200, every: .milliseconds(5))
        #expect(world.run(for: .seconds(5)) { $0.session(a).received.count >= 200 })
        // Each reaches the other at its NAT's public address.
        guard case .direct(let toAlice) = world.session(b).path(to: 1) else {
            Issue.record("Bob's path to Alice: \(world.session(b).path(to: 1))")
            return
        }
        #expect(toAlice.ipAddress == "198.51.100.1")
        #expect(world.session(a).received.map(\.1) == (0..<200).map { "m\($0)" })
    }

    @Test func behindSymmetricNATsTheRelayCarriesEverything() throws {
        var (world, a, b) = try Self.behindNATs(.addressAndPortDependent, .addressAndPortDependent)
        Self.connect(&world, a, b)
        Self.send(&world, from: b, to: 1, "m", count: 200, every: .milliseconds(5))
        #expect(world.run(for: .seconds(10)) { $0.session(a).received.count >= 200 })
        #expect(world.session(b).path(to: 1) == .relayed && world.session(a).path(to: 2) == .relayed)
        #expect(world.session(a).received.map(\.1) == (0..<200).map { "m\($0)" })
    }

    @Test func twoMembersBehindOneNATMeetAtTheirHostAddresses() throws {
        let aliceInside = Self.address("10.1.0.2", 4000)
        let bobInside = Self.address("10.1.0.3", 5000)
        var (world, a, b) = try Self.pair(aliceAt: aliceInside, bobAt: bobInside) { world in
            world.nats.add(.init(inside: "10.1.", publicIP: "198.51.100.1", mapping: .addressAndPortDependent))
        }
        Self.connect(&world, a, b)
        Self.send(&world, from: b, to: 1, "m", count: 100, every: .milliseconds(5))
        #expect(world.run(for: .seconds(5)) { $0.session(a).received.count >= 100 && $0.session(b).path(to: 1) == .direct(aliceInside) })
    }

    @Test func behindACarrierNATAndAHomeNATTheMembersStillMeetAndTalk() throws {
        var (world, a, b) = try Self.pair(aliceAt: Self.address("192.168.1.2", 4000), bobAt: Self.address("10.2.0.2", 5000)) { world in
            world.nats.add(.init(inside: "192.168.1.", publicIP: "100.64.0.2", mapping: .endpointIndependent, filtering: .addressAndPortDependent))
            world.nats.add(.init(inside: "100.64.", publicIP: "198.51.100.1", mapping: .endpointIndependent, filtering: .addressDependent))
            world.nats.add(.init(inside: "10.2.", publicIP: "203.0.113.1", mapping: .endpointIndependent, filtering: .addressAndPortDependent))
        }
        Self.connect(&world, a, b)
        Self.send(&world, from: b, to: 1, "m", count: 200, every: .milliseconds(5))
        #expect(world.run(for: .seconds(5)) { $0.session(a).received.count >= 200 })
        #expect(world.session(b).path(to: 1) != .relayed)
        #expect(world.session(a).received.map(\.1) == (0..<200).map { "m\($0)" })
    }
}

extension SessionNode {
    /// Whether the session has reported `notification`.
    func reported(_ notification: SessionNotification) -> Bool {
        self.notifications.contains(notification)
    }

    /// Whether `peer` asked to connect (and waits for the answer).
    func hasRequest(from peer: UInt32) -> Bool {
        self.notifications.contains(.connectionRequest(peer))
    }
}
