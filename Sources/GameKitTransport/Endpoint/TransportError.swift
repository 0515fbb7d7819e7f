/// Everything that can go wrong in the transport, as seen by the application.
public enum TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The link's send buffer is full; try again when ``TransportEvent/sendBufferAvailable(_:)``
    /// arrives, or use the `async` send that waits.
    case bufferFull
    /// The message is larger than the link may carry in one message.
    case dataTooBig(size: Int, limit: Int)
    /// The link does not exist, is closing or closed.
    case linkNotOpen
    /// The two sides hold different passwords (or one has none): the other side's key confirmation
    /// did not verify (as initiator) or the initiator's request did not open (as responder).
    case authenticationFailed
    /// The responder's application denied the connection with this code.
    case denied(code: UInt16)
    /// The responder did not answer in time.
    case timedOut
    /// The connection attempt was cancelled.
    case cancelled
    /// The responder speaks another protocol version.
    case unsupportedVersion(remote: UInt8)
    /// No connection request with that identifier awaits an answer.
    case unknownConnectionRequest
    /// A handshake payload does not fit in one datagram.
    case payloadTooLarge(size: Int, limit: Int)
    /// The endpoint is closed.
    case endpointClosed
    /// The configuration is unusable; the message says which value.
    case invalidConfiguration(String)

    /// A short English explanation.
    public var description: String {
        switch self {
        case .bufferFull: "send buffer full"
        case .dataTooBig(let size, let limit): "message of \(size) bytes exceeds the limit of \(limit)"
        case .linkNotOpen: "link not open"
        case .authenticationFailed: "authentication failed: wrong password (the two sides' passwords differ)"
        case .denied(let code): "connection denied (code \(code))"
        case .timedOut: "timed out"
        case .cancelled: "cancelled"
        case .unsupportedVersion(let remote): "the remote side speaks protocol version \(remote)"
        case .unknownConnectionRequest: "unknown connection request"
        case .payloadTooLarge(let size, let limit): "handshake payload of \(size) bytes exceeds \(limit)"
        case .endpointClosed: "endpoint closed"
        case .invalidConfiguration(let message): "invalid configuration: \(message)"
        }
    }
}
