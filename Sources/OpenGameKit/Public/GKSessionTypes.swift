import Foundation

/// How a session finds and is found by others (Game Kit's `GKSessionMode`, a C enum: `Int32`
/// raw values).
public enum GKSessionMode: Int32, Sendable, CaseIterable {
    /// Advertises the session ID; others connect to it. Its clients talk to the server (relaying
    /// between them is a Swift-only opt-in, ``GKSession/Configuration/relaysBetweenClients``).
    case server = 0
    /// Browses for servers and peers of the same session ID and connects to them.
    case client = 1
    /// Advertises like a server and browses like a client.
    case peer = 2
}

/// The state of a peer relative to this session (Game Kit's `GKPeerConnectionState`, exactly its
/// five cases, with `Int32` raw values).
///
/// A peer is reported `.stateAvailable` when first seen, `.stateUnavailable` when it stops being
/// available (it set `isAvailable` to false, or left), `.stateConnecting` while a request runs in
/// either direction, `.stateConnected` once connected, and `.stateDisconnected` when a connected
/// peer goes away. A peer reached through a server that relays between its clients is
/// `.stateConnected` too; ``GKSession/route(toPeer:)`` tells the two apart.
public enum GKPeerConnectionState: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// Not connected to the session, but one it can connect to.
    case stateAvailable = 0
    /// No longer available for connections.
    case stateUnavailable = 1
    /// Connected to the session.
    case stateConnected = 2
    /// Disconnected from the session.
    case stateDisconnected = 3
    /// A connection request runs, in either direction.
    case stateConnecting = 4

    /// The state's name, e.g. "connected".
    public var description: String {
        switch self {
        case .stateAvailable: "available"
        case .stateUnavailable: "unavailable"
        case .stateConnected: "connected"
        case .stateDisconnected: "disconnected"
        case .stateConnecting: "connecting"
        }
    }
}

/// How data travels (Game Kit's `GKSendDataMode`, `Int32` raw values).
public enum GKSendDataMode: Int32, Sendable, CaseIterable {
    /// Retransmitted until it arrives; delivered once, in the order sent.
    case reliable = 0
    /// Sent once; may be lost or arrive out of order; arrives whole or not at all.
    case unreliable = 1
}

/// The object a session hands received data to (the informal protocol of Game Kit's
/// `setDataReceiveHandler:withContext:`).
///
/// Game Kit found `receiveData:fromPeer:inSession:context:` on any object with an Objective-C
/// message send, which Linux does not have; so the handler adopts this protocol. It is the one
/// change a port needs: `class Game: NSObject, GKSessionDelegate` becomes
/// `class Game: NSObject, GKSessionDelegate, GKSessionDataReceiveHandler`. The method is written
/// as before.
public protocol GKSessionDataReceiveHandler: AnyObject {
    /// Data from a connected peer. `context` is what was passed to
    /// `setDataReceiveHandler(_:withContext:)`. The data is untrusted: validate it.
    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?)
}

/// The session's delegate (Game Kit's `GKSessionDelegate`). Every method has an empty default,
/// as Game Kit's are optional, so implement only what you need; a session that accepts
/// connections must implement `session(_:didReceiveConnectionRequestFromPeer:)` and answer each
/// request. Write the methods as Apple's SDK declares them (parameters not optional): a method
/// whose parameters differ is a different method, and the session never calls it.
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
    /// Does nothing.
    public func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {}
    /// Does nothing: the request waits for an answer until it times out.
    public func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {}
    /// Does nothing.
    public func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) {}
    /// Does nothing.
    public func session(_ session: GKSession, didFailWithError error: Error) {}
}
