import GameKitTransport
import NIOCore

/// Everything a session knows about one other peer. The state reported to the application is
/// derived from these facts (``derivedState``), never stored on its own, so it cannot drift.
struct SessionPeer: Sendable {
    /// Where discovery saw the peer, whether it advertises itself busy, and the key its
    /// liveness is probed with.
    struct Sighting: Sendable, Equatable {
        var addresses: [SocketAddress]
        var isBusy: Bool
        var livenessKey: [UInt8]? = nil
    }

    /// A request from the peer: waiting for the application, then accepted (the link opens when
    /// the peer confirms).
    struct IncomingRequest: Sendable, Equatable {
        var id: ConnectionRequest.ID
        /// The attempt named in the hello.
        var attempt: UInt32
        /// Requests of the same attempt that came over the peer's other paths (our other
        /// addresses): never shown to the application, answered along with `id`.
        var alternates: [ConnectionRequest.ID] = []
        var acceptedLink: LinkID?

        /// Every transport request this one holds.
        var allRequests: [ConnectionRequest.ID] { [self.id] + self.alternates }
    }

    /// Our attempt to connect: one transport handshake per address of the peer, started
    /// together; the first to open wins and the others are withdrawn.
    struct OutgoingAttempt: Sendable, Equatable {
        var attempt: UInt32
        var links: [LinkID]
    }

    var displayName: String
    var sighting: Sighting?
    /// Our connection attempt to the peer.
    var outgoing: OutgoingAttempt?
    var incoming: IncomingRequest?
    /// The open link to the peer.
    var link: LinkID?
    /// The server through which the peer is reached (its roster named it).
    var relayServer: UInt32?
    /// What the application was last told.
    var reported: GKPeerConnectionState?
    /// The transport's liveness watch of the peer, while it is sighted and nothing else (no link,
    /// no request) shows it alive.
    var watch: LivenessWatchID?
    /// The peer stopped answering liveness probes: shown unavailable until it answers again.
    var isSilent = false
    /// The addresses last given to the link as alternatives (PROTOCOL §14.9).
    var linkAlternates: [SocketAddress] = []

    init(displayName: String) {
        self.displayName = displayName
    }

    /// A connection to the peer is being opened: our attempt is under way, or we accepted its
    /// request and its link has not opened yet.
    var isOpening: Bool {
        self.link == nil && self.relayServer == nil && (self.outgoing != nil || self.incoming?.acceptedLink != nil)
    }

    /// The peer's state as the application sees it, or nil when the session no longer knows it.
    var derivedState: GKPeerConnectionState? {
        if self.link != nil || self.relayServer != nil { return .stateConnected }
        if self.outgoing != nil || self.incoming != nil { return .stateConnecting }
        if let sighting = self.sighting { return sighting.isBusy || self.isSilent ? .stateUnavailable : .stateAvailable }
        return nil
    }
}
