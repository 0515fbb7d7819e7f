import Foundation

/// How a session finds and is found by others (Game Kit's `GKSessionMode`).
public enum GKSessionMode: Int, Sendable, CaseIterable {
    /// Advertises the session ID; others connect to it. A server relays between its clients.
    case server = 0
    /// Browses for servers and peers of the same session ID and connects to them.
    case client = 1
    /// Advertises like a server and browses like a client.
    case peer = 2
}

/// The state of a peer relative to this session (Game Kit's `GKPeerConnectionState`).
///
/// A peer is reported `.stateAvailable` when first seen, `.stateUnavailable` when it withdraws
/// (or is busy in a game with others), `.stateConnecting` while a request runs in either
/// direction, `.stateConnected` once the link is up, and `.stateDisconnected` when a connected
/// peer goes away. `.stateConnectedRelay`: a peer reached through the server this client is
/// connected to.
public enum GKPeerConnectionState: Int, Sendable, CaseIterable, CustomStringConvertible {
    case stateAvailable = 0
    case stateUnavailable = 1
    case stateConnected = 2
    case stateDisconnected = 3
    case stateConnecting = 4
    case stateConnectedRelay = 5

    /// The state's name, e.g. "connected".
    public var description: String {
        switch self {
        case .stateAvailable: "available"
        case .stateUnavailable: "unavailable"
        case .stateConnected: "connected"
        case .stateDisconnected: "disconnected"
        case .stateConnecting: "connecting"
        case .stateConnectedRelay: "connected (relay)"
        }
    }
}

/// How data travels (Game Kit's `GKSendDataMode`).
public enum GKSendDataMode: Int, Sendable, CaseIterable {
    /// Retransmitted until it arrives; delivered once, in the order sent.
    case reliable = 0
    /// Sent once; may be lost or arrive out of order; arrives whole or not at all.
    case unreliable = 1
}

/// The object a session hands received data to (the informal protocol of Game Kit's
/// `setDataReceiveHandler:withContext:`).
public protocol GKSessionDataReceiveHandler: AnyObject {
    /// Data from a connected peer. `context` is what was passed to
    /// `setDataReceiveHandler(_:withContext:)`. The data is untrusted: validate it.
    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?)
}

/// The session's delegate (Game Kit's `GKSessionDelegate`). Every method has an empty default,
/// so implement only what you need; a session that accepts connections must implement
/// `session(_:didReceiveConnectionRequestFromPeer:)` and answer each request.
///
/// Called on `GKSession.delegateQueue` (the main queue unless changed), one call at a time, in
/// the order things happened.
public protocol GKSessionDelegate: AnyObject {
    /// A peer changed state relative to this session.
    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState)
    /// A peer asks to connect: answer with `acceptConnection(fromPeer:)` or
    /// `denyConnection(fromPeer:)`. Its display name is already known.
    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String)
    /// A connection with a peer failed; `error` is a ``GKSessionError``.
    func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error)
    /// The session failed (e.g. ``GKSessionError/cannotEnableError`` when no network interface
    /// can be used).
    func session(_ session: GKSession, didFailWithError error: Error)
}

extension GKSessionDelegate {
    public func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {}
    public func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {}
    public func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) {}
    public func session(_ session: GKSession, didFailWithError error: Error) {}
}
