// The README's async voice chat example, a whole program (ReadmeVoiceExampleTests runs two:
// one calls, one answers, through a private PulseAudio).
// BEGIN README EXAMPLE
import Foundation
import OpenGameKit
import OpenGameKitVoice

/// Carries the voice service's signalling over the session. Invitations are answered from
/// `voice.events` below, so the client's invitation method does nothing (its default accepts).
final class SessionVoiceClient: GKVoiceChatClient {
    let session: GKSession
    init(session: GKSession) { self.session = session }

    func participantID() -> String { session.peerID }

    func voiceChatService(_ service: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        try? session.send(data, toPeers: [participantID], with: .reliable)
    }

    func voiceChatService(_ service: GKVoiceChatService, didReceiveInvitationFromParticipantID participantID: String, callID: Int) {}
}

// walkie SESSION-ID NAME call|answer: the caller calls the first player it finds.
let arguments = CommandLine.arguments
let session: GKSession = GKSession(sessionID: arguments[1], displayName: arguments[2], sessionMode: .peer)
let voice = GKVoiceChatService.default()!
let client = SessionVoiceClient(session: session)
voice.client = client
session.setDataReceiveHandler { data, peerID, _ in voice.receivedData(data, fromParticipantID: peerID) }
// Sequences made before the session is visible miss nothing.
let changes = session.peerChanges, requests = session.connectionRequests, events = voice.events
session.isAvailable = true

if arguments[3] == "call" {
    for await change in changes where change.state == .stateAvailable {
        try await session.connect(to: change.peerID, timeout: 10)
        try await voice.startVoiceChat(with: change.peerID)    // returns once audio flows
        print("Talking with \(change.displayName ?? change.peerID)")
        break
    }
} else {
    Task { for await request in requests { try? session.acceptConnection(fromPeer: request.peerID) } }
}
// Answer invitations, and talk until the chat ends.
chat: for await event in events {
    switch event {
    case .invitation(let peerID, let callID):
        try await voice.accept(callID: callID)
        print("Talking with \(session.displayName(forPeer: peerID) ?? peerID)")
    case .stopped(_, let error):
        print("Call ended: \(error?.localizedDescription ?? "hung up here")")
        break chat
    default:
        continue
    }
}
// END README EXAMPLE
