// The README's voice chat example in a program of its own, one side of a call
// (ReadmeVoiceProgramTests runs two: one calls, one answers, through a private PulseAudio).
// Usage: gk-readme-voice SESSION-ID NAME call|answer
// BEGIN README EXAMPLE
import Foundation
import OpenGameKit
import OpenGameKitVoice

/// Voice for a session's peers, the same on both sides: make it before a call can arrive (an
/// invitation waits, for ten seconds at most, until a client is set), keep it alive (the
/// service holds its client weakly), and either side may call a connected peer.
final class VoiceClient: GKVoiceChatClient {
    let session: GKSession
    let voice: GKVoiceChatService = GKVoiceChatService.default()

    init(session: GKSession) {
        self.session = session
        session.setDataReceiveHandler { data, peerID, _ in
            GKVoiceChatService.default().receivedData(data, fromParticipantID: peerID)
        }
        voice.client = self
    }

    func call(_ peerID: String) throws {
        try voice.startVoiceChat(withParticipantID: peerID)
    }

    func participantID() -> String { session.peerID }

    func voiceChatService(_ service: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        try? session.send(data, toPeers: [participantID], with: .reliable)
    }

    // Invitations are accepted unless you implement
    // voiceChatService(_:didReceiveInvitationFromParticipantID:callID:) to ask the user.

    func voiceChatService(_ service: GKVoiceChatService, didStartWithParticipantID participantID: String) {
        print("Talking with \(session.displayName(forPeer: participantID) ?? participantID)")
    }

    func voiceChatService(_ service: GKVoiceChatService, didNotStartWithParticipantID participantID: String, error: Error?) {
        print("No call: \(error?.localizedDescription ?? "cancelled")")
    }

    func voiceChatService(_ service: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?) {
        print("Call ended: \(error?.localizedDescription ?? "hung up here")")
    }
}
// END README EXAMPLE

/// Connects to the first peer seen (the caller) or accepts (the other), and the caller calls
/// once connected.
final class Peer: GKSessionDelegate, @unchecked Sendable {
    let calls: Bool
    var voice: VoiceClient?

    init(calls: Bool) { self.calls = calls }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        switch state {
        case .stateAvailable where self.calls:
            session.connect(toPeer: peerID, withTimeout: 10)
        case .stateConnected where self.calls:
            do { try self.voice?.call(peerID) } catch { print("startVoiceChat failed: \(error.localizedDescription)") }
        default:
            break
        }
    }

    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        try? session.acceptConnection(fromPeer: peerID)
    }
}

let arguments = CommandLine.arguments
let peer = Peer(calls: arguments[3] == "call")
let session: GKSession = GKSession(sessionID: arguments[1], displayName: arguments[2], sessionMode: .peer)
session.delegate = peer
peer.voice = VoiceClient(session: session)
session.isAvailable = true
dispatchMain()
