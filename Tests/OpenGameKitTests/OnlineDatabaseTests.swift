import Foundation
import NetworkImpairment
import Testing

/// Two gk-rendezvous instances sharing rooms through a real PostgreSQL that the test starts
/// (scripts/rendezvous-cluster, scripts/postgres), one of them killed with SIGKILL.
@Suite("Rendezvous instances sharing rooms in PostgreSQL", .serialized)
struct OnlineDatabaseTests {
    @Test func membersOfDifferentInstancesMeetAndTheRoomSurvivesAKilledInstance() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-cluster-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await SandboxScript.run(
            """
            scripts/rendezvous-cluster \(directory)
            for name in alice bob carol one two; do sed "s/^/$name /" \(directory)/$name.jsonl; done
            """,
            timeout: 120)
        let alice = result.objects(tagged: "alice"), bob = result.objects(tagged: "bob"), carol = result.objects(tagged: "carol")
        let two = result.objects(tagged: "two")
        func states(_ side: [[String: Any]], _ name: String) -> [String] {
            side.filter { $0["event"] as? String == "state" && $0["name"] as? String == name }.compactMap { $0["state"] as? String }
        }
        // Bob (instance two) saw Alice (instance one) and connected, through the room's relay.
        #expect(Array(states(bob, "alice").prefix(3)) == ["available", "connecting", "connected"], "\(bob)")
        // Instance one was killed: their connection went on, never dropped or opened again, and
        // every send after the kill was taken ...
        let killed = try #require(result.objects(tagged: "one").last)
        #expect(killed["event"] as? String == "killed")
        #expect(states(bob, "alice").filter { $0 == "connected" }.count == 1)
        #expect(!bob.contains { $0["event"] as? String == "send-error" })
        #expect(bob.filter { $0["event"] as? String == "burst-sent" }.count == 2)
        // ... every message arrived, once, in order, those sent after the kill through the relay
        // instance two took over ...
        let texts = alice.filter { $0["event"] as? String == "data" }.compactMap { $0["text"] as? String }
        #expect(texts == (0..<50).map { "m\($0)" } + (0..<50).map { "n\($0)" })
        let allocations = two.filter { $0["event"] as? String == "relay_allocated" }.compactMap { $0["peer"] as? Int }
        #expect(allocations.count >= 2)
        // ... and Carol, joining through instance two afterwards, found both in the room.
        #expect(states(carol, "alice").first == "available")
        #expect(states(carol, "bob").first == "available")
    }

    /// An instance stops on time, by --duration or SIGTERM, even after its database went away
    /// under it (once, instances waited for ever on the database's connections).
    @Test func anInstanceStopsOnTimeEvenWhenItsDatabaseIsGone() async throws {
        let result = try await SandboxScript.run(
            """
            d=$(mktemp -d -u /tmp/ogk-pg.XXXXXX)
            url=$(scripts/postgres start $d)
            timeout -s KILL 15 gk-rendezvous --listen 127.0.0.1:7878 --database "$url" --instance one --duration 3 > /dev/null &
            one=$!
            gk-rendezvous --listen 127.0.0.1:7879 --database "$url" --instance two --duration 60 > /dev/null &
            two=$!
            sleep 1
            scripts/postgres stop $d
            wait $one; echo "D {\\"exit\\":$?}"
            kill -TERM $two
            for i in $(seq 100); do kill -0 $two 2>/dev/null || break; sleep 0.05; done
            if kill -0 $two 2>/dev/null; then echo 'T {"stopped":false}'; kill -KILL $two; else echo 'T {"stopped":true}'; fi
            wait
            """,
            timeout: 60)
        #expect(result.objects(tagged: "D").first?["exit"] as? Int == 0, "\(result.lines)")
        #expect(result.objects(tagged: "T").first?["stopped"] as? Bool == true, "\(result.lines)")
    }
}
