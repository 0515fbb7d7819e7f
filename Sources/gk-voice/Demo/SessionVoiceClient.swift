import Foundation
import OpenGameKit
import OpenGameKitVoice

/// The voice chat client of the demo: a `GKSession` carries the service's signalling (reliable)
/// and, when the service asks for it, real-time data (unreliable). One leading byte tells the two
/// apart from each other (and from anything else the application might send).
final class SessionVoiceClient: GKVoiceChatClient, @unchecked Sendable {
    static let signalling: UInt8 = 0x56  // "V"
    static let realTime: UInt8 = 0x52  // "R"

    let session: GKSession
    weak var service: GKVoiceChatService?
    /// Chat events for the screen.
    var onEvent: (@MainActor (String) -> Void)?

    init(session: GKSession, service: GKVoiceChatService) {
        self.session = session
        self.service = service
        session.setDataReceiveHandler { [weak self] data, peerID, _ in self?.received(data, from: peerID) }
    }

    private func received(_ data: Data, from peerID: String) {
        guard let kind = data.first, let service = self.service else { return }
        switch kind {
        case Self.signalling: service.receivedData(data.dropFirst(), fromParticipantID: peerID)
        case Self.realTime: service.receivedRealTime(data.dropFirst(), fromParticipantID: peerID)
        default: break
        }
    }

    private func report(_ text: String) {
        let onEvent = self.onEvent
        DispatchQueue.main.async { MainActor.assumeIsolated { onEvent?(text) } }
    }

    func participantID() -> String { self.session.peerID }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        try? self.session.send(Data([Self.signalling]) + data, toPeers: [participantID], with: .reliable)
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, sendRealTime data: Data, toParticipantID participantID: String) {
        try? self.session.send(Data([Self.realTime]) + data, toPeers: [participantID], with: .unreliable)
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStartWithParticipantID participantID: String) {
        self.report("started")
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didNotStartWithParticipantID participantID: String, error: Error?) {
        self.report("Voice chat did not start: \(Self.describe(error))")
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?) {
        self.report(error.map { "Voice chat ended: \(Self.describe($0))" } ?? "Hung up")
    }

    /// What failed and why, in words, with Game Kit's code: "… declined the invitation. (32011)".
    static func describe(_ error: (any Error)?) -> String {
        guard let error else { return "no reason given" }
        guard let voice = error as? GKVoiceChatServiceError else { return error.localizedDescription }
        return "\(voice.localizedDescription) (\(voice.code.rawValue))"
    }
}
