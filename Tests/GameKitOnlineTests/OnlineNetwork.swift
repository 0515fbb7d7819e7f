import Crypto
import DequeModule
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitTraversal
import NIOCore
import NetworkImpairment

@testable import GameKitOnline

/// A rendezvous, a room client or a plain STUN server, so that all run on one virtual network.
struct OnlineNode: DatagramMachine {
    enum Role {
        case server(RendezvousServer)
        case client(OnlineMachine)
        /// Answers binding requests, reporting the sender's port plus `portOffset` (as it would
        /// see a client behind a NAT that maps each destination to a port of its own).
        case stun(portOffset: Int, answers: Deque<(SocketAddress, ByteBuffer)>)
    }

    enum Event {
        case server(RendezvousEvent)
        case room(RoomEvent)
        /// A relayed datagram the client unwrapped for its transport.
        case relayed(ByteBuffer, from: UInt32)
        /// A transport datagram that came through the client's TURN allocation.
        case turned(ByteBuffer, from: UInt32)
    }

    var role: Role
    private var relayed = Deque<Event>()

    static func server(_ server: RendezvousServer) -> OnlineNode { OnlineNode(role: .server(server)) }
    static func client(_ client: OnlineMachine) -> OnlineNode { OnlineNode(role: .client(client)) }
    static func stun(portOffset: Int) -> OnlineNode { OnlineNode(role: .stun(portOffset: portOffset, answers: [])) }

    private init(role: Role) {
        self.role = role
    }

    var client: OnlineMachine {
        get { if case .client(let client) = self.role { return client } else { preconditionFailure("not a client") } }
        set { self.role = .client(newValue) }
    }

    var server: RendezvousServer {
        if case .server(let server) = self.role { return server } else { preconditionFailure("not a server") }
    }

    mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        switch self.role {
        case .server(var server):
            server.handle(datagram: datagram, from: source, now: now)
            self.role = .server(server)
        case .client(var client):
            // As the tenant does: relayed transport datagrams are unwrapped, and the TURN
            // server's; the rest is the client's.
            if client.isTURNServer(source) {
                if let (payload, peer) = client.unwrapTURN(datagram, now: now) { self.relayed.append(.turned(payload, from: peer)) }
            } else if datagram.getInteger(at: datagram.readerIndex, as: UInt8.self) == OnlinePacketType.relayData.rawValue {
                if let (payload, peer) = client.unwrap(datagram, from: source, now: now) { self.relayed.append(.relayed(payload, from: peer)) }
            } else {
                client.handle(datagram: datagram, from: source, now: now)
            }
            self.role = .client(client)
        case .stun(let offset, var answers):
            let seen = try! SocketAddress(ipAddress: source.ipAddress!, port: source.port! + offset)
            if let answer = STUNBinding.answer(to: datagram, from: seen) { answers.append((source, answer)) }
            self.role = .stun(portOffset: offset, answers: answers)
        }
    }

    mutating func handleTimeout(now: NIODeadline) {
        switch self.role {
        case .server(var server):
            server.handleTimeout(now: now)
            self.role = .server(server)
        case .client(var client):
            client.handleTimeout(now: now)
            self.role = .client(client)
        case .stun:
            break
        }
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        switch self.role {
        case .server(var server):
            defer { self.role = .server(server) }
            return server.pollTransmit(now: now, into: &buffer)
        case .client(var client):
            defer { self.role = .client(client) }
            return client.pollTransmit(now: now, into: &buffer)
        case .stun(let offset, var answers):
            defer { self.role = .stun(portOffset: offset, answers: answers) }
            guard let (destination, answer) = answers.popFirst() else { return nil }
            buffer.writeImmutableBuffer(answer)
            return destination
        }
    }

    mutating func pollEvent() -> Event? {
        if let relayed = self.relayed.popFirst() { return relayed }
        switch self.role {
        case .server(var server):
            defer { self.role = .server(server) }
            return server.pollEvent().map(Event.server)
        case .client(var client):
            defer { self.role = .client(client) }
            return client.pollEvent().map(Event.room)
        case .stun:
            return nil
        }
    }

    var nextDeadline: NIODeadline? {
        switch self.role {
        case .server(let server): server.nextDeadline
        case .client(let client): client.nextDeadline
        case .stun: nil
        }
    }
}

/// A node at one public address (behind a NAT that filters unsolicited inbound, optionally).
struct OnlineHost: VirtualHost {
    var machine: OnlineNode
    var address: SocketAddress
    /// Behind a NAT that filters: inbound only from addresses this host has sent to.
    var filters = false
    /// Inbound only from these IP addresses (the servers), when set: nothing reaches it directly.
    var acceptsOnlyFrom: Set<String>?
    var contacted: Set<SocketAddress> = []
    var events: [OnlineNode.Event] = []
    /// Datagrams to carry through the relay at the next settle: (to peer, payload).
    var toCarry: [(UInt32, ByteBuffer)] = []

    func source(for destination: SocketAddress) -> SocketAddress { self.address }
    func accepts(_ destination: SocketAddress, from source: SocketAddress) -> Bool {
        destination == self.address && (!self.filters || self.contacted.contains(source))
            && (self.acceptsOnlyFrom.map { $0.contains(source.ipAddress ?? "") } ?? true)
    }

    mutating func didSend(_ bytes: ByteBuffer, to destination: SocketAddress, now: NIODeadline) {
        self.contacted.insert(destination)
    }

    mutating func record(_ event: OnlineNode.Event, now: NIODeadline) {
        self.events.append(event)
    }

