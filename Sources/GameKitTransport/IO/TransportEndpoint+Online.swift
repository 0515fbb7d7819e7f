@_spi(Machine) import GameKitOnline
import NIOCore

/// An online session's layer on the endpoint (``bind(to:configuration:online:group:onEvent:onRoomEvent:)``):
/// what the session asks of it. Package access: the session composes it, applications do not.
extension TransportEndpoint {
    /// Changes this member's record (the room's other members are told).
    package func updateMemberRecord(_ change: (inout MemberRecord) -> Void) {
        _ = self.core.withOnline { online, now in online.update(change, now: now) }
    }

    /// The room's code, once known.
    package var roomCode: RoomCode? { self.core.readOnline { $0.room.code } ?? nil }

    /// Whether the relay carries for this session now.
    package var relayReady: Bool { self.core.readOnline { $0.room.relayReady } ?? false }

    /// How the transport's datagrams to `peer` travel now (nil without an online layer).
    package func path(to peer: UInt32) -> OnlinePath? {
        self.core.readOnline { $0.paths?.route(to: peer) ?? .relayed }
    }

    /// Whether the online layer's datagrams to `address` go over TCP now.
    package func usesStream(to address: SocketAddress) -> Bool {
        self.core.streams?.usesStream(to: address) ?? false
    }
}
