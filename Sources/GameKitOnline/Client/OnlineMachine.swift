@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitTraversal
import NIOCore

/// An online session's machine on its socket, beside the transport (PROTOCOL §18): the room
/// client (rendezvous and relay) and the direct paths to members, composed. STUN is told apart
/// here: the rendezvous's answer to the room client's binding request, or a member's check.
package struct OnlineMachine: DatagramMachine {
    package typealias Event = RoomEvent

    package private(set) var room: RoomClient
    package private(set) var paths: MemberPaths?
    private var pending: [RoomEvent] = []
    private var random: MachineRandom

    /// `paths` nil: no direct paths (everything through the relay).
    package init(room: RoomClient, paths: MemberPaths?, random: MachineRandom = .system()) {
        self.room = room
        self.paths = paths
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
            _ = self.paths!.handleSTUN(datagram, from: source, now: now)
            return
        }
        self.room.handle(datagram: datagram, from: source, now: now)
        self.followRoom(now: now)
    }

    package mutating func handleTimeout(now: NIODeadline) {
        if let deadline = self.room.nextDeadline, deadline <= now { self.room.handleTimeout(now: now) }
        if self.paths != nil, let deadline = self.paths!.nextDeadline, deadline <= now { self.paths!.handleTimeout(now: now) }
        self.followRoom(now: now)
    }

    package mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        while let peer = self.paths?.pollInvitation() {
            self.room.carry(STUNBinding.indication(random: &self.random), to: peer)
        }
        if let destination = self.room.pollTransmit(now: now, into: &buffer) { return destination }
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
                    self.addReflexiveCandidate(address, now: now)
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
            self.addReflexiveCandidate(address, now: now)
        }
    }

    private var reflexivePending: SocketAddress?

    private mutating func addReflexiveCandidate(_ address: SocketAddress, now: NIODeadline) {
        self.room.update({ record in
            record.candidates.removeAll { $0.kind == .serverReflexive }
            if record.candidates.count >= MemberRecord.maximumCandidates { record.candidates.removeLast() }
            record.candidates.append(.init(kind: .serverReflexive, address: address))
        }, now: now)
    }

    package var nextDeadline: NIODeadline? {
        self.room.nextDeadline.earliest(self.paths?.nextDeadline)
    }
}
