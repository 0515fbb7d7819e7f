import Crypto
import DequeModule
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitOnline
import NIOCore
import NetworkImpairment
import Testing

@testable @_spi(Machine) import GameKitTransport
@testable import OpenGameKit

/// Whole online sessions in virtual time (issue 27): sessions (the session machine over its
/// socket's one machine: the transport's endpoint with the online layer under it), the rendezvous
/// and relay machine, and NAT routers, all on the package's one ``VirtualNetwork``, seeded, so a
/// run repeats datagram for datagram. What `GKSession` adds on top (threads, delegates) is the
/// real-socket tests' part.
struct OnlineWorld {
    static let sessionKey: UInt64 = 0x0057_0A1D
    static let clockOrigin: UInt64 = 1_800_000_000_000
    /// The secret part of the room code every session of the world was given (unless told
    /// another): what members prove in their handshakes, never sent to the rendezvous.
    static let roomSecret: UInt32 = 0x0AB_CDEF

    var network = NetworkImpairment.VirtualNetwork<WorldHost>()
    let nats = VirtualNATs()
    /// Where the rendezvous (and its relay) listens.
    let rendezvousAddress: SocketAddress
    let signingKey = Curve25519.Signing.PrivateKey()
    var seed: UInt64

    var clock: WallClock { WallClock(origin: .uptimeNanoseconds(1_000_000_000), originMilliseconds: Self.clockOrigin) }

    /// A world with its rendezvous (and relay) at `rendezvousAddress`.
    init(
        seed: UInt64 = 1, rendezvousAddress: SocketAddress = try! SocketAddress(ipAddress: "192.0.2.1", port: 7878),
        configuration: RendezvousConfiguration = RendezvousConfiguration()
    ) {
        self.seed = seed
        self.rendezvousAddress = rendezvousAddress
        self.network.onSpin = { Issue.record(Comment(rawValue: $0)) }
        // A registration arriving at the instant a timeout pass ran makes a roster push due at
        // that same instant (a real event loop runs that timer at once).
        self.network.timeoutPassesPerInstant = 3
        self.network.route(through: self.nats)
        let server = RendezvousServer(
            configuration: configuration, signingKey: self.signingKey, clock: self.clock, now: self.network.now, random: MachineRandom(seed: seed))
        self.network.add(WorldHost(node: RendezvousNode(server), addresses: [rendezvousAddress]), seed: seed)
    }

    /// Adds a session at `address` (inside a NAT's network if one covers it) that joins the room
    /// `request`; returns its host index. `candidates`: the host candidates it announces (its
    /// address by default); `secret`: the secret part of the room code it was given;
    /// `claimedPeerID`: the peer ID its session claims in its handshakes, when it is an impostor
    /// (its room record has `peerID`).
    @discardableResult
    mutating func addSession(
        _ name: String, peerID: UInt32, mode: GKSessionMode = .peer, at address: SocketAddress, request: RoomRequest, directPaths: Bool = true,
        relaysBetweenClients: Bool = false, candidates: [SocketAddress]? = nil, profile: ImpairmentProfile = .perfect,
        secret: UInt32 = OnlineWorld.roomSecret, claimsToBe claimedPeerID: UInt32? = nil
    ) -> Int {
        self.seed &+= 1
        var random = MachineRandom(seed: self.seed)
        let now = self.network.now
        var transport = Self.transportConfiguration
        transport.preSharedKey = SessionCore.roomKey(secret: secret, password: nil)
        let endpoint = try! EndpointMachine(configuration: transport, now: now, random: random.split())
        let record = MemberRecord(
            peerID: peerID, displayName: name, keyShare: Array(endpoint.livenessPublicKey), isVisible: mode != .client)
        var configuration = RoomClient.Configuration(rendezvous: [self.rendezvousAddress], sessionKey: Self.sessionKey, request: request, record: record)
        configuration.timing.registrationTimeout = .seconds(10)
        let room = RoomClient(configuration: configuration, clock: self.clock, now: now, random: random.split())
        let paths = directPaths
            ? MemberPaths(
                configuration: .init(localPeerID: peerID, localUfrag: "u\(peerID)", localPassword: "password-of-\(peerID)-0123456789", socketAcceptsIPv6: true),
                random: random.split())
            : nil
        var online = OnlineMachine(room: room, paths: paths, random: random.split())
        online.start(hostCandidates: candidates ?? [address], now: now)
        let node = SessionNode(
            identity: .init(
                peerID: claimedPeerID ?? peerID, displayName: name, mode: mode, sessionKey: Self.sessionKey, relaysBetweenClients: relaysBetweenClients),
            socket: SocketMachine(endpoint: endpoint, online: online), now: now)
        node.session.setAvailable(true)
        node.settle()
        return self.network.add(WorldHost(node: node, addresses: [address]), profile: profile, seed: self.seed)
    }

