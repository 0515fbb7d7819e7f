import Foundation

extension TransportError: LocalizedError {
    /// What failed, in a sentence (the error's `localizedDescription`).
    public var errorDescription: String? {
        switch self {
        case .bufferFull: "The link's send buffer is full; wait for room (the async write does)."
        case .dataTooBig(let size, let limit): "A message of \(size) bytes is larger than the limit of \(limit) bytes."
        case .linkNotOpen: "The link is not open (it closed, or never opened)."
        case .authenticationFailed: "The handshake failed authentication: the two sides' passwords (pre-shared keys) differ."
        case .denied(let code): "The other side denied the connection (code \(code))."
        case .timedOut: "The other side did not answer in time."
        case .cancelled: "The operation was cancelled."
        case .unsupportedVersion(let remote): "The other side speaks transport protocol version \(remote), which this one does not."
        case .unknownConnectionRequest: "No connection request with that ID is waiting for an answer."
        case .payloadTooLarge(let size, let limit): "A handshake payload of \(size) bytes is larger than the limit of \(limit) bytes."
        case .endpointClosed: "The endpoint is closed."
        case .invalidConfiguration(let message): "The transport configuration is invalid: \(message)."
        }
    }
}
