import Foundation
import NetworkImpairment
import Testing

/// Every ordinary way a tool is stopped says goodbye (PROTOCOL §14.8): SIGINT (Ctrl-C), SIGTERM
/// (`kill`, a service manager), SIGHUP (the terminal closed) and the end of its input. Each tool
/// runs twice: "Leaver", to which a gk-session connects, and "Idler", only advertised; a gk-mdns
/// browser watches both. After both are stopped the same way, the connected peer must hear its
/// link close and the browser the multicast DNS goodbyes, and each tool must end as the signal
/// would have ended it.
///
/// Nothing else could explain what the observers see within the run: the watcher's disconnect
/// timeout is ten minutes, the browser does no liveness probing, and the records' lifetime is
/// 75 minutes.
///
/// Serialized: twelve cases of six processes each at once on two cores starved the discovery
/// interop tests running beside them (python-zeroconf's 3-second registration window).
@Suite("Goodbye on every ordinary exit, across processes", .serialized)
struct GoodbyeProcessTests {
    enum Way: String, CaseIterable, CustomTestStringConvertible {
        case interrupt = "INT", terminate = "TERM", hangUp = "HUP", endOfInput = "EOF"

        var testDescription: String { self == .endOfInput ? "end of input" : "SIG\(self.rawValue)" }

        /// What the shell reports: 128 + the signal's number, or 0.
        var status: Int {
            switch self {
            case .interrupt: 128 + 2
            case .terminate: 128 + 15
            case .hangUp: 128 + 1
            case .endOfInput: 0
            }
        }

        /// Bash that stops both instances ($L and $I, their input on descriptors 3 and 4).
        var stop: String { self == .endOfInput ? "exec 3>&- 4>&-" : "kill -\(self.rawValue) $L $I" }
    }

    enum Tool: String, CaseIterable, CustomTestStringConvertible {
        case session = "gk-session", chat = "gk-chat", voice = "gk-voice"

        var testDescription: String { self.rawValue }

        /// Bash that starts the instance `name`, reading the FIFO $d/<name>.in, writing $d/<name>.
        func start(_ name: String) -> String {
            let io = "< $d/\(name).in > $d/\(name) 2>&1 &"
            return switch self {
            case .session: "gk-session --session-id bye --name \(name) --answer accept --seconds 60 \(io)"
            case .chat: "gk-chat --session-id bye --name \(name) --mode server --seconds 60 \(io)"
            case .voice: "gk-voice --session-id bye --name \(name) --input $d/say.wav --output $d/\(name).wav --seconds 60 \(io)"
            }
        }

        /// Bash run once the leaver is up: gk-voice's picker asks whether to accept.
        var answer: String {
            switch self {
            case .voice: "\(SandboxScript.awaitText("Watcher wants to connect", in: "$d/Leaver")); echo a >&3"
            default: ""
            }
        }
    }

    static func await(_ file: String, _ pattern: String) -> String {
        "for i in $(seq 400); do grep -q '\(pattern)' \(file) 2>/dev/null && break; sleep 0.05; done"
    }

