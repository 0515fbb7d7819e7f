import NIOCore

/// Identifies a link within its endpoint (the endpoint's 32-bit index for it, which the peer puts
/// in every packet it sends on the link).
public struct LinkID: Hashable, Sendable, CustomStringConvertible {
    /// The index itself.
    public let rawValue: UInt32

    /// Wraps an index (as found in `rawValue` of another ID).
    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// "link <index>".
    public var description: String { "link \(self.rawValue)" }
}

/// An initiator's request to open a link, waiting for the application to accept or deny it.
public struct ConnectionRequest: Sendable {
    /// Identifies a request until it is answered or withdrawn.
    public struct ID: Hashable, Sendable, CustomStringConvertible {
        /// A counter value, unique within the endpoint.
        public let rawValue: UInt64
        /// "request <number>".
        public var description: String { "request \(self.rawValue)" }
    }

    /// What `accept` and `deny` take.
    public let id: ID
    /// Where the initiation came from.
    public let remoteAddress: SocketAddress
    /// What the initiator sent with it (who it is, what it wants).
    public let payload: ByteBuffer
}

/// Why a connection request went away unanswered.
public enum ConnectionRequestWithdrawal: Sendable, Equatable {
    /// The initiator cancelled.
    case cancelled
    /// The initiator's own timeout expired.
    case timedOut
    /// The initiator stopped repeating its initiation (it went away).
    case expired
}

/// What an endpoint reports to its application, in order, on the endpoint's event loop.
public enum TransportEvent: Sendable {
    /// Someone asks to open a link: call `accept` or `deny` with the request's ID.
    case connectionRequest(ConnectionRequest)
    /// A request went away before it was answered.
    case connectionRequestWithdrawn(ConnectionRequest.ID, ConnectionRequestWithdrawal)
    /// A watched peer (``TransportEndpoint/watch(_:peerKey:)``) stopped answering liveness
    /// probes (`alive` false), or answers again (true).
    case liveness(LivenessWatchID, alive: Bool)
    /// A link is open both ways. `payload` is what the peer put in its handshake message.
    case linkOpened(LinkID, remoteAddress: SocketAddress, payload: ByteBuffer)
    /// A `connect` did not succeed.
    case connectFailed(LinkID, TransportError)
    /// A message arrived.
    case received(ByteBuffer, link: LinkID, mode: SendMode)
    /// The link closed; nothing more arrives on it.
    case linkClosed(LinkID, LinkCloseReason)
    /// A link moved to another of the peer's addresses (``TransportEndpoint/setAlternateAddresses(_:for:)``):
    /// its current one had no route, or nothing answered there (PROTOCOL §6.7). Informational:
    /// the link stays open and loses nothing.
    case linkMoved(LinkID, from: SocketAddress, to: SocketAddress)
    /// A send failed with ``TransportError/bufferFull`` and the buffer has drained to half.
    case sendBufferAvailable(LinkID)
    /// An initiation from `remoteAddress` was refused because it did not authenticate (the
    /// initiator holds another password); the initiator is told the same. Reported together with
    /// that reply, so at most 100 times a second (more failures are only counted).
    case handshakeFailed(remoteAddress: SocketAddress, TransportError)
}
