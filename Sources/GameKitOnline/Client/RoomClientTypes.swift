import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What an online session asks of the rendezvous: a new room, or the room with a code.
public enum RoomRequest: Sendable, Equatable {
    case create
    case join(RoomCode)
}

/// Why a session could not be in a room (PROTOCOL §18.3).
public enum RoomError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No room of this session has the code: mistyped, or expired.
    case noSuchRoom(RoomCode)
    /// The rendezvous refused for now: too many attempts (or wrong codes) from here.
    case rateLimited
    case roomFull
    /// Another member of the room has this session's peer ID.
    case peerIDTaken
    /// No rendezvous answered.
    case rendezvousUnreachable
    /// The rendezvous cannot take more rooms now.
    case rendezvousBusy

    /// What happened, as a sentence for the player.
    public var description: String {
        switch self {
        case .noSuchRoom(let code): Self.noSuchRoom(displayed: code.displayed)
        case .rateLimited: "The rendezvous refused: too many attempts or wrong codes from this address. Wait a minute and try again."
        case .roomFull: "The room is full."
        case .peerIDTaken: "Another member of the room has this session's peer ID."
        case .rendezvousUnreachable: "No answer from the rendezvous: check its address, and that UDP can leave this network."
        case .rendezvousBusy: "The rendezvous is busy: try again later."
        }
    }

    /// The sentence for a room that does not exist, naming it as the player knows it (the whole
    /// code, when the session has it).
    public static func noSuchRoom(displayed code: String) -> String {
        "There is no room \(code) for this game: check the code (a room ends some minutes after everyone has left)."
    }
}

/// How an online session's datagrams reach one member.
public enum OnlinePath: Sendable, Equatable {
    /// Through the relay.
    case relayed
    /// Straight to the member's address.
    case direct(SocketAddress)
    /// Through this side's TURN allocation to the member's address (a configured TURN server
    /// relays; the rendezvous's relay is not used).
    case turn(SocketAddress)
}

/// What a room client reports.
public enum RoomEvent: Sendable, Equatable {
    /// In the room: its code (to give to friends) and handle.
    case joined(RoomCode, RoomHandle)
    case memberJoined(MemberRecord)
    case memberUpdated(MemberRecord)
    case memberLeft(UInt32)
    /// The relay carries this session's datagrams.
    case relayReady
    /// The address the rendezvous saw this session's socket at.
    case reflexiveAddress(SocketAddress)
    /// The rendezvous stopped answering; registering again (with the next address, if several).
    case rendezvousLost
    /// Out of the room for good.
    case failed(RoomError)
    /// Left the room (the session closed).
    case left
    /// The transport's datagrams to a member now take this path.
    case pathChanged(UInt32, OnlinePath)
    /// A member nominated a direct path from this address: its transport datagrams may come
    /// straight from there from now on, even before this side selects the path (its own check
    /// of the path may still be under way) and after this side gives the path up. Until the
    /// member leaves, datagrams from there are the member's.
    case memberSendsFrom(UInt32, SocketAddress)
    /// The configured TURN server gave this relayed address (a candidate members are told).
    case turnAllocated(SocketAddress)
    /// The configured TURN server cannot be used (why); direct paths and the rendezvous's relay
    /// go on without it.
    case turnFailed(String)
}

/// Addresses that stand for room members inside the transport (PROTOCOL §18.6): in RFC 6666's
/// discard-only prefix `100::/64`, never routed anywhere, with the member's peer ID in the low
/// 32 bits. The transport sends to them like to any address; the online layer carries what it
/// sends there through the relay (or, later, straight to the member).
public enum MemberAddress {
    /// The port every member address has.
    public static let port = 9

    /// The address standing for `peerID`.
    public static func of(_ peerID: UInt32) -> SocketAddress {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = in_port_t(Self.port).bigEndian
        withUnsafeMutableBytes(of: &address.sin6_addr) { raw in
            raw[0] = 0x01
            raw[12] = UInt8(peerID >> 24)
            raw[13] = UInt8(peerID >> 16 & 0xFF)
            raw[14] = UInt8(peerID >> 8 & 0xFF)
            raw[15] = UInt8(peerID & 0xFF)
        }
        return SocketAddress(address, host: "")
    }

    /// The peer ID `address` stands for, or nil for an ordinary address.
    public static func peer(of address: SocketAddress) -> UInt32? {
        guard case .v6(let v6) = address else { return nil }
        // Read as four words (network order): asked of every datagram an online session sends,
        // so no slices or closures that a debug build would allocate for.
        return withUnsafeBytes(of: v6.address.sin6_addr) { raw -> UInt32? in
            let prefix = UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
            let middle = raw.loadUnaligned(fromByteOffset: 4, as: UInt64.self)
            guard prefix == 0x0100_0000, middle == 0 else { return nil }
            return UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        }
    }
}
