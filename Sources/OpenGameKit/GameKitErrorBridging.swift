import Foundation

/// What Game Kit's two error structs (``GKSessionError`` here, `GKVoiceChatServiceError` in
/// OpenGameKitVoice) share: matching a thrown error against a code, and a user-info dictionary
/// that explains the code when the thrower said nothing more.
package enum GameKitErrorBridging {
    /// Whether `error`, bridged to `NSError`, is of `domain` with `code` (a Game Kit error struct
    /// bridges to exactly that).
    package static func matches(_ error: any Error, domain: String, code: Int) -> Bool {
        let bridged = error as NSError
        return bridged.domain == domain && bridged.code == code
    }

    /// A user info with `message` as the localized description and `underlying`, if any, as the
    /// underlying error.
    package static func userInfo(message: String, underlying: (any Error)?) -> [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: message]
        if let underlying { info[NSUnderlyingErrorKey] = underlying }
        return info
    }

    /// `userInfo` with `explanation` as its localized description unless it has one.
    package static func userInfo(_ userInfo: [String: Any], explaining explanation: String) -> [String: Any] {
        var info = userInfo
        if info[NSLocalizedDescriptionKey] == nil { info[NSLocalizedDescriptionKey] = explanation }
        return info
    }
}
