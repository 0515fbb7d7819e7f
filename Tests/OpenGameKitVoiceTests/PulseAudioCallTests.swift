import Foundation
import GameKitVoiceEngine
import Testing
import VoiceTestSupport

@testable import OpenGameKitVoice

/// A whole chat through real (headless) PulseAudio: speech played into alice's virtual
/// microphone arrives at bob's speaker sink (run inside scripts/sandbox).
@Suite("Voice chat through PulseAudio")
struct PulseAudioCallTests {
    @Test("Speech into A's microphone sink comes out of B's speaker sink, intelligible")
    func speechEndToEnd() async throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["alice_mic", "alice_speaker", "bob_mic", "bob_speaker"])
        defer { server.stop() }
        let (alice, bob, aliceClient, bobClient) = ServiceTests.pair()
        alice.configuration.audio = .pulseAudio(source: "alice_mic.monitor", sink: "alice_speaker", server: server.address)
        bob.configuration.audio = .pulseAudio(source: "bob_mic.monitor", sink: "bob_speaker", server: server.address)
        try alice.startVoiceChat(withParticipantID: "bob")
        #expect(await aliceClient.wait(for: "didStart") == "didStart bob", "alice heard \(aliceClient.events)")
        #expect(await bobClient.wait(for: "didStart") == "didStart alice", "bob heard \(bobClient.events)")

        let received = try VoiceTestSupport.playSpeechAndRecord(server: server, into: "alice_mic", recording: "bob_speaker.monitor")
        alice.stopVoiceChat(withParticipantID: "bob")
        #expect(await bobClient.wait(for: "didStop") == "didStop alice 32003")

        let quality = try VoiceTestSupport.quality(reference: try VoiceTestSupport.speech(), degraded: received)
        #expect(quality.stoi > 0.6)
    }
}
