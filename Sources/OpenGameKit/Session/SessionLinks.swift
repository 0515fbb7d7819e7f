import GameKitTransport
import NIOCore

/// The transport operations a ``SessionMachine`` performs. ``TransportEndpoint`` is the real
/// one; the machine's tests use an in-memory one. Every call is synchronous and never calls back
/// into the session.
protocol SessionLinks: AnyObject, Sendable {
    func connect(to address: SocketAddress, payload: ByteBuffer, timeout: TimeAmount?) throws(TransportError) -> LinkID
    func cancelConnect(_ link: LinkID) -> Bool
    func accept(_ request: ConnectionRequest.ID, payload: ByteBuffer) throws(TransportError) -> LinkID
    func deny(_ request: ConnectionRequest.ID, code: UInt16) throws(TransportError)
    func send(_ message: ByteBuffer, on link: LinkID, mode: SendMode) throws(TransportError)
    func send(_ batch: [(message: ByteBuffer, link: LinkID)], mode: SendMode) throws(TransportError)
    func close(_ link: LinkID, code: UInt16) throws(TransportError)
    /// Starts probing a peer's liveness key at these addresses (PROTOCOL §6.6).
    func watch(_ addresses: [SocketAddress], peerKey: [UInt8]) throws(TransportError) -> LivenessWatchID
    func updateWatch(_ id: LivenessWatchID, addresses: [SocketAddress])
    func unwatch(_ id: LivenessWatchID)
    /// The peer's other addresses, for the link to move to if its own stops working (PROTOCOL §6.7).
    func setAlternateAddresses(_ addresses: [SocketAddress], for link: LinkID)
}

extension TransportEndpoint: SessionLinks {}

/// What the session tells its application, in order. The driver turns these into delegate and
/// data-handler calls and into the elements of the async sequences.
enum SessionNotification: Sendable, Equatable {
    case peerChanged(UInt32, GKPeerConnectionState)
    case connectionRequest(UInt32)
    case connectionFailed(UInt32, GKSessionError.Code)
    /// The peer's handshake did not prove the same password (in an online room: the room code's
    /// secret part too); the `connectionFailed` that follows is this. Not delivered as such: the
    /// driver words the failure after it.
    case authenticationFailed(UInt32)
    case received(ByteBuffer, from: UInt32, mode: SendMode)
    case failed(GKSessionError.Code)
}

/// Data that arrived on one of the library's channels (``SessionChannel``).
struct SessionChannelDelivery: Sendable, Equatable {
    var channel: UInt8
    var data: ByteBuffer
    var from: UInt32
    var mode: SendMode
}

/// How a connected peer is reached.
enum SessionRoute: Sendable, Equatable {
    /// Over a link of this session's own.
    case direct
    /// Through the server with this peer ID.
    case server(UInt32)
}

/// What the session wants of discovery. The driver keeps the advertisement and the browser in
/// step with the latest command.
enum SessionDiscoveryCommand: Sendable, Equatable {
    /// Advertise the session.
    case advertise
    /// Stop advertising (goodbye packets).
    case withdraw
    /// Start browsing.
    case startBrowsing
    /// Stop browsing; the peers seen so far are forgotten.
    case stopBrowsing
    /// Ask the network whether this peer's records still hold (RFC 6762 §10.4): it stopped
    /// answering liveness probes, or a connection to it got no answer.
    case reconfirm(UInt32)
}

/// The session's counters.
public struct GKSessionStatistics: Sendable, Equatable {
    /// Messages from peers that could not be read (dropped; the link stays up).
    public var malformedMessages = 0
    /// Times a peer seen on the network stopped answering liveness probes and was reported
    /// unavailable.
    public var silentPeers = 0
    /// Times a connected peer's link moved to another of its addresses (an interface went down,
    /// or the old path stopped answering), staying connected.
    public var linkMoves = 0
    /// Connection requests refused before the application saw them (wrong session, malformed,
    /// not accepting, duplicate).
    public var refusedRequests = 0
    /// Handshakes that failed authentication (another password).
    public var authenticationFailures = 0
    /// Messages a server forwarded between its clients.
    public var relayedMessages = 0
    /// Relay requests a server could not forward (unknown destination, unreliable data with no room).
    public var relayDropped = 0
    /// Links closed because a peer could not keep up with relayed and control messages.
    public var overloadedLinks = 0
}
