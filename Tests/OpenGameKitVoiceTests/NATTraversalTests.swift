import Foundation
import GameKitVoiceEngine
import NetworkImpairment
import Testing
import VoiceTestSupport

/// Two gk-voice processes on two private networks behind NAT routers (scripts/nat-topology),
/// with coturn as STUN and TURN server and a rendezvous server (the application's channel) on
/// the public network between them. Speech from a WAV file must arrive intelligible each time.
@Suite("Voice chat across NATs (coturn)", .serialized)
struct NATTraversalTests {
    struct Outcome {
        var alice: [[String: Any]]
        var bob: [[String: Any]]
        var stoi: Double
        /// Bytes of bob's recording, for failure messages.
        var recordingBytes: Int

        func started(_ side: [[String: Any]]) -> String? {
            side.first { $0["event"] as? String == "started" }?["path"] as? String
        }
    }

    /// Runs one call from alice (host A) to bob (host B) in a fresh topology.
    static func call(topology: String) async throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-nat-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await SandboxScript.run(
            "scripts/nat-call \(topology) --seconds 10 \(directory) \(VoiceTestSupport.speechPath) && cat \(directory)/alice.jsonl | sed 's/^/A /' && cat \(directory)/bob.jsonl | sed 's/^/B /'",
            timeout: 90)
        let received = (try? WAVFile.read(path: "\(directory)/bob.wav")) ?? []
        let quality = try VoiceTestSupport.quality(reference: try VoiceTestSupport.speech(), degraded: received)
        let size = (try? FileManager.default.attributesOfItem(atPath: "\(directory)/bob.wav")[.size] as? Int) ?? -1
        return Outcome(alice: result.objects(tagged: "A"), bob: result.objects(tagged: "B"), stoi: quality.stoi, recordingBytes: size)
    }

    /// One call in `topology`: both sides start on `path`, and bob hears alice.
    static func expectCall(topology: String, path: String) async throws {
        let outcome = try await Self.call(topology: topology)
        #expect(outcome.started(outcome.alice) == path && outcome.started(outcome.bob) == path, "\(outcome.alice) \(outcome.bob)")
        #expect(outcome.stoi > 0.6, "bob.wav \(outcome.recordingBytes) bytes; \(outcome.alice) \(outcome.bob)")
    }

    @Test("Behind endpoint-independent NATs the call goes direct, via server-reflexive candidates")
    func direct() async throws { try await Self.expectCall(topology: "", path: "direct") }

    @Test("Behind symmetric NATs (--random-fully) the call goes through the TURN relay")
    func relayed() async throws { try await Self.expectCall(topology: "--random-fully", path: "relayed") }

    @Test("With IPv6 (and IPv4 UDP dropped between the sides) the call goes direct over IPv6, with an IPv6 STUN server")
    func ipv6() async throws { try await Self.expectCall(topology: "--ipv6", path: "direct") }

    @Test("With TURN reached over IPv6 and no UDP between the sides, the call goes through the relay")
    func ipv6Relay() async throws { try await Self.expectCall(topology: "--ipv6-relay", path: "relayed") }

    @Test("With UDP blocked between the sides, media falls back to the client's channel")
    func fallback() async throws { try await Self.expectCall(topology: "--block-udp", path: "client") }
}