    mutating func act(now: NIODeadline) -> Bool {
        guard !self.toCarry.isEmpty else { return false }
        for (peer, payload) in self.toCarry { self.machine.client.carry(payload, to: peer, now: now) }
        self.toCarry.removeAll()
        return true
    }

    var roomEvents: [RoomEvent] {
        self.events.compactMap { if case .room(let event) = $0 { return event } else { return nil } }
    }

    var serverEvents: [RendezvousEvent] {
        self.events.compactMap { if case .server(let event) = $0 { return event } else { return nil } }
    }

    var relayedPayloads: [(String, UInt32)] {
        self.events.compactMap { if case .relayed(let payload, let peer) = $0 { return (String(buffer: payload), peer) } else { return nil } }
    }

    var turnedPayloads: [(String, UInt32)] {
        self.events.compactMap { if case .turned(let payload, let peer) = $0 { return (String(buffer: payload), peer) } else { return nil } }
    }

    var code: RoomCode? {
        for event in self.roomEvents { if case .joined(let code, _) = event { return code } }
        return nil
    }

    var failure: RoomError? {
        for event in self.roomEvents { if case .failed(let error) = event { return error } }
        return nil
    }

    /// The members the client knows now.
    var members: Set<UInt32> { Set(self.machine.client.room.members.keys) }

    /// The paths this client reported for members, in order.
    var pathChanges: [(UInt32, OnlinePath)] {
        self.roomEvents.compactMap { if case .pathChanged(let peer, let path) = $0 { return (peer, path) } else { return nil } }
    }
}

/// Builds a rendezvous and clients on one virtual network, with seeded randomness throughout.
struct OnlineTestbed {
    static let serverAddress = try! SocketAddress(ipAddress: "192.0.2.1", port: 7878)
    static let sessionKey: UInt64 = 0x5E55_1011
    static let clockOrigin: UInt64 = 1_800_000_000_000

    var network = VirtualNetwork<OnlineHost>()
    let signingKey = Curve25519.Signing.PrivateKey()
    var nextSeed: UInt64 = 100

    init(configuration: RendezvousConfiguration = RendezvousConfiguration(), profile: ImpairmentProfile = .perfect, seed: UInt64 = 1) {
        self.network.onSpin = { fatalError($0) }
        // A registration arriving at the instant a timeout pass ran makes a roster push due at
        // that same instant (a real event loop runs that timer at once).
        self.network.timeoutPassesPerInstant = 3
        let server = RendezvousServer(
            configuration: configuration, signingKey: self.signingKey, clock: self.clock, now: self.network.now, random: MachineRandom(seed: seed))
        self.network.add(OnlineHost(machine: .server(server), address: Self.serverAddress), profile: profile, seed: seed)
        self.nextSeed = seed &* 31 &+ 7
    }

    var clock: WallClock { WallClock(origin: .uptimeNanoseconds(1_000_000_000), originMilliseconds: Self.clockOrigin) }

    /// Adds a client asking for `request`, at 10.0.0.N:5000; returns its host index.
    @discardableResult
    mutating func addClient(
        _ request: RoomRequest, peerID: UInt32, name: String? = nil, address: SocketAddress? = nil, sessionKey: UInt64 = Self.sessionKey,
        profile: ImpairmentProfile = .perfect, directPaths: Bool = false, hostCandidates: [SocketAddress] = [], filters: Bool = false,
        stunServers: [SocketAddress] = [], turn: TURNServer? = nil, acceptsOnlyFrom: Set<String>? = nil
    ) -> Int {
        let index = self.network.hosts.count
        let address = address ?? (try! SocketAddress(ipAddress: "10.0.0.\(index)", port: 5000))
        var configuration = RoomClient.Configuration(
            rendezvous: [Self.serverAddress], sessionKey: sessionKey, request: request,
            record: MemberRecord(peerID: peerID, displayName: name ?? "peer \(peerID)", keyShare: Array(repeating: UInt8(index), count: 32)))
        configuration.timing.registrationTimeout = .seconds(10)
        self.nextSeed &+= 1
        var random = MachineRandom(seed: self.nextSeed)
        let room = RoomClient(configuration: configuration, clock: self.clock, now: self.network.now, random: random.split())
        let paths = directPaths
            ? MemberPaths(
                configuration: .init(localPeerID: peerID, localUfrag: "u\(peerID)", localPassword: "password-of-\(peerID)-0123456789", socketAcceptsIPv6: true),
                random: random.split())
            : nil
        var machine = OnlineMachine(room: room, paths: paths, stunServers: stunServers, turn: turn, random: random.split())
        machine.start(hostCandidates: hostCandidates, now: self.network.now)
        return self.network.add(
            OnlineHost(machine: .client(machine), address: address, filters: filters, acceptsOnlyFrom: acceptsOnlyFrom), profile: profile,
            seed: self.nextSeed)
    }

    /// Adds a STUN server at `address` that reports senders' ports plus `portOffset`.
    @discardableResult
    mutating func addSTUNServer(at address: SocketAddress, portOffset: Int) -> Int {
        self.network.add(OnlineHost(machine: .stun(portOffset: portOffset), address: address), profile: .perfect, seed: 3)
    }

    /// Creates a room with one client and returns its code.
    mutating func createRoom(peerID: UInt32 = 1) -> RoomCode? {
        let host = self.addClient(.create, peerID: peerID)
        self.network.run(for: .seconds(5)) { $0.hosts[host].code != nil }
        return self.network.hosts[host].code
    }

    var server: RendezvousServer { self.network.hosts[0].machine.server }
}
