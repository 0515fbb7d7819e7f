import Foundation
import NetworkImpairment
import Testing

/// Commands as a user types them, from the README and the tools' help: each row is the command
/// exactly as written, what runs beside it (a rendezvous it talks to), how the test ends it from
/// outside (it ends by itself, or SIGTERM once it has printed what it must; never a flag the user
/// would not type), and what it must print. A program's standard input is a pipe that stays open
/// with nothing on it, as a terminal nobody types into.
@Suite("Commands as users type them")
struct CommandTableTests {
    enum End: Sendable {
        /// It ends by itself, with this status.
        case exits(Int32)
        /// It runs until stopped: alive `after` seconds past its last expected line, then SIGTERM
        /// ends it with this status.
        case runs(after: Int, terminated: Int32)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var command: String
        var beside: String = ""
        var prints: [String]
        var end: End
        var testDescription: String { self.command }
    }

    static let rendezvous = "gk-rendezvous > $d/rendezvous & R=$!; ogk_wait_for $d/rendezvous listening 1 10"

    static let rows: [Row] = [
        // The README's online quick start, first terminal.
        Row(command: "gk-rendezvous", prints: ["\"event\":\"listening\""], end: .runs(after: 5, terminated: 0)),
        Row(command: "gk-rendezvous --duration 0", prints: ["--duration must be a positive number of seconds"], end: .exits(64)),
        Row(command: "gk-rendezvous --listen nonsense", prints: ["--listen"], end: .exits(64)),
        // The README's second and third terminals, and what goes wrong for users.
        Row(command: "gk-chat --online", beside: Self.rendezvous, prints: ["picker: Room ", "waiting for others"], end: .runs(after: 1, terminated: 143)),
        Row(command: "gk-chat --online", prints: ["No answer from the rendezvous at 127.0.0.1:7878"], end: .runs(after: 0, terminated: 143)),
        Row(command: "gk-chat --online ZZZZ-ZZ00-000S", beside: Self.rendezvous, prints: ["There is no room ZZZZ-ZZ00-000S for this game"], end: .runs(after: 0, terminated: 143)),
        Row(command: "gk-chat --online abc", prints: ["'abc' is not a room code"], end: .runs(after: 0, terminated: 143)),
        Row(command: "gk-chat --online 7K3Q-XM4F-9ABS", prints: ["one letter or digit is mistyped"], end: .runs(after: 0, terminated: 143)),
        Row(
            command: "gk-chat --online --rendezvous nowhere.invalid:7878", prints: ["The rendezvous 'nowhere.invalid:7878' could not be found"],
            end: .runs(after: 0, terminated: 143)),
        Row(command: "gk-voice --online ZZZZ-ZZ00-000S", beside: Self.rendezvous, prints: ["There is no room ZZZZ-ZZ00-000S for this game"], end: .runs(after: 0, terminated: 143)),
        Row(
            command: "gk-session --name Ann --online ZZZZ-ZZ00-000S", beside: Self.rendezvous,
            prints: ["\"event\":\"room-error\"", "There is no room ZZZZ-ZZ00-000S for this game"], end: .runs(after: 0, terminated: 143)),
        // The README's transport, discovery and session sections.
        Row(command: "gk-link listen --port 7000", prints: ["listening"], end: .runs(after: 1, terminated: 0)),
        Row(
            command: "gk-link connect 127.0.0.1:7000", beside: "gk-link listen --port 7000 > $d/listener & R=$!; ogk_wait_for $d/listener listening 1 10",
            prints: ["\"event\":\"summary\""], end: .exits(0)),
        Row(command: "gk-impair --listen 127.0.0.1:7001 --target 127.0.0.1:7000", prints: ["listening 127.0.0.1 7001"], end: .runs(after: 1, terminated: 0)),
        Row(
            command: "gk-mdns register --type _chat._udp --name \"Alice\" --port 7000",
            prints: ["\"event\":\"registered\"", "Alice._chat._udp.local."], end: .runs(after: 1, terminated: 0)),
        Row(
            command: "gk-mdns browse --type _chat._udp",
            beside: "mkfifo $d/rin; exec 4<>$d/rin; gk-mdns register --type _chat._udp --name Alice --port 7000 < $d/rin > $d/register & R=$!",
            prints: ["Alice._chat._udp.local."], end: .runs(after: 1, terminated: 0)),
        Row(command: "gk-session --name Alice --mode server", prints: ["\"event\":\"started\""], end: .runs(after: 1, terminated: 143)),
        Row(
            command: "gk-session --name Bob --mode client --connect Alice",
            beside: "mkfifo $d/sin; exec 4<>$d/sin; gk-session --name Alice --mode server < $d/sin > $d/server & R=$!",
            prints: ["\"state\":\"connected\""], end: .runs(after: 1, terminated: 143)),
        // The README's quick start and demos (not on a terminal: their line modes).
        Row(command: "scripts/chat", prints: ["Alice: Hi Bob, found you with Bonjour.", "Bob: Hi Alice! Encrypted end to end."], end: .exits(0)),
        Row(command: "scripts/demo", prints: ["in order, each once: True", "Mallory's connect fails with: authenticationFailed"], end: .exits(0)),
    ]

    @Test(arguments: Self.rows) func theCommandDoesWhatTheReadmeSays(_ row: Row) async throws {
        let waits = row.prints.map { "ogk_wait_for $d/out '\($0.replacingOccurrences(of: "'", with: "'\\''"))' 1 30 || echo 'MISSING \($0.replacingOccurrences(of: "'", with: "'\\''"))'" }
        let ending: String
        switch row.end {
        case .exits:
            ending = "wait $P; echo \"STATUS $?\""
        case .runs(let after, _):
            ending = """
                sleep \(after)
                kill -0 $P 2>/dev/null && echo ALIVE
                kill -TERM $P; wait $P; echo "STATUS $?"
                """
        }
        let result = try await SandboxScript.run(
            """
            source scripts/lib.sh
            d=$(mktemp -d)
            R=""
            \(row.beside)
            mkfifo $d/in; exec 3<>$d/in
            \(row.command) < $d/in > $d/out 2>&1 &
            P=$!
            \(waits.joined(separator: "\n"))
            \(ending)
            [ -n "$R" ] && kill $R
            exec 3>&-; wait
            sed 's/^/O /' $d/out; rm -rf $d
            """, timeout: 120)
        let output = result.lines(tagged: "O").joined(separator: "\n")
        #expect(!result.lines.contains { $0.hasPrefix("MISSING ") }, "\(row.command) printed:\n\(output)")
        switch row.end {
        case .exits(let status):
            #expect(result.lines.contains("STATUS \(status)"), "\(result.lines.filter { $0.hasPrefix("STATUS") }) \(output)")
        case .runs(_, let status):
            #expect(result.lines.contains("ALIVE"), "\(row.command) ended by itself:\n\(output)")
            #expect(result.lines.contains("STATUS \(status)"), "\(result.lines.filter { $0.hasPrefix("STATUS") }) \(output)")
        }
        // However it ends, a user never sees a runtime failure.
        #expect(!output.contains("Fatal error") && !output.contains("runtime failure"), "\(output)")
    }
}
