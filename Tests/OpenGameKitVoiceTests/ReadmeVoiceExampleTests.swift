import Foundation
import GameKitVoiceEngine
import NetworkImpairment
import OpenGameKit
import Testing

/// The README's voice examples: the voice chat example (ReadmeVoiceExample.swift, compiled with
/// the tests; ReadmeSnippetsTests checks the README shows it as compiled) and the voice engine
/// example, run as a program.
@Suite("README voice chat example")
struct ReadmeVoiceExampleTests {
    /// The voice engine example (Tests/ReadmeExamples/VoiceEngine) as a program, against a
    /// private PulseAudio server whose one null sink is the default sink and its monitor the
    /// default source: it starts the loop and prints the two levels.
    @Test func theVoiceEngineExampleRunsAgainstPulseAudio() async throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["speaker"])
        defer { server.stop() }
        let result = try await SandboxScript.run("""
            export PULSE_SERVER=\(server.address)
            timeout 60 gk-readme-voice-engine; echo "status $?"
            """, timeout: 90)
        #expect(result.lines.last == "status 0", "\(result.lines)")
        let levels = result.lines.first?.split(separator: " ").compactMap { Double($0) } ?? []
        #expect(levels.count == 2 && levels.allSatisfy { $0 <= 0 }, "\(result.lines)")
    }

    /// The example's client as a service sees it: its participant ID is the session's peer ID
    /// (no socket is opened: the session is never made available).
    @Test func theExampleClientNamesItsSessionsPeer() {
        let session: GKSession = GKSession(sessionID: "readme-voice", displayName: "Alice", sessionMode: .peer)
        let client = VoiceClient(session: session)
        #expect(client.participantID() == session.peerID)
    }
}
