import NIOCore

/// What a rendezvous that shares its rooms with other instances (PROTOCOL §18.10) asks the shared
/// store to do, in order. `gk-rendezvous --database` carries them out in PostgreSQL.
public enum StoreCommand: Sendable, Equatable {
    /// A room was created here; its members will use `relay`.
    case createRoom(RoomHandle, sessionKey: UInt64, code: RoomCode, relay: SocketAddress?)
    /// A member registered here, or changed its record.
    case putMember(RoomHandle, MemberRecord, holderKey: [UInt8])
    /// A member registered here left (or timed out).
    case removeMember(RoomHandle, peerID: UInt32)
    /// A join named a code this instance does not know: which room of the session has it?
    /// Answered with ``SharedRoomsInput/lookedUp(_:room:)``.
    case lookup(UInt64, sessionKey: UInt64, code: RoomCode)
}

/// A room as the shared store holds it: every member, whichever instance it registered with.
public struct SharedRoom: Sendable, Equatable {
    /// A member and the instance it registered with.
    public struct Member: Sendable, Equatable {
        public var record: MemberRecord
        public var holderKey: [UInt8]
        public var instance: String

        /// A member.
        public init(record: MemberRecord, holderKey: [UInt8], instance: String) {
            self.record = record
            self.holderKey = holderKey
            self.instance = instance
        }
    }

    public var handle: RoomHandle
    public var sessionKey: UInt64
    public var code: RoomCode
    /// The relay the room's members use (nil: each instance's own).
    public var relay: SocketAddress?
    public var members: [Member]

    /// A room.
    public init(handle: RoomHandle, sessionKey: UInt64, code: RoomCode, relay: SocketAddress?, members: [Member]) {
        self.handle = handle
        self.sessionKey = sessionKey
        self.code = code
        self.relay = relay
        self.members = members
    }
}

/// What the shared store tells a rendezvous.
public enum SharedRoomsInput: Sendable, Equatable {
    /// The room as the store holds it now (after a change anywhere, or a periodic check).
    case room(SharedRoom)
    /// The room is gone from the store (expired).
    case roomGone(RoomHandle)
    /// The answer to ``StoreCommand/lookup(_:sessionKey:code:)``: the room, or nil when no
    /// room has the code.
    case lookedUp(UInt64, room: SharedRoom?)
    /// The store could not answer the lookup (refused as busy).
    case lookupFailed(UInt64)
}

extension MemberRecord {
    /// The record in its wire form (PROTOCOL §18.3), as a shared store keeps it.
    public var storedBytes: [UInt8] {
        var buffer = ByteBuffer()
        self.write(into: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// A record a shared store kept (``storedBytes``).
    public init(storedBytes: [UInt8]) throws(OnlineDecodingError) {
        var buffer = ByteBuffer(bytes: storedBytes)
        self = try MemberRecord.read(from: &buffer)
        guard buffer.readableBytes == 0 else { throw .invalidValue("trailing bytes") }
    }
}

extension SharedRoom {
    /// A relay address in its wire form (PROTOCOL §18.1), as a shared store keeps it.
    public static func storedBytes(of relay: SocketAddress?) -> [UInt8] {
        var buffer = ByteBuffer()
        WireAddress.write(relay, into: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// A relay address a shared store kept.
    public static func relay(fromStored bytes: [UInt8]) throws(OnlineDecodingError) -> SocketAddress? {
        var buffer = ByteBuffer(bytes: bytes)
        let address = try WireAddress.read(from: &buffer)
        guard buffer.readableBytes == 0 else { throw .invalidValue("trailing bytes") }
        return address
    }
}