    /// The transport's configuration in the world: the session's message limits.
    static var transportConfiguration: TransportConfiguration {
        var configuration = TransportConfiguration()
        configuration.maxReliableMessageSize = GKSession.maximumReliableDataSize + SessionCore.headerAllowance
        configuration.maxUnreliableMessageSize = GKSession.maximumUnreliableDataSize + SessionCore.headerAllowance
        return configuration
    }

    /// The session of host `index`.
    func session(_ index: Int) -> SessionNode { self.network.hosts[index].node as! SessionNode }

    /// The rendezvous.
    var rendezvous: RendezvousNode { self.network.hosts[0].node as! RendezvousNode }

    /// Runs until `done` holds (at most `limit` of virtual time); whether it did.
    @discardableResult
    mutating func run(for limit: TimeAmount, until done: (OnlineWorld) -> Bool = { _ in false }) -> Bool {
        var world = self
        let result = self.network.run(for: limit) { network in
            world.network = network
            return done(world)
        }
        return result
    }

    /// Acts on a session at the current instant (connect, send…), as its application would.
    mutating func act(on index: Int, _ body: (SessionNode) -> Void) {
        let node = self.session(index)
        node.now = self.network.now
        body(node)
        node.settle()
    }
}

/// What a host of the world reports.
enum WorldEvent {
    case session(SessionNotification)
    case room(RoomEvent)
    case rendezvous(RendezvousEvent)
}

/// A host's node: a session or the rendezvous, held by reference so that the network's calls act
/// on it in place.
class WorldNode {
    func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {}
    func handleTimeout(now: NIODeadline) {}
    func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? { nil }
    func pollEvent() -> WorldEvent? { nil }
    var nextDeadline: NIODeadline? { nil }
}

/// The machine a world host runs: its node's.
struct WorldMachine: DatagramMachine {
    let node: WorldNode
    mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) { self.node.handle(datagram: datagram, from: source, now: now) }
    mutating func handleTimeout(now: NIODeadline) { self.node.handleTimeout(now: now) }
    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? { self.node.pollTransmit(now: now, into: &buffer) }
    mutating func pollEvent() -> WorldEvent? { self.node.pollEvent() }
    var nextDeadline: NIODeadline? { self.node.nextDeadline }
}

/// A host at its (inside) addresses.
struct WorldHost: VirtualHost {
    var machine: WorldMachine
    var addresses: [SocketAddress]
    var node: WorldNode { self.machine.node }
    /// Everything the host reported, in order.
    var events: [WorldEvent] = []

    init(node: WorldNode, addresses: [SocketAddress]) {
        self.machine = WorldMachine(node: node)
        self.addresses = addresses
    }

    /// Sends from its address of the destination's family.
    func source(for destination: SocketAddress) -> SocketAddress {
        self.addresses.first { $0.protocol == destination.protocol } ?? self.addresses[0]
    }

    func accepts(_ destination: SocketAddress, from source: SocketAddress) -> Bool { self.addresses.contains(destination) }

    mutating func record(_ event: WorldEvent, now: NIODeadline) { self.events.append(event) }
}

/// The rendezvous and relay, as `gk-rendezvous` runs it.
final class RendezvousNode: WorldNode {
    var server: RendezvousServer
    /// Stopped: it neither answers nor relays (a rendezvous killed).
    var stopped = false

    init(_ server: RendezvousServer) { self.server = server }

    override func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        guard !self.stopped else { return }
        self.server.handle(datagram: datagram, from: source, now: now)
    }
    override func handleTimeout(now: NIODeadline) { if !self.stopped { self.server.handleTimeout(now: now) } }
    override func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        self.stopped ? nil : self.server.pollTransmit(now: now, into: &buffer)
    }
    override func pollEvent() -> WorldEvent? { self.server.pollEvent().map(WorldEvent.rendezvous) }
    override var nextDeadline: NIODeadline? { self.stopped ? nil : self.server.nextDeadline }
}

/// One session as `SessionCore` composes it, without threads: the session machine, the socket's
/// machine under it (reached as the machine's ``SessionLinks``), and the peers seen in the room.
final class SessionNode: WorldNode, SessionLinks, @unchecked Sendable {
    var socket: SocketMachine
    var session: SessionMachine!
    var sightings = PeerSightings()
    /// The instant of the call being handled (the links' operations take it).
    var now: NIODeadline
    private var pending = Deque<WorldEvent>()
    /// Data received, in order: (from peer, text).
    private(set) var received: [(UInt32, String)] = []
    /// Everything the session reported, in order.
    private(set) var notifications: [SessionNotification] = []
    /// Everything its online layer reported, in order.
    private(set) var roomEvents: [RoomEvent] = []

