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

        func started(_ side: [[String: Any]]) -> String? {
            side.first { $0["event"] as? String == "started" }?["path"] as? String
        }
    }

    /// Runs one call from alice (host A) to bob (host B) in a fresh topology.
    static func call(topology: String, turn: Bool = true) async throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-nat-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try WAVFile.write([Int16](repeating: 0, count: 16_000), path: "\(directory)/silence.wav")
        let speech = VoiceTestSupport.speechPath
        let servers = "--stun 10.201.0.1" + (turn ? " --turn ogk:secret@10.201.0.1" : "")
        let result = try await SandboxScript.run(
            """
            scripts/nat-topology \(topology) bash -c '
              turnserver -n --listening-ip=10.201.0.1 --relay-ip=10.201.0.1 --listening-port=3478 \\
                --lt-cred-mech --user=ogk:secret --realm=ogk.test --allow-loopback-peers \\
                --no-tls --no-dtls --no-cli --min-port=49160 --max-port=49360 \\
                --db=\(directory)/turndb --pidfile=\(directory)/turn.pid --log-file=\(directory)/turn.log --no-stdout-log &
              turn=$!
              "$PEER_PYTHON" Tests/Peers/rendezvous.py --host 10.201.0.1 --port 7000 --seconds 20 >/dev/null &
              sleep 0.7
              nsenter --net=$OGK_NS_HOST_B gk-voice call --name bob --rendezvous 10.201.0.1:7000 \\
                --input \(directory)/silence.wav --output \(directory)/bob.wav \(servers) --seconds 11 | sed -u "s/^/B /" &
              sleep 0.3
              nsenter --net=$OGK_NS_HOST_A gk-voice call --name alice --call bob --rendezvous 10.201.0.1:7000 \\
                --input \(speech) --output \(directory)/alice.wav \(servers) --seconds 10 | sed -u "s/^/A /"
              sleep 1.2
              kill $turn'
            """, timeout: 90)
        let received = (try? WAVFile.read(path: "\(directory)/bob.wav")) ?? []
        let quality = try VoiceTestSupport.quality(reference: try VoiceTestSupport.speech(), degraded: received)
        return Outcome(alice: result.objects(tagged: "A"), bob: result.objects(tagged: "B"), stoi: quality.stoi)
    }

    @Test("Behind endpoint-independent NATs the call goes direct, via server-reflexive candidates")
    func direct() async throws {
        let outcome = try await Self.call(topology: "")
        #expect(outcome.started(outcome.alice) == "direct" && outcome.started(outcome.bob) == "direct", "\(outcome.alice) \(outcome.bob)")
        #expect(outcome.stoi > 0.6)
    }

    @Test("Behind symmetric NATs (--random-fully) the call goes through the TURN relay")
    func relayed() async throws {
        let outcome = try await Self.call(topology: "--random-fully")
        #expect(outcome.started(outcome.alice) == "relayed" && outcome.started(outcome.bob) == "relayed", "\(outcome.alice) \(outcome.bob)")
        #expect(outcome.stoi > 0.6)
    }

    @Test("With UDP blocked between the sides, media falls back to the client's channel")
    func fallback() async throws {
        let outcome = try await Self.call(topology: "--block-udp")
        #expect(outcome.started(outcome.alice) == "client" && outcome.started(outcome.bob) == "client", "\(outcome.alice) \(outcome.bob)")
        #expect(outcome.stoi > 0.6)
    }
}
