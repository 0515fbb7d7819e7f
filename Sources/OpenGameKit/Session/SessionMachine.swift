import GameKitTransport
import NIOCore

/// A session's logic without I/O: the peers it knows, the connections in both directions, the
/// server's relay, and what discovery should be doing.
///
/// The driver (``SessionCore``) feeds it application calls, transport events and discovery
/// sightings, one at a time under a lock; the machine acts on the transport through
/// ``SessionLinks`` and queues ``SessionNotification``s and ``SessionDiscoveryCommand``s for
/// the driver to take. Its tests drive several machines over an in-memory transport.
/// Timeouts belong to the transport (connect timeouts, disconnect timeout), so the machine keeps
/// no clock. The protocol is docs/PROTOCOL.md §13–14.
struct SessionMachine {
    /// Who this session is.
    struct Identity: Sendable {
        var peerID: UInt32
        var displayName: String
        var mode: GKSessionMode
        var sessionKey: UInt64
        /// A server introduces its clients to each other and relays between them (a Swift-only
        /// opt-in); without it, a server's clients talk to the server only, as in Game Kit.
        var relaysBetweenClients = false
    }

    /// Reliable control and relayed messages waiting for room in a link's send buffer are held
    /// here, up to this many bytes per link; a peer that falls further behind is disconnected.
    static let outboxLimit = 16 << 20
    /// Display names of peers no longer known are kept for `displayName(forPeer:)`, up to this many.
    static let rememberedNames = 1024
    /// A connection attempt tries at most this many of the peer's addresses at once.
    static let maximumPathsPerAttempt = 8

    /// The close code of an ordinary disconnect.
    static let closeNormal: UInt16 = 0
    /// The close code when a peer is disconnected for not keeping up.
    static let closeOverloaded: UInt16 = 2
    /// The close code when a reply names a peer other than the one asked.
    static let closeWrongPeer: UInt16 = 3

    let identity: Identity
    let links: any SessionLinks

    private(set) var isAvailable = false
    var peers: [UInt32: SessionPeer] = [:]
    /// The peer each link (open, accepted or being opened) belongs to.
    var linkOwners: [LinkID: UInt32] = [:]
    var requestOwners: [ConnectionRequest.ID: UInt32] = [:]
    /// The last attempt number used in a hello.
    var lastAttempt: UInt32 = 0
    /// Per peer, the attempt number of its last request that ended (answered, withdrawn or
    /// expired): a path of that attempt or an older one arriving late is refused, never shown
    /// again. At most `rememberedNames` peers.
    var endedAttempts: [UInt32: UInt32] = [:]
    var outboxes: [LinkID: SessionOutbox] = [:]
    var formerNames: [UInt32: String] = [:]
    /// The peer each liveness watch is for.
    var watchedPeers: [LivenessWatchID: UInt32] = [:]
    var statistics = GKSessionStatistics()

    private(set) var notifications: [SessionNotification] = []
    /// What arrived on the library's own channels, for the driver to hand to their receivers
    /// outside its lock.
    var channelInbox: [SessionChannelDelivery] = []
    var discoveryCommands: [SessionDiscoveryCommand] = []
    private var advertising = false
    private var browsing = false

    init(identity: Identity, links: any SessionLinks) {
        self.identity = identity
        self.links = links
    }

    // MARK: - Output

    mutating func takeNotifications() -> [SessionNotification] {
        defer { self.notifications.removeAll(keepingCapacity: true) }
        return self.notifications
    }

    mutating func takeChannelDeliveries() -> [SessionChannelDelivery] {
        guard !self.channelInbox.isEmpty else { return [] }
        defer { self.channelInbox.removeAll() }
        return self.channelInbox
    }

    mutating func takeDiscoveryCommands() -> [SessionDiscoveryCommand] {
        defer { self.discoveryCommands.removeAll() }
        return self.discoveryCommands
    }

    mutating func notify(_ notification: SessionNotification) {
        self.notifications.append(notification)
    }

    // MARK: - Availability and discovery

    mutating func setAvailable(_ available: Bool) {
        self.isAvailable = available
        self.updateDiscovery()
    }

    /// Whether any peer is connected directly.
    var hasDirectConnection: Bool {
        self.peers.values.contains { $0.link != nil }
    }

