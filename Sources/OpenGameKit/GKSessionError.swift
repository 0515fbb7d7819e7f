/// The error domain of every error a ``GKSessionError`` code belongs to.
public let GKSessionErrorDomain = "com.apple.gamekit.GKSessionErrorDomain"

/// Error codes of the session error domain, with the values of Apple's Game Kit so that code
/// comparing raw codes keeps working after a port.
public enum GKSessionError: Int32, Error, Sendable, CaseIterable {
    /// A parameter had an unexpected value.
    case invalidParameterError = 30500
    /// No peer with the given peer ID is known to the session.
    case peerNotFoundError = 30501
    /// The remote peer declined the connection request.
    case declinedError = 30502
    /// The operation did not complete within its timeout.
    case timedOutError = 30503
    /// The connection request was cancelled.
    case cancelledError = 30504
    /// The connection to the peer could not be established.
    case connectionFailedError = 30505
    /// The connection to the peer closed unexpectedly.
    case connectionClosedError = 30506
    /// The data is larger than a single send may carry.
    case dataTooBigError = 30507
    /// The peer is not connected.
    case notConnectedError = 30508
    /// The session could not be made available (no usable network interface).
    case cannotEnableError = 30509
    /// The peer has already asked to connect to this session.
    case inProgressError = 30510
    /// An error in the session's connection code.
    case connectivityError = 30201
    /// An error in the session's transport code.
    case transportError = 30202
    /// A serious internal error.
    case internalError = 30203
    /// An error that fits no other category.
    case unknownError = 30204
    /// An error outside the session's control, such as resource exhaustion.
    case systemError = 30205
}
