import Foundation

/// What a ``GKVoiceChatService`` needs from the application: who the local user is, and a way
/// to reach other participants (typically a `GKSession`). Only ``participantID()`` and
/// ``voiceChatService(_:send:toParticipantID:)`` must be implemented; the rest have defaults.
///
/// The service calls these methods on its ``GKVoiceChatService/delegateQueue`` (the main queue
/// unless changed), one at a time, in order; except ``participantID()``, which it asks on the
/// thread that calls ``GKVoiceChatService/receivedData(_:fromParticipantID:)``.
public protocol GKVoiceChatClient: AnyObject {
    /// The local user's participant ID, as other participants know it (e.g. a session's peer ID).
    func participantID() -> String

    /// Sends `data` (signalling, at most 512 bytes) to `participantID`, reliably. The other side's
    /// client hands it to its service's ``GKVoiceChatService/receivedData(_:fromParticipantID:)``.
    func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String)

    /// Sends media `data` to `participantID` quickly (unreliably is fine). The service uses this
    /// only when no UDP path of its own works. The default implementation tells the service the
    /// client has no such channel.
    func voiceChatService(_ voiceChatService: GKVoiceChatService, sendRealTime data: Data, toParticipantID participantID: String)

    /// `participantID` invites the local user; call ``GKVoiceChatService/acceptCallID(_:)`` or
    /// ``GKVoiceChatService/denyCallID(_:)``. The default implementation accepts.
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didReceiveInvitationFromParticipantID participantID: String, callID: Int)

    /// A chat with `participantID` started: both sides' audio devices are open and audio flows
    /// (both sides hear this within a signalling message's trip of each other).
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStartWithParticipantID participantID: String)

    /// A chat with `participantID` could not be set up; `error` is a ``GKVoiceChatServiceError``
    /// saying why.
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didNotStartWithParticipantID participantID: String, error: Error?)

    /// A chat with `participantID` ended; `error` is nil when the local side stopped it.
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?)
}

extension GKVoiceChatClient {
    /// Tells the service this client has no real-time channel.
    public func voiceChatService(_ voiceChatService: GKVoiceChatService, sendRealTime data: Data, toParticipantID participantID: String) {
        voiceChatService.clientHasNoRealTimeChannel()
    }

    /// Accepts every invitation.
    public func voiceChatService(_ voiceChatService: GKVoiceChatService, didReceiveInvitationFromParticipantID participantID: String, callID: Int) {
        try? voiceChatService.acceptCallID(callID)
    }

    /// Does nothing.
    public func voiceChatService(_ voiceChatService: GKVoiceChatService, didStartWithParticipantID participantID: String) {}

    /// Does nothing.
    public func voiceChatService(_ voiceChatService: GKVoiceChatService, didNotStartWithParticipantID participantID: String, error: Error?) {}

    /// Does nothing.
    public func voiceChatService(_ voiceChatService: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?) {}
}