    init(identity: SessionMachine.Identity, socket: SocketMachine, now: NIODeadline) {
        self.socket = socket
        self.now = now
        super.init()
        self.session = SessionMachine(identity: identity, links: self)
    }

    var peerID: UInt32 { self.session.identity.peerID }
    var online: OnlineMachine { self.socket.online! }

    /// Hands the socket's events to the session machine and collects what it reports, as the
    /// session's driver does.
    func settle() {
        var progressed = true
        while progressed {
            progressed = false
            while let event = self.socket.pollEvent() {
                progressed = true
                self.session.handle(event)
            }
            while let event = self.socket.pollRoomEvent() {
                progressed = true
                switch event {
                case .memberJoined(let record), .memberUpdated(let record): self.sightings.member(record, machine: &self.session)
                case .memberLeft(let peer): self.sightings.memberLeft(peer, machine: &self.session)
                case .failed: self.sightings.forgetMembers(machine: &self.session)
                default: break
                }
                self.roomEvents.append(event)
                self.pending.append(.room(event))
            }
            for command in self.session.takeDiscoveryCommands() {
                switch command {
                case .startBrowsing: self.sightings.tellMembers(machine: &self.session)
                case .stopBrowsing: self.sightings.forgetLAN()
                case .advertise, .withdraw, .reconfirm: break
                }
            }
            for notification in self.session.takeNotifications() {
                progressed = true
                if case .received(let data, let from, _) = notification { self.received.append((from, String(buffer: data))) }
                self.notifications.append(notification)
                self.pending.append(.session(notification))
            }
        }
    }

    // MARK: - The network's calls

    override func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        self.now = now
        self.socket.handle(datagram: datagram, from: source, now: now)
        self.settle()
    }

    override func handleTimeout(now: NIODeadline) {
        self.now = now
        self.socket.handleTimeout(now: now)
        self.settle()
    }

    override func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        self.now = now
        return self.socket.pollTransmit(now: now, into: &buffer)
    }

    override func pollEvent() -> WorldEvent? {
        self.settle()
        return self.pending.popFirst()
    }

    override var nextDeadline: NIODeadline? { self.socket.nextDeadline }

    // MARK: - SessionLinks: the socket's endpoint, called in place

    func connect(to address: SocketAddress, payload: ByteBuffer, timeout: TimeAmount?) throws(TransportError) -> LinkID {
        try self.socket.endpoint.connect(to: address, payload: payload, timeout: timeout, now: self.now)
    }
    func cancelConnect(_ link: LinkID) -> Bool { self.socket.endpoint.cancelConnect(link, now: self.now) }
    func accept(_ request: ConnectionRequest.ID, payload: ByteBuffer) throws(TransportError) -> LinkID {
        try self.socket.endpoint.accept(request, payload: payload, now: self.now)
    }
    func deny(_ request: ConnectionRequest.ID, code: UInt16) throws(TransportError) { try self.socket.endpoint.deny(request, code: code, now: self.now) }
    func send(_ message: ByteBuffer, on link: LinkID, mode: SendMode) throws(TransportError) { try self.socket.endpoint.send(message, on: link, mode: mode) }
    func send(_ batch: [(message: ByteBuffer, link: LinkID)], mode: SendMode) throws(TransportError) { try self.socket.endpoint.send(batch, mode: mode) }
    func close(_ link: LinkID, code: UInt16) throws(TransportError) { try self.socket.endpoint.close(link, code: code, now: self.now) }
    func watch(_ addresses: [SocketAddress], peerKey: [UInt8]) throws(TransportError) -> LivenessWatchID {
        try self.socket.endpoint.watch(addresses: addresses, peerKey: peerKey, now: self.now)
    }
    func updateWatch(_ id: LivenessWatchID, addresses: [SocketAddress]) { self.socket.endpoint.updateWatch(id, addresses: addresses) }
    func unwatch(_ id: LivenessWatchID) { self.socket.endpoint.unwatch(id) }
    func setAlternateAddresses(_ addresses: [SocketAddress], for link: LinkID) { self.socket.endpoint.setAlternateAddresses(addresses, for: link) }

    // MARK: - What tests look at

    /// The peer's state as the session reports it now.
    func state(of peer: UInt32) -> GKPeerConnectionState? { self.session.state(of: peer) }

    /// How datagrams to `peer` travel now.
    func path(to peer: UInt32) -> OnlinePath { self.online.paths?.route(to: peer) ?? .relayed }
}
