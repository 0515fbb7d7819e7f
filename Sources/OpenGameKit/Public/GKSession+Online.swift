import Foundation

extension GKSession.Configuration {
    /// A room on a rendezvous server, for peers on other networks (a Swift-only addition; Game
    /// Kit left the picker's "online" choice to each application). Members of the room appear
    /// like nearby peers: `.stateAvailable`, then connect, accept, send as on the LAN. Their
    /// traffic is encrypted end to end; the rendezvous and its relay see neither keys nor data.
    public struct Online: Sendable, Equatable {
        /// Which room.
        public enum Room: Sendable, Hashable {
            /// A new room: its code (``GKSession/roomCode``) is given to friends.
            case create
            /// The room with this code (twelve characters, e.g. `7K3Q-XM4F-9ABR`; case, `I`/`L`/`O` and
            /// hyphens are forgiven).
            case join(code: String)
        }

        /// The rendezvous, as `HOST:PORT` (IPv6 in brackets); several are tried in order, the
        /// next when one stops answering. A host name is looked up when the session starts.
        public var rendezvous: [String]
        /// Which room.
        public var room: Room
        /// Whether peers on the local network are found too, by multicast DNS (default true).
        /// False: the session is seen by, and sees, members of its room only.
        public var alsoNearby: Bool
        /// Whether the session looks for direct paths to members (NAT traversal, default true).
        /// False: everything goes through the relay, and members never learn this machine's
        /// addresses.
        public var directPaths: Bool
        /// STUN servers, `HOST[:PORT]` (port 3478 by default), asked for this machine's public
        /// address besides the rendezvous (which answers STUN itself): each distinct address
        /// they report is one more candidate for direct paths. Empty by default.
        public var stunServers: [String] = []
        /// TURN servers (RFC 8656 over UDP); the first is used. With one, the session also
        /// offers members an address on it (a relayed candidate), and a member that cannot be
        /// reached directly may be reached through it instead of the rendezvous's relay, for
        /// deployments that run their own TURN servers (or a rendezvous without a relay). Empty
        /// by default; used only with ``directPaths``.
        public var turnServers: [TURNServer] = []

        /// A TURN server: `HOST[:PORT]` (port 3478 by default) and its long-term credentials.
        public struct TURNServer: Sendable, Equatable {
            /// `HOST[:PORT]`, IPv6 in brackets.
            public var address: String
            /// The long-term credential's user name.
            public var username: String
            /// The long-term credential's password.
            public var password: String

            /// A TURN server and its credentials.
            public init(address: String, username: String, password: String) {
                self.address = address
                self.username = username
                self.password = password
            }
        }

        /// A room on one rendezvous.
        public init(rendezvous: String, room: Room, alsoNearby: Bool = true, directPaths: Bool = true) {
            self.init(rendezvous: [rendezvous], room: room, alsoNearby: alsoNearby, directPaths: directPaths)
        }

        /// A room on one of several rendezvous instances, tried in order.
        public init(rendezvous: [String], room: Room, alsoNearby: Bool = true, directPaths: Bool = true) {
            self.rendezvous = rendezvous
            self.room = room
            self.alsoNearby = alsoNearby
            self.directPaths = directPaths
        }

        /// The default port of `gk-rendezvous`.
        public static let defaultPort = 7878
        /// The default port of STUN servers (RFC 8489).
        public static let defaultSTUNPort = 3478
    }
}

extension GKSession {
    /// How a connected peer's traffic travels (a Swift-only addition).
    public enum PeerPath: Hashable, Sendable, CustomStringConvertible {
        /// Straight to the peer on the local network (found by discovery).
        case lan
        /// Straight to the peer across the internet (NAT traversal found a way).
        case direct
        /// Through a relay, still encrypted end to end: the rendezvous's, or a TURN server
        /// (``Configuration/Online-swift.struct/turnServers``) of either side.
        case relayed

        /// "LAN", "direct" or "relayed".
        public var description: String {
            switch self {
            case .lan: "LAN"
            case .direct: "direct"
            case .relayed: "relayed"
            }
        }
    }

    /// Whether the session is configured for an online room (``Configuration/online``, or the
    /// peer picker's online choice).
    public var isOnline: Bool { self.core.onlineConfiguration != nil }

    /// The code of the session's online room, once the rendezvous has answered (nil before,
    /// and for a session that is not online). Give it to the friends who should join.
    public var roomCode: String? { self.core.roomCode }

    /// Waits for the online room's code: returns it once the rendezvous answers, or throws why
    /// the session is not in the room (a wrong or expired code, no rendezvous).
    public func waitForRoomCode() async throws(GKSessionError) -> String {
        try await self.core.waitForRoomCode()
    }

    /// The verification code of the connection to a peer: eight letters and digits (`XXXX-XXXX`)
    /// that the peer's side shows too, for the same connection. When two players read the same
    /// code to each other, nobody in between (not even an online room's relay) ran their
    /// handshake. Nil when the peer is not connected directly. A Swift-only addition.
    public func verificationCode(forPeer peerID: String) -> String? {
        guard let id = UInt32(peerID) else { return nil }
        return self.core.verificationCode(for: id)
    }

    /// How traffic to a connected peer travels; nil when the peer is not connected.
    public func path(forPeer peerID: String) -> PeerPath? {
        guard let id = UInt32(peerID) else { return nil }
        return self.core.path(to: id)
    }
}
