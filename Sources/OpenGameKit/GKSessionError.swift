import Foundation

/// The error domain of every ``GKSessionError``.
public let GKSessionErrorDomain = "com.apple.gamekit.GKSessionErrorDomain"

/// An error of the session error domain, in the shape Swift gives Apple's Game Kit errors: a
/// struct whose ``code`` is a ``Code`` with Game Kit's values, bridged to `NSError` with
/// ``GKSessionErrorDomain`` as its domain.
///
/// ```swift
/// do {
///     try session.sendData(toAllPeers: data, with: .reliable)
/// } catch GKSessionError.dataTooBigError {
///     // split the data
/// } catch let error as GKSessionError where error.code == .systemError {
///     // the send buffer is full: try again later, or use the async `write`
/// }
/// ```
public struct GKSessionError: Error, CustomNSError, LocalizedError, Hashable, CustomStringConvertible, @unchecked Sendable {
    /// Game Kit's error codes, with Game Kit's values (`GKSessionInvalidParameterError` is
    /// `.invalidParameterError`, 30500, and so on).
    public enum Code: Int, Sendable, CaseIterable, CustomStringConvertible {
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
        /// An error outside the session's control, such as resource exhaustion. A send whose
        /// peer's send buffer is full fails with this code: retry later, or use the `async` sends,
        /// which wait for room.
        case systemError = 30205

        /// Lets `catch GKSessionError.dataTooBigError` match a thrown ``GKSessionError`` with
        /// this code (and an `NSError` of the session domain with this code).
        public static func ~= (code: Code, error: any Error) -> Bool {
            GameKitErrorBridging.matches(error, domain: GKSessionErrorDomain, code: code.rawValue)
        }

        /// The Game Kit constant's name and code, e.g. "GKSessionDeclinedError (30502)".
        public var description: String { "\(self.constantName) (\(self.rawValue))" }

