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
    func speechEndToEnd() throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["alice_mic", "alice_speaker", "bob_mic", "bob_speaker"])
        defer { server.stop() }
        let (alice, bob, aliceClient, bobClient) = ServiceTests.pair()
        alice.configuration.audio = .pulseAudio(source: "alice_mic.monitor", sink: "alice_speaker", server: server.address)
        bob.configuration.audio = .pulseAudio(source: "bob_mic.monitor", sink: "bob_speaker", server: server.address)
        try alice.startVoiceChat(withParticipantID: "bob")
        #expect(aliceClient.wait(for: "didStart") == "didStart bob")
        #expect(bobClient.wait(for: "didStart") == "didStart alice")

        let recording = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-call-\(getpid()).raw").path
        defer { try? FileManager.default.removeItem(atPath: recording) }
        let recorder = try server.launch("parecord", [
            "--device=bob_speaker.monitor", "--rate=16000", "--channels=1", "--format=s16le", "--latency-msec=20", "--raw", recording,
        ])
        let player = try server.launch("paplay", ["--device=alice_mic", "--latency-msec=20", VoiceTestSupport.speechPath])
        #expect(player.wait(seconds: 60))
        Thread.sleep(forTimeInterval: 1)
        recorder.signal(SIGINT)
        recorder.wait(seconds: 5)
        alice.stopVoiceChat(withParticipantID: "bob")
        #expect(bobClient.wait(for: "didStop") == "didStop alice 32003")

        let bytes = try #require(FileManager.default.contents(atPath: recording))
        let received = bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        let quality = try VoiceTestSupport.quality(reference: try VoiceTestSupport.speech(), degraded: received)
        #expect(quality.stoi > 0.6)
    }
}
