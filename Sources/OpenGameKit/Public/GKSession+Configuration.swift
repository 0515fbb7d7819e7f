import CoreMetrics
import Logging
import Foundation

extension GKSession {
    /// Network options of a session (a Swift-only addition).
    public struct Configuration: Sendable {
        /// Interfaces to discover peers on, by name (e.g. `["eth0"]`). Nil: the environment
        /// variable `OGK_DISCOVERY_INTERFACES` (comma-separated) if set, else every interface
        /// that is up, multicast-capable and addressed.
        public var interfaceNames: [String]?
        /// The local address of the session's UDP socket: nil for every address (IPv6 and IPv4
        /// when the system allows, else IPv4 only).
        public var bindAddress: String?
        /// The UDP port of the session's socket; 0 picks a free one.
        public var port: Int = 0
        /// A `.server` session introduces its clients to each other and relays their data, so
        /// that every member of a room can send to every other (default false). Game Kit has no
        /// such relay: without it a server's clients see and reach the server only, and what a
        /// client sends to all peers goes to the server. Each client then sees the others as
        /// `.stateConnected`; ``GKSession/route(toPeer:)`` tells which are reached through the
        /// server.
        public var relaysBetweenClients = false
        /// Where the session logs (swift-log), under the label `opengamekit.session`: peers seen
        /// and lost, connection attempts and their outcome, peer states, at debug; its transport
        /// logs through it too (metadata `layer: transport`). What is kept is the handler's
        /// choice (swift-log's default handler keeps info and above; the project's tools set it
        /// from `OGK_LOG_LEVEL`). Discovery, shared by the process's sessions, logs under
        /// `opengamekit.discovery`.
        public var logger = Logger(label: "opengamekit.session")
        /// Where the session's metrics go (swift-metrics): the gauge `ogk_session_peers` by
        /// `state`, and its transport's (the README's Metrics section lists them), each with the dimension
        /// `session` (the peer ID). Nil: the process's bootstrapped backend.
        public var metricsFactory: (any MetricsFactory)?
        /// A room on a rendezvous server, so that peers on other networks take part (nil: the
        /// local network only). Peers on the local network are found as well either way.
        public var online: Online?

        /// The defaults: every interface, any port, no relaying.
        public init(interfaceNames: [String]? = nil, bindAddress: String? = nil, port: Int = 0, relaysBetweenClients: Bool = false) {
            self.interfaceNames = interfaceNames
            self.bindAddress = bindAddress
            self.port = port
            self.relaysBetweenClients = relaysBetweenClients
        }
    }

    /// How a connected peer is reached (a Swift-only addition).
    public enum PeerRoute: Hashable, Sendable {
        /// Over a connection of this session's own.
        case direct
        /// Through the server with this peer ID, which relays between its clients
        /// (``Configuration/relaysBetweenClients``).
        case throughServer(String)
    }
}
