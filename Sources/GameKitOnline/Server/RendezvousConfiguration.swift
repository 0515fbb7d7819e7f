import NIOCore

/// The limits and lifetimes of a rendezvous and relay (`gk-rendezvous`'s options).
public struct RendezvousConfiguration: Sendable {
    /// A member that has not refreshed for this long has left.
    public var memberTimeout = TimeAmount.seconds(10)
    /// A room with no member is forgotten (and its code stops working) after this long.
    public var roomIdleLifetime = TimeAmount.minutes(10)
    /// Rooms at once; beyond it creations are refused as busy.
    public var maximumRooms = 100_000
    /// Members one room holds (at most ``RendezvousMessage/maximumMembers``).
    public var maximumMembersPerRoom = 16
    /// Whether this instance relays (it always answers STUN and, with rooms, registrations).
    public var relays = true
    /// Where members are told to send relayed datagrams: nil for this instance's own address.
    public var relayAddress: SocketAddress?
    /// How long a relay ticket admits its holder.
    public var ticketLifetime = TimeAmount.minutes(10)
    /// Bytes one ticket may send through a relay.
    public var ticketByteLimit: UInt64 = 1 << 30
    /// Relayed bytes a second one member may send (with a burst of a quarter of it).
    public var relayBytesPerSecond: Double = 8_000_000
    /// Requests a second from one source address (rendezvous and allocations), with bursts of twice it.
    public var requestsPerSecondPerSource: Double = 50
    /// Wrong room codes a minute from one source address (bursts of 5).
    public var wrongCodesPerMinutePerSource: Double = 10
    /// Wrong room codes a minute for one session ID, from everywhere (bursts of 20).
    public var wrongCodesPerMinutePerSession: Double = 60
    /// Joins a second into one room (bursts of 10).
    public var joinsPerSecondPerRoom: Double = 5
    /// This instance's name in a shared store (set: rooms are shared with other instances
    /// through ``StoreCommand``s and ``SharedRoomsInput``s; nil: rooms are this instance's own).
    public var sharedInstance: String?
    /// STUN answers a second to one source address.
    public var stunAnswersPerSecondPerSource: Double = 20
    /// Limits on the TCP streams of members whose networks block UDP.
    public var streams = StreamLimits()

    /// The defaults above.
    public init() {}
}

/// What a rendezvous counted (`gk-rendezvous` logs them).
public struct RendezvousStatistics: Sendable, Equatable, Codable {
    /// Rooms now.
    public var rooms = 0
    /// Members registered now.
    public var members = 0
    /// Relay allocations now.
    public var allocations = 0
    /// Rooms created so far.
    public var roomsCreated: UInt64 = 0
    /// Members that joined so far (creators included).
    public var joins: UInt64 = 0
    /// Joins with a code no room has.
    public var wrongCodes: UInt64 = 0
    /// STUN binding requests answered.
    public var stunAnswered: UInt64 = 0
    /// Datagrams the relay forwarded.
    public var relayedDatagrams: UInt64 = 0
    /// Bytes the relay forwarded (with its 6-byte headers).
    public var relayedBytes: UInt64 = 0
    /// Undecodable datagrams of any type.
    public var droppedMalformed: UInt64 = 0
    /// Requests naming no member, relayed datagrams from addresses without an allocation,
    /// forged or expired tickets.
    public var droppedUnauthenticated: UInt64 = 0
    /// Requests or relayed bytes over a rate limit.
    public var droppedRateLimited: UInt64 = 0
    /// Relayed datagrams to a member with no allocation, or over a ticket's byte limit.
    public var droppedUndeliverable: UInt64 = 0
    /// The TCP streams (filled in by the running service, not the machine).
    public var streams = StreamStatistics()

    /// All zero.
    public init() {}
}

/// What a rendezvous reports (for its log).
public enum RendezvousEvent: Sendable, Equatable {
    case roomCreated(RoomHandle, RoomCode)
    case memberJoined(RoomHandle, peerID: UInt32, name: String)
    case memberLeft(RoomHandle, peerID: UInt32, timedOut: Bool)
    case roomExpired(RoomHandle)
    case relayAllocated(RoomHandle, peerID: UInt32, address: SocketAddress)
    case refused(SocketAddress, RendezvousRefusal)
    /// For the shared store (only with ``RendezvousConfiguration/sharedInstance``).
    case store(StoreCommand)
}
