import Foundation

/// The error domain of every error a ``GKSessionError`` code belongs to.
public let GKSessionErrorDomain = "com.apple.gamekit.GKSessionErrorDomain"

/// Error codes of the session error domain, with the values of Apple's Game Kit so that code
/// comparing raw codes keeps working after a port. As an `NSError` its domain is
/// ``GKSessionErrorDomain`` and its code the raw value.
public enum GKSessionError: Int, Error, Sendable, CaseIterable, CustomNSError, CustomStringConvertible {
    /// A parameter had an unexpected value (e.g. an empty or malformed peer list).
    case invalidParameterError = 30500
    /// No peer with the given peer ID is known to the session.
    case peerNotFoundError = 30501
    /// The remote peer declined the connection request.
    case declinedError = 30502
    /// The operation did not complete within its timeout.
    case timedOutError = 30503
    /// The connection request was cancelled.
    case cancelledError = 30504
    /// The connection to the peer could not be established (unreachable, another session, a
    /// different password).
    case connectionFailedError = 30505
    /// The connection to the peer closed unexpectedly.
    case connectionClosedError = 30506
    /// The data is larger than a single send may carry (``GKSession/maximumReliableDataSize``,
    /// ``GKSession/maximumUnreliableDataSize``).
    case dataTooBigError = 30507
    /// The peer is not connected.
    case notConnectedError = 30508
    /// The session could not be made available (no usable network interface, no socket).
    case cannotEnableError = 30509
    /// The peer has already asked to connect to this session, or both asked at once and the
    /// other request goes ahead.
    case inProgressError = 30510
    /// An error in the session's connection code.
    case connectivityError = 30201
    /// An error in the session's transport code.
    case transportError = 30202
    /// A serious internal error.
    case internalError = 30203
    /// An error that fits no other category.
    case unknownError = 30204
    /// An error outside the session's control, such as resource exhaustion. A send whose peer's
    /// send buffer is full fails with this code: retry later, or use the `async` sends, which
    /// wait for room.
    case systemError = 30205

    /// ``GKSessionErrorDomain``.
    public static var errorDomain: String { GKSessionErrorDomain }

    /// The Game Kit code.
    public var errorCode: Int { self.rawValue }

    /// The send buffer of a destination is full (``systemError``).
    public static let sendBufferFullError = GKSessionError.systemError

    /// The Game Kit constant's name and code, e.g. "GKSessionDeclinedError (30502)".
    public var description: String {
        let name: String = switch self {
        case .invalidParameterError: "GKSessionInvalidParameterError"
        case .peerNotFoundError: "GKSessionPeerNotFoundError"
        case .declinedError: "GKSessionDeclinedError"
        case .timedOutError: "GKSessionTimedOutError"
        case .cancelledError: "GKSessionCancelledError"
        case .connectionFailedError: "GKSessionConnectionFailedError"
        case .connectionClosedError: "GKSessionConnectionClosedError"
        case .dataTooBigError: "GKSessionDataTooBigError"
        case .notConnectedError: "GKSessionNotConnectedError"
        case .cannotEnableError: "GKSessionCannotEnableError"
        case .inProgressError: "GKSessionInProgressError"
        case .connectivityError: "GKSessionConnectivityError"
        case .transportError: "GKSessionTransportError"
        case .internalError: "GKSessionInternalError"
        case .unknownError: "GKSessionUnknownError"
        case .systemError: "GKSessionSystemError"
        }
        return "\(name) (\(self.rawValue))"
    }
}
