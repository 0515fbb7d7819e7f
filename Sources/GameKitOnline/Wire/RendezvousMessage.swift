import NIOCore

/// A room: the 64-bit handle the rendezvous gives it (random, unguessable, the same on every
/// instance), beside the short code people type.
public struct RoomHandle: Hashable, Sendable, CustomStringConvertible {
    /// The 64 bits.
    public let rawValue: UInt64
    /// The handle with these bits.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// The handle in hex.
    public var description: String { String(self.rawValue, radix: 16) }
}

/// The secret a member proves itself with after registering (16 random bytes, sent only to the
/// address that registered).
public struct MemberToken: Hashable, Sendable {
    /// The 16 bytes.
    public let bytes: [UInt8]
    /// The token of 16 bytes; nil for any other count.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }
}

/// Why the rendezvous refused a request (PROTOCOL §18.3).
public enum RendezvousRefusal: UInt8, Sendable, Equatable {
    case malformed = 1
    /// No room with this session and code: a wrong code, or a room that expired.
    case noSuchRoom = 2
    /// Too many requests or wrong codes from this source or for this session: try later.
    case rateLimited = 3
    case roomFull = 4
    /// Another member of the room has this peer ID.
    case peerIDTaken = 5
    /// The token names no member (expired, or registered elsewhere): register again.
    case unknownMember = 6
    /// The rendezvous cannot take more rooms now.
    case busy = 7
}

/// A rendezvous message (type 13): requests carry an ID the answer repeats (PROTOCOL §18.3).
public enum RendezvousMessage: Equatable, Sendable {
    // Client → rendezvous
    case create(request: UInt64, sessionKey: UInt64, holderKey: [UInt8], record: MemberRecord)
    case join(request: UInt64, sessionKey: UInt64, code: RoomCode, holderKey: [UInt8], record: MemberRecord)
    case refresh(request: UInt64, room: RoomHandle, token: MemberToken, rosterVersion: UInt32, wantsTicket: Bool)
    case leave(request: UInt64, room: RoomHandle, token: MemberToken)
    case fetch(request: UInt64, room: RoomHandle, token: MemberToken, peerID: UInt32)
    case update(request: UInt64, room: RoomHandle, token: MemberToken, record: MemberRecord)
    // Rendezvous → client
    case room(request: UInt64, code: RoomCode, room: RoomHandle, token: MemberToken, memberTimeoutSeconds: UInt16, relay: SocketAddress?, ticket: [UInt8])
    case roster(request: UInt64, room: RoomHandle, version: UInt32, relay: SocketAddress?, members: [RosterEntry], ticket: [UInt8])
    case member(request: UInt64, room: RoomHandle, record: MemberRecord)
    case refused(request: UInt64, reason: RendezvousRefusal, retryAfterMilliseconds: UInt32)
    case left(request: UInt64, room: RoomHandle)

    /// One member in a roster: its peer ID and record version.
    public struct RosterEntry: Equatable, Sendable {
        /// The member.
        public var peerID: UInt32
        /// Its record's version.
        public var version: UInt16
        /// An entry.
        public init(peerID: UInt32, version: UInt16) {
            self.peerID = peerID
            self.version = version
        }
    }

    enum Kind: UInt8 {
        case create = 1, join, refresh, leave, fetch, update
        case room = 129, roster, member, refused, left
    }

    /// Registrations are padded to this many bytes, so that no answer is larger than what asked
    /// for it (a forged source address gains nothing; PROTOCOL §18.7).
    public static let registrationSize = 480
    /// The Ed25519 public key size (a relay ticket's holder key).
    public static let holderKeySize = 32
    /// Most members a roster lists (and so a room holds).
    public static let maximumMembers = 64
    /// Longest ticket carried.
    static let maximumTicket = 256

