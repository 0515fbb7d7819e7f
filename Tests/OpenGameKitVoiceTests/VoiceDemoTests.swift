import Foundation
import NetworkImpairment
import Testing

/// gk-voice, the demo, through scripts/voice's scripted call (line mode): the picker, "Connected
/// to …", live meters, m (mute), - (volume), q (hang up).
@Suite("gk-voice demo")
struct VoiceDemoTests {
    @Test("A scripted call: connected, meters move, mute and volume show, hang-up returns to the picker")
    func scriptedCall() async throws {
        let result = try await SandboxScript.run("OGK_VOICE_BIN=\(SandboxScript.binaries.path) scripts/voice < /dev/null", timeout: 120)
        let alice = result.lines.drop { $0 != "--- Alice (input: 1, then m, then q)" }.prefix { !$0.hasPrefix("--- Bob") }
        let bob = result.lines.drop { !$0.hasPrefix("--- Bob") }
        #expect(alice.contains { $0.hasPrefix("voice: Connected to Bob · path direct") }, "\(result.lines)")
        #expect(bob.contains { $0.hasPrefix("voice: Connected to Alice · path direct") })
        // Alice speaks: Bob's meter for her reads speech levels, and near silence once she mutes.
        let aliceLevels = bob.compactMap { line -> Double? in
            guard line.hasPrefix("voice: Connected"), let range = line.range(of: "· Alice ") else { return nil }
            return Double(line[range.upperBound...].prefix { $0 != "d" }.trimmingCharacters(in: .whitespaces))
        }
        #expect(aliceLevels.contains { $0 > -40 })
        #expect(aliceLevels.last.map { $0 < -55 } == true, "\(aliceLevels)")
        #expect(alice.contains { $0.contains("you muted") })
        #expect(bob.contains { $0.contains("volume 90%") })
        #expect(bob.contains { $0.contains("Voice chat ended: The voice chat with ") && $0.contains(" ended: The other participant ended the chat. (32003)") }, "\(bob)")
        #expect(bob.contains("picker: list: 1) Alice"))
    }
}