        /// The Game Kit constant's name, e.g. "GKSessionDeclinedError".
        var constantName: String {
            switch self {
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
        }

        /// What the code means, in a sentence (the error's `localizedDescription`).
        var explanation: String {
            switch self {
            case .invalidParameterError: "A parameter had an unexpected value."
            case .peerNotFoundError: "No peer with that peer ID is known to the session."
            case .declinedError: "The peer declined the connection."
            case .timedOutError: "The operation did not complete in time."
            case .cancelledError: "The connection request was cancelled."
            case .connectionFailedError: "The connection to the peer could not be established."
            case .connectionClosedError: "The connection to the peer closed unexpectedly."
            case .dataTooBigError: "The data is too large to send in one call."
            case .notConnectedError: "The peer is not connected."
            case .cannotEnableError: "The session could not be made available on any network interface."
            case .inProgressError: "The peer has already asked to connect to this session."
            case .connectivityError: "An error occurred in the session's connection code."
            case .transportError: "An error occurred in the session's transport."
            case .internalError: "A serious error occurred inside the session."
            case .unknownError: "An unknown error occurred."
            case .systemError: "The system could not do what was asked (for example, a send buffer is full)."
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

    /// Why a handshake failed, when the session knows.
    enum FailureCause: Sendable {
        /// The two sides' session passwords differ.
        case passwordMismatch
        /// In an online room: the peer did not prove the room code's secret part (and the
        /// session password), which everyone who was given the code can.
        case roomSecretMismatch

        /// The cause in a sentence's second half.
        var explanation: String {
            switch self {
            case .passwordMismatch:
                "the two sessions' passwords differ."
            case .roomSecretMismatch:
                "its handshake did not prove this room's code. Either one of you typed the code wrong (its last six "
                    + "characters are never sent to the server) or the session passwords differ, or the rendezvous or relay "
                    + "is answering in that peer's name (someone who knows only what the server knows). Nothing was sent to it."
            }
        }
    }

    /// A failed connection attempt with `peer` (named `name` when known), in a sentence; with
    /// `cause` when the handshake said why.
    static func connectionFailure(_ code: Code, peer: UInt32, name: String?, cause: FailureCause? = nil) -> GKSessionError {
        let who = name.map { "\($0) (\(peer))" } ?? "peer \(peer)"
        if let cause { return GKSessionError(code, "No connection to \(who) could be opened: \(cause.explanation)") }
        let message: String
        switch code {
        case .declinedError: message = "\(who) declined the connection."
        case .timedOutError: message = "\(who) did not answer the connection request in time."
        case .cancelledError: message = "The connection request between this session and \(who) was cancelled."
        case .connectionFailedError: message = "No connection to \(who) could be opened: it is unreachable, or uses another session password."
        case .inProgressError: message = "\(who) has already asked to connect to this session: answer its request instead."
        case .peerNotFoundError: message = "No peer \(peer) is known to this session: it was never seen, or has left."
        case .connectionClosedError: message = "The connection to \(who) closed while it was being opened."
        default: message = "Connecting with \(who) failed: \(code.explanation)"
        }
        return GKSessionError(code, message)
    }

    /// ``GKSessionErrorDomain``.
    public static var errorDomain: String { GKSessionErrorDomain }
    /// The Game Kit code's value.
    public var errorCode: Int { self.code.rawValue }
    /// ``userInfo`` with a localized description added when it has none.
    public var errorUserInfo: [String: Any] {
        GameKitErrorBridging.userInfo(self.userInfo, explaining: self.code.explanation)
    }

    /// The Game Kit constant's name and code, e.g. "GKSessionDeclinedError (30502)".
    public var description: String { self.code.description }

    /// What failed and why: the sentence given when the error was made, or one about the code.
    public var errorDescription: String? { self.userInfo[NSLocalizedDescriptionKey] as? String ?? self.code.explanation }
    /// What the code means, when the description says more than that.
    public var failureReason: String? { self.code.explanation }

    /// Errors are equal when their codes are.
    public static func == (lhs: GKSessionError, rhs: GKSessionError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    // MARK: - The codes, as Swift's import of an error enum names them

    /// ``Code/invalidParameterError``, for `catch` patterns and comparisons.
    public static var invalidParameterError: Code { .invalidParameterError }
    /// ``Code/peerNotFoundError``, for `catch` patterns and comparisons.
    public static var peerNotFoundError: Code { .peerNotFoundError }
    /// ``Code/declinedError``, for `catch` patterns and comparisons.
    public static var declinedError: Code { .declinedError }
    /// ``Code/timedOutError``, for `catch` patterns and comparisons.
    public static var timedOutError: Code { .timedOutError }
    /// ``Code/cancelledError``, for `catch` patterns and comparisons.
    public static var cancelledError: Code { .cancelledError }
    /// ``Code/connectionFailedError``, for `catch` patterns and comparisons.
    public static var connectionFailedError: Code { .connectionFailedError }
    /// ``Code/connectionClosedError``, for `catch` patterns and comparisons.
    public static var connectionClosedError: Code { .connectionClosedError }
    /// ``Code/dataTooBigError``, for `catch` patterns and comparisons.
    public static var dataTooBigError: Code { .dataTooBigError }
    /// ``Code/notConnectedError``, for `catch` patterns and comparisons.
    public static var notConnectedError: Code { .notConnectedError }
    /// ``Code/cannotEnableError``, for `catch` patterns and comparisons.
    public static var cannotEnableError: Code { .cannotEnableError }
    /// ``Code/inProgressError``, for `catch` patterns and comparisons.
    public static var inProgressError: Code { .inProgressError }
    /// ``Code/connectivityError``, for `catch` patterns and comparisons.
    public static var connectivityError: Code { .connectivityError }
    /// ``Code/transportError``, for `catch` patterns and comparisons.
    public static var transportError: Code { .transportError }
    /// ``Code/internalError``, for `catch` patterns and comparisons.
    public static var internalError: Code { .internalError }
    /// ``Code/unknownError``, for `catch` patterns and comparisons.
    public static var unknownError: Code { .unknownError }
    /// ``Code/systemError``, for `catch` patterns and comparisons.
    public static var systemError: Code { .systemError }

    /// The code a send fails with when a destination's send buffer is full: ``Code/systemError``
    /// (a Swift-only name).
    public static var sendBufferFullError: Code { .systemError }
}