    /// Brings advertising and browsing in line with availability and mode, as the reference
    /// says: while available, servers and peers advertise and clients and peers browse,
    /// connected or not; while unavailable the session keeps its connections but is neither
    /// seen nor looking.
    mutating func updateDiscovery() {
        let advertise = self.isAvailable && self.identity.mode != .client
        if advertise != self.advertising {
            self.advertising = advertise
            self.discoveryCommands.append(advertise ? .advertise : .withdraw)
        }
        let browse = self.isAvailable && self.identity.mode != .server
        if browse != self.browsing {
            self.browsing = browse
            self.discoveryCommands.append(browse ? .startBrowsing : .stopBrowsing)
            if !browse {
                for peerID in Array(self.peers.keys) where self.peers[peerID]?.sighting != nil {
                    self.peers[peerID]!.sighting = nil
                    self.reconcile(peerID)
                }
            }
        }
    }

    /// Discovery saw a peer of this session (or saw it change).
    mutating func peerSighted(_ peerID: UInt32, displayName: String, addresses: [SocketAddress], isBusy: Bool, livenessKey: [UInt8]? = nil) {
        guard self.browsing, peerID != self.identity.peerID, !addresses.isEmpty else { return }
        var peer = self.peers[peerID] ?? SessionPeer(displayName: displayName)
        peer.displayName = displayName
        peer.sighting = SessionPeer.Sighting(addresses: addresses, isBusy: isBusy, livenessKey: livenessKey)
        self.peers[peerID] = peer
        self.reconcile(peerID)
    }

    /// Discovery lost a peer (goodbye or expiry).
    mutating func peerLost(_ peerID: UInt32) {
        guard self.peers[peerID]?.sighting != nil else { return }
        self.peers[peerID]!.sighting = nil
        self.reconcile(peerID)
    }

    /// Discovery could not start: no usable interface.
    mutating func discoveryFailed() {
        self.notify(.failed(.cannotEnableError))
    }

    // MARK: - Reporting

    /// Reports a peer's state when it changed and forgets peers the session no longer knows.
    ///
    /// Connected (directly or through a server) → anything else is reported
    /// `.stateDisconnected` first. A peer
    /// first seen busy is not reported until it is free; a peer that stops being available is
    /// reported `.stateUnavailable`.
    mutating func reconcile(_ peerID: UInt32) {
        guard var peer = self.peers[peerID] else { return }
        let old = peer.reported
        let new = peer.derivedState
        if old != new {
            if old == .stateConnected {
                self.notify(.peerChanged(peerID, .stateDisconnected))
            }
            switch new {
            case .stateAvailable, .stateConnecting, .stateConnected:
                self.notify(.peerChanged(peerID, new!))
            case .stateUnavailable, nil:
                if old == .stateAvailable { self.notify(.peerChanged(peerID, .stateUnavailable)) }
            case .stateDisconnected:
                break
            }
            peer.reported = new
        }
        self.reviewWatch(peerID, of: &peer)
        self.reviewLinkAlternates(of: &peer)
        if new == nil {
            self.forget(peerID, name: peer.displayName)
        } else {
            self.peers[peerID] = peer
        }
    }

    private mutating func forget(_ peerID: UInt32, name: String) {
        self.peers[peerID] = nil
        if self.formerNames.count >= Self.rememberedNames, let any = self.formerNames.keys.first {
            self.formerNames[any] = nil
        }
        self.formerNames[peerID] = name
    }

    // MARK: - Queries

    /// The peers in a state, in peer ID order.
    func peers(in state: GKPeerConnectionState) -> [UInt32] {
        self.peers.filter { $0.value.derivedState == state }.map(\.key).sorted()
    }

    func displayName(of peerID: UInt32) -> String? {
        if peerID == self.identity.peerID { return self.identity.displayName }
        return self.peers[peerID]?.displayName ?? self.formerNames[peerID]
    }

    func state(of peerID: UInt32) -> GKPeerConnectionState? {
        self.peers[peerID]?.derivedState
    }

    /// How many peers are in each state, in one pass.
    var peerCounts: [GKPeerConnectionState: Int] {
        var counts: [GKPeerConnectionState: Int] = [:]
        for peer in self.peers.values {
            if let state = peer.derivedState { counts[state, default: 0] += 1 }
        }
        return counts
    }

    /// Which of `peerIDs` have a connection being opened (``SessionPeer/isOpening``).
    func opening(_ peerIDs: [UInt32]) -> Set<UInt32> {
        Set(peerIDs.filter { self.peers[$0]?.isOpening == true })
    }

    /// How a connected peer is reached: directly, or through the server with this peer ID.
    func route(to peerID: UInt32) -> SessionRoute? {
        guard let peer = self.peers[peerID] else { return nil }
        if peer.link != nil { return .direct }
        return peer.relayServer.map(SessionRoute.server)
    }
}
