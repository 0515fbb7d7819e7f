import NIOCore
import Testing

@testable import GameKitTransport
@testable import OpenGameKit

// Helpers shared by the session machine's test suites.

func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

func changed(_ peer: TestPeer, _ state: GKPeerConnectionState) -> SessionNotification {
    .peerChanged(peer.peerID, state)
}

func received(_ text: String, from peer: TestPeer, _ mode: SendMode = .reliable) -> SessionNotification {
    .received(ByteBuffer(string: text), from: peer.peerID, mode: mode)
}

/// Notifications whose relative order the machine leaves open (it walks a dictionary), sorted.
func unordered(_ notifications: [SessionNotification]) -> [String] {
    notifications.map { "\($0)" }.sorted()
}

/// A seeded generator (SplitMix64): the same buffers on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) } }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func pick(_ values: UInt8...) -> UInt8 { values.randomElement(using: &self)! }
}

extension SessionTestNetwork {
    var everyone: [TestPeer] { self.machines.indices.map { TestPeer(index: $0, peerID: self.machines[$0].identity.peerID) } }

    func notes(_ peer: TestPeer) -> [SessionNotification] { self[peer].takeNotifications() }
    func commands(_ peer: TestPeer) -> [SessionDiscoveryCommand] { self[peer].takeDiscoveryCommands() }

    /// Every machine available; every browsing one sees every advertising one; what they said is dropped.
    func start() {
        for peer in self.everyone { self[peer].setAvailable(true) }
        for observer in self.everyone {
            for target in self.everyone where target != observer && self[target].identity.mode != .client {
                self.sight(observer, target)
            }
        }
        self.drain()
    }

    /// A server (relaying between its clients unless `relays` is false) and `count` clients
    /// (peer IDs 1…count), every client connected, all output dropped.
    static func room(clients count: Int, relays: Bool = true) throws -> (SessionTestNetwork, TestPeer, [TestPeer]) {
        let net = SessionTestNetwork()
        let server = net.add("Server", 10, .server, relays: relays)
        let clients = (1...count).map { net.add("Client \($0)", UInt32($0), .client) }
        net.start()
        for client in clients { try net.establish(client, server) }
        net.drain()
        return (net, server, clients)
    }

    /// The connected peers `peer` reaches through a server, in peer ID order.
    func relayed(_ peer: TestPeer) -> [UInt32] {
        self[peer].peers(in: .stateConnected).filter { self[peer].route(to: $0) != .direct }
    }

    /// Peers 1, 2, 3 in peer mode, each connected to the other two, all output dropped.
    static func mesh() throws -> (SessionTestNetwork, TestPeer, TestPeer, TestPeer) {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let carol = net.add("Carol", 3, .peer)
        net.start()
        try net.establish(alice, bob)
        try net.establish(alice, carol)
        try net.establish(bob, carol)
        net.drain()
        return (net, alice, bob, carol)
    }

    /// Each machine's bookkeeping agrees with itself and with the transport: every link it
    /// tracks is one a peer uses and one the transport holds for it, every request is a peer's,
    /// and what it last reported is each peer's state.
    func expectConsistent(sourceLocation: SourceLocation = #_sourceLocation) {
        for peer in self.everyone {
            let machine = self[peer]
            let name = machine.identity.displayName
            for (id, owner) in machine.linkOwners {
                let user = machine.peers[owner]
                let used = user?.link == id || user?.outgoing?.links.contains(id) == true || user?.incoming?.acceptedLink == id
                #expect(used, "\(name) tracks \(id) for \(owner), which does not use it", sourceLocation: sourceLocation)
            }
            for (peerID, state) in machine.peers {
                for link in [state.link, state.incoming?.acceptedLink].compactMap({ $0 }) + (state.outgoing?.links ?? []) {
                    #expect(machine.linkOwners[link] == peerID, "\(name): \(link) of \(peerID) untracked", sourceLocation: sourceLocation)
                }
                #expect(state.reported == state.derivedState, "\(name): \(peerID) reported \(String(describing: state.reported))", sourceLocation: sourceLocation)
            }
            for (id, owner) in machine.requestOwners {
                #expect(machine.peers[owner]?.incoming?.allRequests.contains(id) == true, "\(name): stray \(id)", sourceLocation: sourceLocation)
            }
            for link in machine.outboxes.keys {
                #expect(machine.linkOwners[link] != nil, "\(name): outbox of a closed link", sourceLocation: sourceLocation)
            }
            #expect(Set(machine.linkOwners.keys) == self.linkEnds(of: peer), "\(name) and the transport disagree on its links", sourceLocation: sourceLocation)
        }
    }
}
