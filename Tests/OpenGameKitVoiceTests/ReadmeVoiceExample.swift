// This file's code between the markers is the README's voice chat example, byte for byte
// (ReadmeVoiceExampleTests checks that, and the build compiles it).
// BEGIN README EXAMPLE
import Foundation
import OpenGameKit
import OpenGameKitVoice

final class VoiceClient: GKVoiceChatClient {
    let session: GKSession
    init(session: GKSession) {
        self.session = session
        session.setDataReceiveHandler { data, peerID, _ in
            GKVoiceChatService.default().receivedData(data, fromParticipantID: peerID)
        }
    }
    func participantID() -> String { session.peerID }
    func voiceChatService(_ service: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        try? session.send(data, toPeers: [participantID], with: .reliable)
    }
    func voiceChatService(_ service: GKVoiceChatService, didStartWithParticipantID participantID: String) {
        print("Connected to \(session.displayName(forPeer: participantID) ?? participantID)")
    }
    func voiceChatService(_ service: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?) {
        print("Ended: \(error.map { "\($0)" } ?? "hung up")")
    }
}

/// Calls a connected peer. Keep `client` alive yourself: the service holds it weakly.
func call(_ peerID: String, through client: VoiceClient) throws {
    let voice: GKVoiceChatService = GKVoiceChatService.default()
    voice.configuration.stunServers = [.init(host: "192.0.2.10")]
    voice.configuration.turnServers = [.init(host: "192.0.2.10", username: "me", password: "secret")]
    voice.client = client
    try voice.startVoiceChat(withParticipantID: peerID)
    voice.isMicrophoneMuted = true         // and remoteParticipantVolume, input/outputMeterLevel
}
// END README EXAMPLE
