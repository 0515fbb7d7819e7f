/// The error domain of every error a ``GKVoiceChatServiceError`` code belongs to.
public let GKVoiceChatServiceErrorDomain = "com.apple.gamekit.GKVoiceChatServiceErrorDomain"

import Foundation

/// Error codes of the voice chat error domain, with the values of Apple's Game Kit. As an
/// `NSError` its domain is ``GKVoiceChatServiceErrorDomain`` and its code the raw value.
public enum GKVoiceChatServiceError: Int, Error, Sendable, CaseIterable, CustomNSError, CustomStringConvertible {
    /// A serious internal error.
    case internalError = 32000
    /// Media from the remote participant stopped arriving.
    case noRemotePacketsError = 32001
    /// No path to the remote participant could be established.
    case unableToConnectError = 32002
    /// The remote participant hung up.
    case remoteParticipantHangupError = 32003
    /// The call ID is not valid.
    case invalidCallIDError = 32004
    /// No audio device is available.
    case audioUnavailableError = 32005
    /// No client was set on the service.
    case uninitializedClientError = 32006
    /// The client does not implement a required method.
    case clientMissingRequiredMethodsError = 32007
    /// The remote participant is in another call.
    case remoteParticipantBusyError = 32008
    /// The remote participant cancelled the invitation.
    case remoteParticipantCancelledError = 32009
    /// The remote participant sent an invalid response.
    case remoteParticipantResponseInvalidError = 32010
    /// The remote participant declined the invitation.
    case remoteParticipantDeclinedInviteError = 32011
    /// The method cannot be called in the current state.
    case methodCurrentlyInvalidError = 32012
    /// The network configuration prevents the call.
    case networkConfigurationError = 32013
    /// The remote participant speaks an unsupported protocol version.
    case unsupportedRemoteVersionError = 32014
    /// Out of memory.
    case outOfMemoryError = 32015
    /// A parameter had an unexpected value.
    case invalidParameterError = 32016

    /// The error domain.
    public static var errorDomain: String { GKVoiceChatServiceErrorDomain }

    /// The Game Kit code.
    public var errorCode: Int { self.rawValue }

    /// The Game Kit constant's name and code, e.g. "GKVoiceChatServiceRemoteParticipantBusyError
    /// (32008)".
    public var description: String {
        let name: String = switch self {
        case .internalError: "InternalError"
        case .noRemotePacketsError: "NoRemotePacketsError"
        case .unableToConnectError: "UnableToConnectError"
        case .remoteParticipantHangupError: "RemoteParticipantHangupError"
        case .invalidCallIDError: "InvalidCallIDError"
        case .audioUnavailableError: "AudioUnavailableError"
        case .uninitializedClientError: "UninitializedClientError"
        case .clientMissingRequiredMethodsError: "ClientMissingRequiredMethodsError"
        case .remoteParticipantBusyError: "RemoteParticipantBusyError"
        case .remoteParticipantCancelledError: "RemoteParticipantCancelledError"
        case .remoteParticipantResponseInvalidError: "RemoteParticipantResponseInvalidError"
        case .remoteParticipantDeclinedInviteError: "RemoteParticipantDeclinedInviteError"
        case .methodCurrentlyInvalidError: "MethodCurrentlyInvalidError"
        case .networkConfigurationError: "NetworkConfigurationError"
        case .unsupportedRemoteVersionError: "UnsupportedRemoteVersionError"
        case .outOfMemoryError: "OutOfMemoryError"
        case .invalidParameterError: "InvalidParameterError"
        }
        return "GKVoiceChatService\(name) (\(self.rawValue))"
    }
}