    /// Runs `start("Leaver")` and `start("Idler")` (each reading $d/<name>.in, writing $d/<name>),
    /// a gk-session connected to the Leaver and a gk-mdns browser; once all are up, `stop`s both
    /// ($L and $I, inputs on descriptors 3 and 4). Checks what the observers heard; returns the
    /// run for the caller's own checks.
    static func observeGoodbye(
        start: (String) -> String, answer: String = "", stop: String, status: Int, leaverAdvertised: Bool = true
    ) async throws -> SandboxScript.Result {
        let result = try await SandboxScript.run(
            """
            d=$(mktemp -d)
            mkfifo $d/Leaver.in $d/Idler.in
            python3 -c 'import wave; w = wave.open("'$d/say.wav'", "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000); w.writeframes(bytes(32000))'
            gk-mdns browse --type _bye._udp --seconds 60 --ignore-stdin > $d/m &
            M=$!
            gk-session --session-id bye --name Watcher --connect Leaver --disconnect-timeout 600 --seconds 60 --ignore-stdin > $d/w &
            W=$!
            \(start("Leaver"))
            L=$!
            exec 3>$d/Leaver.in
            \(start("Idler"))
            I=$!
            exec 4>$d/Idler.in
            \(answer)
            \(Self.await("$d/w", "\"name\":\"Leaver\",.*\"state\":\"connected\""))
            \(Self.await("$d/m", "\"event\":\"found\".*Idler"))
            echo "K {\\"mono_ns\\":$(python3 -c 'import time; print(time.monotonic_ns())')}"
            \(stop)
            wait $L
            echo "X {\\"status\\":$?}"
            wait $I
            echo "Y {\\"status\\":$?}"
            \(Self.await("$d/w", "\"name\":\"Leaver\",.*\"state\":\"disconnected\""))
            \(Self.await("$d/m", "\"event\":\"lost\".*Idler"))
            kill $W $M; exec 3>&- 4>&- 2>/dev/null; wait
            sed 's/^/W /' $d/w; sed 's/^/M /' $d/m; sed 's/^/L /' $d/Leaver; sed 's/^/I /' $d/Idler; rm -rf $d
            """, timeout: 90)
        let output = result.lines.joined(separator: "\n")
        let mark = try #require(result.objects(tagged: "K").first?["mono_ns"] as? Int, "\(output)")
        func after(_ events: [[String: Any]]) -> [[String: Any]] { events.filter { ($0["mono_ns"] as? Int ?? 0) > mark } }

        // The connected peer hears the link close. (It and the withdrawal race: "disconnected",
        // "available", "unavailable" is as true as the withdrawal first, "disconnected" last.)
        let watcher = result.objects(tagged: "W").filter { $0["event"] as? String == "state" && $0["name"] as? String == "Leaver" }
        #expect(watcher.compactMap { $0["state"] as? String }.contains("connected"), "\(output)")
        let watcherAfter = after(watcher).compactMap { $0["state"] as? String }
        #expect(watcherAfter.first == "disconnected", "\(output)")
        #expect(["disconnected", "unavailable"].contains(watcherAfter.last), "\(output)")
        // Every browser hears each advertisement withdrawn once the programs are stopped.
        let browser = result.objects(tagged: "M")
        func lost(_ name: String) -> [[String: Any]] {
            browser.filter { $0["event"] as? String == "lost" && ($0["instance"] as? String)?.hasPrefix(name) == true }
        }
        #expect(after(lost("Idler")).count == 1 && lost("Idler").count == 1, "\(output)")
        #expect(lost("Leaver").count == 1, "\(output)")
        if leaverAdvertised { #expect(after(lost("Leaver")).count == 1, "\(output)") }
        // Each ended as the signal would have ended it (or normally, at the end of its input).
        #expect(result.objects(tagged: "X").first?["status"] as? Int == status, "\(output)")
        #expect(result.objects(tagged: "Y").first?["status"] as? Int == status, "\(output)")
        // The watcher heard goodbyes: it never had to find a peer silent.
        let stopped = result.objects(tagged: "W").first { $0["event"] as? String == "stopped" }
        #expect((stopped?["statistics"] as? [String: Any])?["silent_peers"] as? Int == 0, "\(output)")
        return result
    }

    @Test(arguments: Tool.allCases, Way.allCases)
    func theConnectedPeerAndEveryBrowserHearTheGoodbye(tool: Tool, way: Way) async throws {
        // The picker withdraws a connected gk-voice's advertisement already.
        let result = try await Self.observeGoodbye(
            start: tool.start, answer: tool.answer, stop: way.stop, status: way.status, leaverAdvertised: tool != .voice)
        if tool == .session {
            let reason = result.objects(tagged: "L").first { $0["event"] as? String == "stopped" }?["reason"] as? String
            #expect(reason == (way == .endOfInput ? "end of input" : "signal \(way.status - 128)"), "\(result.lines)")
        }
    }

    /// The README's example: an application's own SIGTERM handling with `GKSession.closeAll()`.
    @Test func theReadmeSignalHandlingSaysGoodbye() async throws {
        let result = try await Self.observeGoodbye(
            start: { name in "gk-readme-goodbye bye \(name) < $d/\(name).in > $d/\(name) 2>&1 &" },
            stop: "kill -TERM $L $I", status: 0)
        #expect(result.lines(tagged: "L") == ["ready"])
    }
}
