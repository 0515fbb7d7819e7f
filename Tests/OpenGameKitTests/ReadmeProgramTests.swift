import Foundation
import NetworkImpairment
import Testing

/// The README's examples that are whole programs (Tests/ReadmeExamples), built as written and run
/// in a namespace of their own, with a second process where the example needs another side.
@Suite("README programs")
struct ReadmeProgramTests {
    @Test func theTransportExampleSendsBothWaysOfDataAndCloses() async throws {
        let result = try await SandboxScript.run("timeout 60 gk-readme-transport; echo \"status $?\"", timeout: 90)
        #expect(result.lines.last == "status 0", "\(result.lines)")
        #expect(result.lines.count == 4)
        #expect(result.lines.contains { $0.hasSuffix("sent hello (reliable)") })
        #expect(result.lines.contains { $0.hasSuffix("sent position 3,4 (unreliable)") })
        #expect(result.lines.dropLast().last?.hasSuffix("closed: closed by peer (code 0)") == true)
    }

    /// It browses forever: stopped once it has found the service it advertises (its output
    /// line-buffered, as on a terminal, so that nothing waits in a buffer when it is stopped).
    @Test func theDiscoveryExampleAdvertisesAndFindsItself() async throws {
        let result = try await SandboxScript.run("""
            d=$(mktemp -d)
            stdbuf -oL gk-readme-discovery > $d/out 2>&1 & P=$!
            \(SandboxScript.awaitText("found Alice", in: "$d/out"))
            kill $P; wait $P 2>/dev/null
            sed 's/^/D /' $d/out; rm -rf $d
            """, timeout: 60)
        let lines = result.lines(tagged: "D")
        #expect(lines.first?.hasPrefix("advertised as Alice [1234]._chess._udp.local.") == true, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("found Alice [") })
    }

    /// The async server accepts, and its `write` right after `acceptConnection` reaches the
    /// client (it used to throw "not connected" and end the program), for two clients in turn.
    @Test func theAsyncServerWelcomesEachClient() async throws {
        let result = try await SandboxScript.run("""
            d=$(mktemp -d)
            gk-readme-async-server > $d/server 2>&1 & S=$!
            for name in Bob Carol; do
                timeout 30 gk-session --session-id checkers --name $name --mode client --password swordfish --connect any --seconds 20 --ignore-stdin < /dev/null > $d/$name 2>&1 & C=$!
                \(SandboxScript.awaitText("welcome", in: "$d/$name"))
                kill $C; wait $C 2>/dev/null
                sed "s/^/$name /" $d/$name
            done
            kill -0 $S && echo "S running"
            kill $S; wait $S 2>/dev/null
            sed 's/^/S /' $d/server; rm -rf $d
            """, timeout: 90)
        #expect(result.lines(tagged: "S") == ["running"], "the server printed: \(result.lines(tagged: "S").prefix(3))")
        for name in ["Bob", "Carol"] {
            let data = result.objects(tagged: name).filter { $0["event"] as? String == "data" }
            #expect(data.first?["text"] as? String == "welcome, \(name)", "\(name) heard \(result.lines(tagged: name))")
        }
    }
}