    /// The request ID (0 for a push).
    public var requestID: UInt64 {
        switch self {
        case .create(let r, _, _, _), .join(let r, _, _, _, _), .refresh(let r, _, _, _, _), .leave(let r, _, _),
            .fetch(let r, _, _, _), .update(let r, _, _, _), .room(let r, _, _, _, _, _, _), .roster(let r, _, _, _, _, _),
            .member(let r, _, _), .refused(let r, _, _), .left(let r, _):
            return r
        }
    }

    private var kind: Kind {
        switch self {
        case .create: .create
        case .join: .join
        case .refresh: .refresh
        case .leave: .leave
        case .fetch: .fetch
        case .update: .update
        case .room: .room
        case .roster: .roster
        case .member: .member
        case .refused: .refused
        case .left: .left
        }
    }

    /// Appends the message's bytes (a registration padded to ``registrationSize``).
    public func encode(into buffer: inout ByteBuffer) {
        let start = buffer.writerIndex
        buffer.writeInteger(OnlinePacketType.rendezvous.rawValue)
        buffer.writeInteger(self.kind.rawValue)
        buffer.writeInteger(self.requestID)
        switch self {
        case .create(_, let sessionKey, let holderKey, let record):
            buffer.writeInteger(sessionKey)
            buffer.writeBytes(holderKey)
            record.write(into: &buffer)
        case .join(_, let sessionKey, let code, let holderKey, let record):
            buffer.writeInteger(sessionKey)
            buffer.writeInteger(code.value)
            buffer.writeBytes(holderKey)
            record.write(into: &buffer)
        case .refresh(_, let room, let token, let version, let wantsTicket):
            buffer.writeInteger(room.rawValue)
            buffer.writeBytes(token.bytes)
            buffer.writeInteger(version)
            buffer.writeInteger(UInt8(wantsTicket ? 1 : 0))
        case .leave(_, let room, let token):
            buffer.writeInteger(room.rawValue)
            buffer.writeBytes(token.bytes)
        case .fetch(_, let room, let token, let peerID):
            buffer.writeInteger(room.rawValue)
            buffer.writeBytes(token.bytes)
            buffer.writeInteger(peerID)
        case .update(_, let room, let token, let record):
            buffer.writeInteger(room.rawValue)
            buffer.writeBytes(token.bytes)
            record.write(into: &buffer)
        case .room(_, let code, let room, let token, let timeout, let relay, let ticket):
            buffer.writeInteger(code.value)
            buffer.writeInteger(room.rawValue)
            buffer.writeBytes(token.bytes)
            buffer.writeInteger(timeout)
            WireAddress.write(relay, into: &buffer)
            buffer.writeInteger(UInt16(ticket.count))
            buffer.writeBytes(ticket)
        case .roster(_, let room, let version, let relay, let members, let ticket):
            buffer.writeInteger(room.rawValue)
            buffer.writeInteger(version)
            WireAddress.write(relay, into: &buffer)
            buffer.writeInteger(UInt8(members.count))
            for member in members {
                buffer.writeInteger(member.peerID)
                buffer.writeInteger(member.version)
            }
            buffer.writeInteger(UInt16(ticket.count))
            buffer.writeBytes(ticket)
        case .member(_, let room, let record):
            buffer.writeInteger(room.rawValue)
            record.write(into: &buffer)
        case .refused(_, let reason, let retry):
            buffer.writeInteger(reason.rawValue)
            buffer.writeInteger(retry)
        case .left(_, let room):
            buffer.writeInteger(room.rawValue)
        }
        switch self.kind {
        case .create, .join:
            let written = buffer.writerIndex - start
            if written < Self.registrationSize { buffer.writeRepeatingByte(0, count: Self.registrationSize - written) }
        default:
            break
        }
    }

    /// The message's bytes.
    public var encoded: ByteBuffer {
        var buffer = ByteBuffer()
        self.encode(into: &buffer)
        return buffer
    }

