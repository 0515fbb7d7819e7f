import Foundation
import OpenGameKit

/// The error domain of every ``GKVoiceChatServiceError``.
public let GKVoiceChatServiceErrorDomain = "com.apple.gamekit.GKVoiceChatServiceErrorDomain"

/// An error of the voice chat domain, in the shape Swift gives Apple's Game Kit errors: a struct
/// whose ``code`` is a ``Code`` with Game Kit's values, bridged to `NSError` with
/// ``GKVoiceChatServiceErrorDomain`` as its domain. `catch GKVoiceChatServiceError.uninitializedClientError`
/// matches a thrown error by its code.
public struct GKVoiceChatServiceError: Error, CustomNSError, LocalizedError, Hashable, CustomStringConvertible, @unchecked Sendable {
    /// Game Kit's voice chat error codes, with Game Kit's values.
    public enum Code: Int, Sendable, CaseIterable, CustomStringConvertible {
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

        /// Lets `catch GKVoiceChatServiceError.remoteParticipantBusyError` match a thrown
        /// ``GKVoiceChatServiceError`` with this code (and an `NSError` of the domain with it).
        public static func ~= (code: Code, error: any Error) -> Bool {
            GameKitErrorBridging.matches(error, domain: GKVoiceChatServiceErrorDomain, code: code.rawValue)
        }

        /// The Game Kit constant's name and code, e.g. "GKVoiceChatServiceRemoteParticipantBusyError
        /// (32008)".
        public var description: String { "GKVoiceChatService\(self.name) (\(self.rawValue))" }

        private var name: String {
            switch self {
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
        }

        /// What the code means, in a sentence (the error's `localizedDescription`).
        var explanation: String {
            switch self {
            case .internalError: "A serious error occurred inside the voice chat service."
            case .noRemotePacketsError: "Voice from the other participant stopped arriving."
            case .unableToConnectError: "No connection to the other participant could be made."
            case .remoteParticipantHangupError: "The other participant ended the chat."
            case .invalidCallIDError: "No invitation has that call ID."
            case .audioUnavailableError: "The audio devices could not be used."
            case .uninitializedClientError: "The voice chat service has no client."
            case .clientMissingRequiredMethodsError: "The client lacks a method the service needs."
            case .remoteParticipantBusyError: "The other participant is in another chat."
            case .remoteParticipantCancelledError: "The other participant withdrew the invitation."
            case .remoteParticipantResponseInvalidError: "The other participant sent something the service could not read."
            case .remoteParticipantDeclinedInviteError: "The other participant declined the invitation."
            case .methodCurrentlyInvalidError: "That cannot be done now (another chat is being set up or running)."
            case .networkConfigurationError: "The network could not be used for voice."
            case .unsupportedRemoteVersionError: "The other participant runs an incompatible voice chat version."
            case .outOfMemoryError: "There was not enough memory."
            case .invalidParameterError: "A parameter had an unexpected value."
            }
        }
    }

    /// The Game Kit code.
    public let code: Code
    /// Extra information; `NSLocalizedDescriptionKey` defaults to a sentence about the code.
    public let userInfo: [String: Any]

    /// An error with a code and, optionally, extra information.
    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        self.userInfo = userInfo
    }

    /// An error with a code and a sentence saying what failed and why (its
    /// `localizedDescription`), keeping the error that caused it (`NSUnderlyingErrorKey`).
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.init(code, userInfo: GameKitErrorBridging.userInfo(message: message, underlying: underlying))
    }

    /// The error that caused this one, if any (`NSUnderlyingErrorKey`).
    public var underlyingError: (any Error)? { self.userInfo[NSUnderlyingErrorKey] as? any Error }

    /// What failed and why: the sentence given when the error was made, or one about the code.
    public var errorDescription: String? { self.userInfo[NSLocalizedDescriptionKey] as? String ?? self.code.explanation }
    /// What the code means, when the description says more than that.
    public var failureReason: String? { self.code.explanation }

    /// ``GKVoiceChatServiceErrorDomain``.
    public static var errorDomain: String { GKVoiceChatServiceErrorDomain }
    /// The Game Kit code's value.
    public var errorCode: Int { self.code.rawValue }
    /// ``userInfo`` with a localized description added when it has none.
    public var errorUserInfo: [String: Any] {
        GameKitErrorBridging.userInfo(self.userInfo, explaining: self.code.explanation)
    }

    /// The Game Kit constant's name and code.
    public var description: String { self.code.description }

    /// Errors are equal when their codes are.
    public static func == (lhs: GKVoiceChatServiceError, rhs: GKVoiceChatServiceError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    // MARK: - The codes, as Swift's import of an error enum names them

    /// ``Code/internalError``, for `catch` patterns and comparisons.
    public static var internalError: Code { .internalError }
    /// ``Code/noRemotePacketsError``, for `catch` patterns and comparisons.
    public static var noRemotePacketsError: Code { .noRemotePacketsError }
    /// ``Code/unableToConnectError``, for `catch` patterns and comparisons.
    public static var unableToConnectError: Code { .unableToConnectError }
    /// ``Code/remoteParticipantHangupError``, for `catch` patterns and comparisons.
    public static var remoteParticipantHangupError: Code { .remoteParticipantHangupError }
    /// ``Code/invalidCallIDError``, for `catch` patterns and comparisons.
    public static var invalidCallIDError: Code { .invalidCallIDError }
    /// ``Code/audioUnavailableError``, for `catch` patterns and comparisons.
    public static var audioUnavailableError: Code { .audioUnavailableError }
    /// ``Code/uninitializedClientError``, for `catch` patterns and comparisons.
    public static var uninitializedClientError: Code { .uninitializedClientError }
    /// ``Code/clientMissingRequiredMethodsError``, for `catch` patterns and comparisons.
    public static var clientMissingRequiredMethodsError: Code { .clientMissingRequiredMethodsError }
    /// ``Code/remoteParticipantBusyError``, for `catch` patterns and comparisons.
    public static var remoteParticipantBusyError: Code { .remoteParticipantBusyError }
    /// ``Code/remoteParticipantCancelledError``, for `catch` patterns and comparisons.
    public static var remoteParticipantCancelledError: Code { .remoteParticipantCancelledError }
    /// ``Code/remoteParticipantResponseInvalidError``, for `catch` patterns and comparisons.
    public static var remoteParticipantResponseInvalidError: Code { .remoteParticipantResponseInvalidError }
    /// ``Code/remoteParticipantDeclinedInviteError``, for `catch` patterns and comparisons.
    public static var remoteParticipantDeclinedInviteError: Code { .remoteParticipantDeclinedInviteError }
    /// ``Code/methodCurrentlyInvalidError``, for `catch` patterns and comparisons.
    public static var methodCurrentlyInvalidError: Code { .methodCurrentlyInvalidError }
    /// ``Code/networkConfigurationError``, for `catch` patterns and comparisons.
    public static var networkConfigurationError: Code { .networkConfigurationError }
    /// ``Code/unsupportedRemoteVersionError``, for `catch` patterns and comparisons.
    public static var unsupportedRemoteVersionError: Code { .unsupportedRemoteVersionError }
    /// ``Code/outOfMemoryError``, for `catch` patterns and comparisons.
    public static var outOfMemoryError: Code { .outOfMemoryError }
    /// ``Code/invalidParameterError``, for `catch` patterns and comparisons.
    public static var invalidParameterError: Code { .invalidParameterError }
}
