@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitTraversal
import NIOCore

/// An online session's machine on its socket, beside the transport (PROTOCOL §18): the room
/// client (rendezvous and relay) and the direct paths to members, composed. STUN is told apart
/// here: the rendezvous's answer to the room client's binding request, a configured STUN
/// server's answer, or a member's check.
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

    /// `paths` nil: no direct paths (everything through the relay). `stunServers`: more servers
    /// to learn this socket's public addresses from (only with direct paths).
    package init(room: RoomClient, paths: MemberPaths?, stunServers: [SocketAddress] = [], random: MachineRandom = .system()) {
        self.room = room
        self.paths = paths
        self.stunServers = paths == nil ? [] : stunServers
        self.random = random
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
    }

    package mutating func leave(now: NIODeadline) {
        self.room.leave(now: now)
    }

    /// A transport datagram to `peer` that goes through the relay; a direct path is sought.
    package mutating func carry(_ datagram: ByteBuffer, to peer: UInt32, now: NIODeadline) {
        self.room.carry(datagram, to: peer)
        self.paths?.wanted(peer, now: now)
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

    // MARK: - DatagramMachine

    package mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
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
        guard let (destination, bytes) = self.paths?.pollTransmit() else { return nil }
        buffer.writeImmutableBuffer(bytes)
        return destination
    }

    package mutating func pollEvent() -> RoomEvent? {
        self.followRoom(now: nil)
        if !self.pending.isEmpty { return self.pending.removeFirst() }
        if let (peer, path) = self.paths?.pollEvent() { return .pathChanged(peer, path) }
        return nil
    }

    /// Takes the room client's events, telling the paths of members (and this session's public
    /// address, as a candidate the others are told).
    private mutating func followRoom(now: NIODeadline?) {
        while let event = self.room.pollEvent() {
            switch event {
            case .memberJoined(let record), .memberUpdated(let record):
                self.paths?.memberChanged(record)
            case .memberLeft(let peer):
                self.paths?.memberLeft(peer)
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
        var deadline = self.room.nextDeadline.earliest(self.paths?.nextDeadline)
        for client in self.stunClients { deadline = deadline.earliest(client.nextDeadline) }
        return deadline
    }
}