    /// Reads one whole datagram. Registrations shorter than ``registrationSize`` are refused.
    public static func decode(_ datagram: ByteBuffer) throws(OnlineDecodingError) -> RendezvousMessage {
        var buffer = datagram
        let size = buffer.readableBytes
        guard let type: UInt8 = buffer.readInteger(), type == OnlinePacketType.rendezvous.rawValue else { throw .invalidValue("type") }
        let kindByte: UInt8 = try buffer.readValue()
        guard let kind = Kind(rawValue: kindByte) else { throw .unknownKind(kindByte) }
        let request: UInt64 = try buffer.readValue()
        func room() throws(OnlineDecodingError) -> RoomHandle { RoomHandle(rawValue: try buffer.readValue()) }
        func token() throws(OnlineDecodingError) -> MemberToken { MemberToken(bytes: try buffer.readExactly(16))! }
        func ticket() throws(OnlineDecodingError) -> [UInt8] {
            let length: UInt16 = try buffer.readValue()
            guard length <= Self.maximumTicket else { throw .tooLarge }
            return try buffer.readExactly(Int(length))
        }
        let message: RendezvousMessage
        switch kind {
        case .create, .join:
            guard size >= Self.registrationSize else { throw .invalidValue("registration not padded") }
            let sessionKey: UInt64 = try buffer.readValue()
            let code: RoomCode?
            if kind == .join {
                guard let value = RoomCode(value: try buffer.readValue()) else { throw .invalidValue("room code") }
                code = value
            } else {
                code = nil
            }
            let holderKey = try buffer.readExactly(Self.holderKeySize)
            let record = try MemberRecord.read(from: &buffer)
            // The rest is padding: zeros.
            guard buffer.readableBytesView.allSatisfy({ $0 == 0 }) else { throw .invalidValue("padding") }
            buffer.moveReaderIndex(to: buffer.writerIndex)
            if let code {
                message = .join(request: request, sessionKey: sessionKey, code: code, holderKey: holderKey, record: record)
            } else {
                message = .create(request: request, sessionKey: sessionKey, holderKey: holderKey, record: record)
            }
        case .refresh:
            let room = try room()
            let token = try token()
            let version: UInt32 = try buffer.readValue()
            let flags: UInt8 = try buffer.readValue()
            message = .refresh(request: request, room: room, token: token, rosterVersion: version, wantsTicket: flags & 1 != 0)
        case .leave:
            message = .leave(request: request, room: try room(), token: try token())
        case .fetch:
            let room = try room()
            message = .fetch(request: request, room: room, token: try token(), peerID: try buffer.readValue())
        case .update:
            let room = try room()
            let token = try token()
            message = .update(request: request, room: room, token: token, record: try MemberRecord.read(from: &buffer))
        case .room:
            guard let code = RoomCode(value: try buffer.readValue()) else { throw .invalidValue("room code") }
            let room = try room()
            let token = try token()
            let timeout: UInt16 = try buffer.readValue()
            let relay = try WireAddress.read(from: &buffer)
            message = .room(request: request, code: code, room: room, token: token, memberTimeoutSeconds: timeout, relay: relay, ticket: try ticket())
        case .roster:
            let room = try room()
            let version: UInt32 = try buffer.readValue()
            let relay = try WireAddress.read(from: &buffer)
            let count: UInt8 = try buffer.readValue()
            guard count <= Self.maximumMembers else { throw .tooLarge }
            var members: [RosterEntry] = []
            for _ in 0..<count {
                let peer: UInt32 = try buffer.readValue()
                members.append(RosterEntry(peerID: peer, version: try buffer.readValue()))
            }
            message = .roster(request: request, room: room, version: version, relay: relay, members: members, ticket: try ticket())
        case .member:
            let room = try room()
            message = .member(request: request, room: room, record: try MemberRecord.read(from: &buffer))
        case .refused:
            let reasonByte: UInt8 = try buffer.readValue()
            guard let reason = RendezvousRefusal(rawValue: reasonByte) else { throw .invalidValue("refusal \(reasonByte)") }
            message = .refused(request: request, reason: reason, retryAfterMilliseconds: try buffer.readValue())
        case .left:
            message = .left(request: request, room: try room())
        }
        guard buffer.readableBytes == 0 else { throw .invalidValue("trailing bytes") }
        return message
    }
}
