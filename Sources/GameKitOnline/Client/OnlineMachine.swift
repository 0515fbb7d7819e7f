import DequeModule
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitTraversal
import NIOCore

/// A TURN server for an online session (RFC 8656 over UDP, long-term credentials).
public struct TURNServer: Sendable, Equatable {
    /// Where it listens (UDP).
    public var address: SocketAddress
    /// The long-term credential's user name.
    public var username: String
    /// The long-term credential's password.
    public var password: String

    /// A TURN server and its credentials.
    public init(address: SocketAddress, username: String, password: String) {
        self.address = address
        self.username = username
        self.password = password
    }
}

/// An online session's layer under the transport, on the session's one socket (PROTOCOL §18):
/// the room client (rendezvous and relay) and the direct paths to members, composed, and the
/// routing between them and the transport. The transport's endpoint and this machine are one
/// datagram machine (the transport's `SocketMachine`): what arrives is split by its first byte
/// (RFC 7983), transport datagrams from a member's direct path or through the relay reach the
/// transport as from the member's address (``MemberAddress``), and the transport's datagrams to
/// member addresses go straight to the member, or through the relay with the relay's header
/// written in front of them in the same send buffer. STUN is told apart here: the rendezvous's
/// answer to the room client's binding request, a configured STUN server's answer, or a
/// member's check.
package struct OnlineMachine: DatagramMachine {
    package typealias Event = RoomEvent

    package private(set) var room: RoomClient
    package private(set) var paths: MemberPaths?
    private var pending: [RoomEvent] = []
    private var random: MachineRandom
    /// STUN servers configured besides the rendezvous (asked once the session starts).
    private let stunServers: [SocketAddress]
    private var stunClients: [STUNBindingClient] = []
    /// Server-reflexive addresses found so far, by where they were learned (the rendezvous
    /// first): each is a candidate the members are told.
    private var reflexive: [(server: SocketAddress?, address: SocketAddress)] = []
    /// The configured TURN server (only with direct paths), its client once started, and what
    /// goes to the server next (indications carrying checks and transport datagrams).
    private let turnServer: TURNServer?
    private var turn: TURNClient?
    private var turnOutbox = Deque<ByteBuffer>()
    private var turnReported = false
    /// Each member's address inside the transport, made once.
    private var memberAddresses: [UInt32: SocketAddress] = [:]

    /// `paths` nil: no direct paths (everything through the relay). `stunServers`: more servers
    /// to learn this socket's public addresses from; `turn`: a TURN server whose allocation is
    /// one more way to members (both only with direct paths).
    package init(
        room: RoomClient, paths: MemberPaths?, stunServers: [SocketAddress] = [], turn: TURNServer? = nil, random: MachineRandom = .system()
    ) {
        self.room = room
        self.paths = paths
        self.stunServers = paths == nil ? [] : stunServers
        self.turnServer = paths == nil ? nil : turn
        self.random = random
    }

    /// A session's online layer: a room client for `request` in the session `sessionKey` and,
    /// with `directPaths`, ICE checks for direct paths to members (credentials drawn from the
    /// system's generator). `stunServers`: more servers than the rendezvous to learn this
    /// socket's public addresses from; `turn`: a TURN server whose allocation is one more way to
    /// members. Nothing is sent before ``start(hostCandidates:now:)``.
    package static func make(
        rendezvous: [SocketAddress], sessionKey: UInt64, request: RoomRequest, record: MemberRecord, directPaths: Bool = true,
        stunServers: [SocketAddress] = [], turn: TURNServer? = nil, now: NIODeadline
    ) -> OnlineMachine {
        var random = MachineRandom.system()
        let configuration = RoomClient.Configuration(rendezvous: rendezvous, sessionKey: sessionKey, request: request, record: record)
        let room = RoomClient(configuration: configuration, clock: .system(), now: now, random: random.split())
        let paths = directPaths
            ? MemberPaths(
                configuration: .init(
                    localPeerID: record.peerID, localUfrag: Self.token(8, &random), localPassword: Self.token(24, &random), socketAcceptsIPv6: true),
                random: random.split())
            : nil
        return OnlineMachine(room: room, paths: paths, stunServers: stunServers, turn: turn, random: random.split())
    }

    /// `count` random letters and digits (ICE's ufrag and password alphabet, RFC 8445 §5.3).
    private static func token(_ count: Int, _ random: inout MachineRandom) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }

    /// Registers, with this socket's host candidates (its interfaces' addresses and port).
    package mutating func start(hostCandidates: [SocketAddress], now: NIODeadline) {
        let credentials = self.paths.map { ($0.configuration.localUfrag, $0.configuration.localPassword) }
        self.room.update({ record in
            if let (ufrag, password) = credentials {
                record.iceUfrag = ufrag
                record.icePassword = password
                record.candidates = hostCandidates.prefix(MemberRecord.maximumCandidates - 1).map { .init(kind: .host, address: $0) }
            }
        }, now: now)
        self.room.start(now: now)
        for server in self.stunServers {
            guard let address = TraversalAddress(server) else { continue }
            var client = STUNBindingClient(server: address, now: now, random: &self.random)
            client.handleTimeout(now: now)
            self.stunClients.append(client)
        }
        if let server = self.turnServer, let address = TraversalAddress(server.address) {
            var client = TURNClient(server: address, username: server.username, password: server.password, now: now, random: self.random.split())
            client.handleTimeout(now: now)
            self.turn = client
        }
    }

    package mutating func leave(now: NIODeadline) {
        self.room.leave(now: now)
        if let release = self.turn?.close() { self.turnOutbox.append(ByteBuffer(bytes: release)) }
    }

    /// A transport datagram to `peer` that does not go straight to it: through this side's TURN
    /// allocation when that is the member's path, else through the rendezvous's relay (and a
    /// direct path is sought).
    package mutating func carry(_ datagram: ByteBuffer, to peer: UInt32, now: NIODeadline) {
        if case .turn(let address)? = self.paths?.route(to: peer) {
            self.sendThroughTURN(datagram, to: address, now: now)
            return
        }
        self.room.carry(datagram, to: peer)
        self.paths?.wanted(peer, now: now)
    }

    /// Whether `source` is the configured TURN server (its datagrams go to ``unwrapTURN``).
    package func isTURNServer(_ source: SocketAddress) -> Bool {
        self.turnServer?.address == source
    }

    /// A datagram from the TURN server: its answers move the allocation along; a Data indication
    /// carries a member's check (handled here) or a transport datagram (returned with the member
    /// it came from).
    package mutating func unwrapTURN(_ datagram: ByteBuffer, now: NIODeadline) -> (ByteBuffer, UInt32)? {
        guard self.turn != nil else { return nil }
        let received = self.turn!.receive(datagram, now: now)
        self.followTURN(now: now)
        guard case .data(let bytes, let from) = received else { return nil }
        let payload = ByteBuffer(bytes: bytes)
        let source = from.socketAddress
        if let first = bytes.first, OnlinePacketType.isSTUN(firstByte: first) {
            _ = self.paths?.handleSTUN(payload, from: source, viaRelay: true, now: now)
            return nil
        }
        guard let peer = self.paths?.member(at: source) else { return nil }
        return (payload, peer)
    }

    private mutating func sendThroughTURN(_ datagram: ByteBuffer, to address: SocketAddress, now: NIODeadline) {
        guard self.turn?.relayedAddress != nil, let peer = TraversalAddress(address) else { return }
        self.turn!.permit([peer], now: now)
        self.turnOutbox.append(ByteBuffer(bytes: self.turn!.sendIndication(Array(datagram.readableBytesView), to: peer)))
    }

    /// Follows the allocation: once it exists, its relayed address is a candidate and a base for
    /// checks; a failure is reported once.
    private mutating func followTURN(now: NIODeadline) {
        guard let turn = self.turn, !self.turnReported else { return }
        switch turn.state {
        case .allocated(let relayed, _):
            self.turnReported = true
            let address = relayed.socketAddress
            self.room.update({ record in
                record.candidates.removeAll { $0.kind == .relayed }
                if record.candidates.count >= MemberRecord.maximumCandidates { record.candidates.removeLast() }
                record.candidates.append(.init(kind: .relayed, address: address))
            }, now: now)
            self.paths?.relayAllocated(address, now: now)
            self.pending.append(.turnAllocated(address))
        case .failed(let reason):
            self.turnReported = true
            self.pending.append(.turnFailed(reason))
        case .allocating, .closed:
            break
        }
    }

    /// A relayed datagram: the transport's (its payload and sender), or nil when it was not from
    /// the relay or was the online layer's own (a member's invitation to check a direct path).
    package mutating func unwrap(_ datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) -> (ByteBuffer, UInt32)? {
        guard let (payload, peer) = self.room.unwrap(datagram, from: source) else { return nil }
        if let first = payload.getInteger(at: payload.readerIndex, as: UInt8.self), OnlinePacketType.isSTUN(firstByte: first) {
            self.paths?.wanted(peer, invited: true, now: now)
            return nil
        }
        return (payload, peer)
    }

    package mutating func update(_ change: (inout MemberRecord) -> Void, now: NIODeadline) {
        self.room.update(change, now: now)
    }

    // MARK: - Routing the transport's datagrams

    /// Where a transport datagram to a destination goes (``route(_:)``).
    package enum Route: Equatable {
        /// An ordinary address: sent as it is.
        case asIs
        /// A member with a direct path: sent straight to this address.
        case direct(SocketAddress)
        /// A member reached through the relay at this address: the relay's header
        /// (``relayHeaderSize`` bytes) goes in front of the datagram (``writeRelayHeader``).
        case relay(SocketAddress, peer: UInt32)
        /// A member reached another way (this side's TURN allocation, or a relay not ready yet):
        /// the datagram is handed to ``carry(_:to:now:)``.
        case carried(peer: UInt32)
    }

    /// Bytes the relay's header takes in front of a relayed datagram.
    package static let relayHeaderSize = RelayMessage.dataHeaderSize

    /// Where the transport's datagrams to `destination` go now.
    package func route(_ destination: SocketAddress) -> Route {
        guard let peer = MemberAddress.peer(of: destination) else { return .asIs }
        switch self.paths?.route(to: peer) {
        case .direct(let address)?: return .direct(address)
        case .turn?: return .carried(peer: peer)
        case .relayed?, nil:
            guard self.room.relayReady, let relay = self.room.relay else { return .carried(peer: peer) }
            return .relay(relay, peer: peer)
        }
    }

    /// Bytes to leave in front of the transport's datagram to `destination`: the relay's header
    /// when it is relayed, else none.
    package func headroom(for destination: SocketAddress) -> Int {
        if case .relay = self.route(destination) { return Self.relayHeaderSize }
        return 0
    }

    /// Writes the relay's header for `peer` into the ``relayHeaderSize`` bytes at `index` (left
    /// free in front of the datagram), and counts the datagram relayed; a direct path is sought.
    package mutating func writeRelayHeader(peer: UInt32, at index: Int, in buffer: inout ByteBuffer, now: NIODeadline) {
        buffer.setInteger(OnlinePacketType.relayData.rawValue, at: index)
        buffer.setInteger(UInt8(0), at: index + 1)
        buffer.setInteger(peer, at: index + 2)
        self.room.countRelayedOut()
        self.paths?.wanted(peer, now: now)
    }

    /// The source to give the transport for its datagram from `source`: the member's address
    /// when `source` is a member's direct path (or an address it nominated one from).
    package func transportSource(for source: SocketAddress) -> SocketAddress {
        guard let peer = self.paths?.member(sending: source) else { return source }
        return self.address(of: peer)
    }

    /// The address standing for `peer` inside the transport.
    package func address(of peer: UInt32) -> SocketAddress {
        self.memberAddresses[peer] ?? MemberAddress.of(peer)
    }

    /// A datagram that is not the transport's (its first byte is not one of the transport's):
    /// the online layer takes it, or it carries a transport datagram (relayed, or in a TURN Data
    /// indication), returned with the member's address as its source.
    package mutating func receive(_ datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) -> (ByteBuffer, SocketAddress)? {
        if self.isTURNServer(source) {
            return self.unwrapTURN(datagram, now: now).map { ($0.0, self.address(of: $0.1)) }
        }
        guard datagram.getInteger(at: datagram.readerIndex, as: UInt8.self) == OnlinePacketType.relayData.rawValue else {
            self.handle(datagram: datagram, from: source, now: now)
            return nil
        }
        return self.unwrap(datagram, from: source, now: now).map { ($0.0, self.address(of: $0.1)) }
    }

    // MARK: - DatagramMachine

    package mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        if self.isTURNServer(source) {
            _ = self.unwrapTURN(datagram, now: now)
            return
        }
        if let first = datagram.getInteger(at: datagram.readerIndex, as: UInt8.self), OnlinePacketType.isSTUN(firstByte: first),
            !self.room.isReflexiveAnswer(datagram), self.paths != nil
        {
            if let index = self.stunClients.firstIndex(where: { $0.server == TraversalAddress(source) }),
                self.stunClients[index].receive(datagram, from: source)
            {
                if case .mapped(let mapped) = self.stunClients[index].state {
                    self.addReflexiveCandidate(mapped.socketAddress, learnedFrom: source, now: now)
                }
                return
            }
            _ = self.paths!.handleSTUN(datagram, from: source, now: now)
            return
        }
        self.room.handle(datagram: datagram, from: source, now: now)
        self.followRoom(now: now)
    }

    package mutating func handleTimeout(now: NIODeadline) {
        if let deadline = self.room.nextDeadline, deadline <= now { self.room.handleTimeout(now: now) }
        if self.paths != nil, let deadline = self.paths!.nextDeadline, deadline <= now { self.paths!.handleTimeout(now: now) }
        for index in self.stunClients.indices {
            if let deadline = self.stunClients[index].nextDeadline, deadline <= now { self.stunClients[index].handleTimeout(now: now) }
        }
        if let deadline = self.turn?.nextDeadline, deadline <= now {
            self.turn!.handleTimeout(now: now)
            self.followTURN(now: now)
        }
        self.followRoom(now: now)
    }

    package mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        while let peer = self.paths?.pollInvitation() {
            self.room.carry(STUNBinding.indication(random: &self.random), to: peer)
        }
        if let destination = self.room.pollTransmit(now: now, into: &buffer) { return destination }
        for index in self.stunClients.indices {
            if let request = self.stunClients[index].pollTransmit() {
                buffer.writeBytes(request)
                return self.stunClients[index].server.socketAddress
            }
        }
        if let server = self.turnServer?.address {
            if let bytes = self.turn?.pollTransmit() {
                buffer.writeBytes(bytes)
                return server
            }
            if let indication = self.turnOutbox.popFirst() {
                buffer.writeImmutableBuffer(indication)
                return server
            }
        }
        while let (destination, bytes, viaRelay) = self.paths?.pollTransmit() {
            if viaRelay {
                // A check through the TURN allocation: it goes out in a Send indication (next).
                self.sendThroughTURN(bytes, to: destination, now: now)
                return self.pollTransmit(now: now, into: &buffer)
            }
            buffer.writeImmutableBuffer(bytes)
            return destination
        }
        return nil
    }

    package mutating func pollEvent() -> RoomEvent? {
        self.followRoom(now: nil)
        if !self.pending.isEmpty { return self.pending.removeFirst() }
        if let (peer, path) = self.paths?.pollEvent() { return .pathChanged(peer, path) }
        if let (peer, address) = self.paths?.pollSendingFrom() { return .memberSendsFrom(peer, address) }
        return nil
    }

    /// Takes the room client's events, telling the paths of members (and this session's public
    /// address, as a candidate the others are told).
    private mutating func followRoom(now: NIODeadline?) {
        while let event = self.room.pollEvent() {
            switch event {
            case .memberJoined(let record), .memberUpdated(let record):
                if self.memberAddresses[record.peerID] == nil { self.memberAddresses[record.peerID] = MemberAddress.of(record.peerID) }
                self.paths?.memberChanged(record)
            case .memberLeft(let peer):
                self.memberAddresses[peer] = nil
                self.paths?.memberLeft(peer)
            case .left:
                for peer in self.memberAddresses.keys.sorted() { self.paths?.memberLeft(peer) }
                self.memberAddresses.removeAll()
            case .reflexiveAddress(let address):
                if self.paths != nil, let now {
                    self.addReflexiveCandidate(address, learnedFrom: nil, now: now)
                } else if self.paths != nil {
                    self.reflexivePending = address
                }
            default:
                break
            }
            self.pending.append(event)
        }
        if let address = self.reflexivePending, let now {
            self.reflexivePending = nil
            self.addReflexiveCandidate(address, learnedFrom: nil, now: now)
        }
    }

    private var reflexivePending: SocketAddress?

    /// This socket's public address as `server` (nil: the rendezvous) saw it: the record's
    /// server-reflexive candidates become every distinct address learned, the rendezvous's first,
    /// after the host candidates (one host candidate gives way when the record is full).
    private mutating func addReflexiveCandidate(_ address: SocketAddress, learnedFrom server: SocketAddress?, now: NIODeadline) {
        self.reflexive.removeAll { $0.server == server }
        self.reflexive.append((server, address))
        self.reflexive.sort { ($0.server == nil ? 0 : 1) < ($1.server == nil ? 0 : 1) }
        let addresses = self.reflexiveAddresses
        self.room.update({ record in
            record.candidates.removeAll { $0.kind == .serverReflexive }
            for address in addresses {
                if record.candidates.count >= MemberRecord.maximumCandidates {
                    guard let host = record.candidates.lastIndex(where: { $0.kind == .host }), host > 0 else { break }
                    record.candidates.remove(at: host)
                }
                record.candidates.append(.init(kind: .serverReflexive, address: address))
            }
        }, now: now)
    }

    /// The distinct server-reflexive addresses learned so far (the rendezvous's first).
    package var reflexiveAddresses: [SocketAddress] {
        var addresses: [SocketAddress] = []
        for entry in self.reflexive where !addresses.contains(entry.address) { addresses.append(entry.address) }
        return addresses
    }

    package var nextDeadline: NIODeadline? {
        var deadline = self.room.nextDeadline.earliest(self.paths?.nextDeadline).earliest(self.turn?.nextDeadline)
        for client in self.stunClients { deadline = deadline.earliest(client.nextDeadline) }
        return deadline
    }
}
