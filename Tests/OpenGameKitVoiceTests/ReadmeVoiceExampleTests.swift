import Foundation
import GameKitVoiceEngine
import NetworkImpairment
import OpenGameKit
import Testing

/// The README's voice examples, run as programs (ReadmeSnippetsTests checks the README shows
/// them as built): the voice chat example on both sides of a call, and the voice engine.
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

    /// The voice chat example (Tests/ReadmeExamples/Voice) on both sides, as two processes of
    /// a session: one connects and calls, the other accepts and answers; both talk, through a
    /// private PulseAudio server's default devices.
    @Test func theVoiceChatExampleTalksBothWays() async throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["speaker"])
        defer { server.stop() }
        let result = try await SandboxScript.run("""
            export PULSE_SERVER=\(server.address)
            d=$(mktemp -d)
            id=readme-voice-$RANDOM
            timeout 60 stdbuf -oL gk-readme-voice $id Ann answer > $d/ann 2>&1 & A=$!
            timeout 60 stdbuf -oL gk-readme-voice $id Bob call > $d/bob 2>&1 & B=$!
            \(SandboxScript.awaitText("Talking with", in: "$d/ann"))
            \(SandboxScript.awaitText("Talking with", in: "$d/bob"))
            kill $A $B; wait $A $B 2>/dev/null
            sed 's/^/A /' $d/ann; sed 's/^/B /' $d/bob; rm -rf $d
            """, timeout: 90)
        #expect(result.lines(tagged: "A") == ["Talking with Bob"], "\(result.lines)")
        #expect(result.lines(tagged: "B") == ["Talking with Ann"], "\(result.lines)")
    }

    /// The async voice chat example (Tests/ReadmeExamples/VoiceAsync) on both sides: the caller
    /// connects and calls with `startVoiceChat(with:)`, the other answers from `voice.events`;
    /// when the caller is killed, the other's chat ends (no more voice: 32001) and it exits by
    /// itself.
    @Test func theAsyncVoiceChatExampleTalksAndEndsWhenTheOtherSideDies() async throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["speaker"])
        defer { server.stop() }
        let result = try await SandboxScript.run("""
            export PULSE_SERVER=\(server.address)
            d=$(mktemp -d)
            id=readme-walkie-$RANDOM
            timeout 60 stdbuf -oL gk-readme-voice-async $id Ann answer > $d/ann 2>&1 & A=$!
            timeout 60 stdbuf -oL gk-readme-voice-async $id Bob call > $d/bob 2>&1 & B=$!
            \(SandboxScript.awaitText("Talking with", in: "$d/ann"))
            \(SandboxScript.awaitText("Talking with", in: "$d/bob"))
            # timeout passes SIGTERM on to the program, which has no handler for it: it dies
            # without hanging up.
            kill -TERM $B; wait $B 2>/dev/null
            wait $A; echo "S $?"
            sed 's/^/A /' $d/ann; sed 's/^/B /' $d/bob; rm -rf $d
            """, timeout: 90)
        #expect(result.lines(tagged: "B") == ["Talking with Ann"], "\(result.lines)")
        let ann = result.lines(tagged: "A")
        #expect(ann.count == 2 && ann.first == "Talking with Bob", "\(result.lines)")
        // Bob's participant ID is his session's peer ID.
        #expect(ann.last?.hasPrefix("Call ended: The voice chat with ") == true, "\(result.lines)")
        #expect(ann.last?.hasSuffix(" ended: Voice from the other participant stopped arriving.") == true, "\(result.lines)")
        #expect(result.lines(tagged: "S") == ["0"], "\(result.lines)")
    }

    /// The group voice example (Tests/ReadmeExamples/GroupVoice) as four processes of one
    /// session: each joins the others' call; one is killed with SIGKILL and the other three see
    /// it leave (their sessions lose it after the example's 5 s disconnect timeout).
    @Test func theGroupVoiceExampleJoinsFourAndLosesOneKilled() async throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["speaker"])
        defer { server.stop() }
        let waitLong = { (text: String, file: String) in
            "for i in $(seq 800); do grep -qF -- '\(text)' \(file) 2>/dev/null && break; sleep 0.05; done"
        }
        let result = try await SandboxScript.run("""
            export PULSE_SERVER=\(server.address)
            d=$(mktemp -d)
            id=readme-group-$RANDOM
            for n in Ann Bob Cat Dan; do timeout 90 stdbuf -oL gk-readme-group-voice $id $n > $d/$n 2>&1 & echo $! > $d/$n.pid; done
            for n in Ann Bob Cat Dan; do \(waitLong("4 in the call", "$d/$n")); done
            # The program itself (timeout's child), not timeout.
            kill -KILL $(pgrep -P $(cat $d/Dan.pid))
            for n in Ann Bob Cat; do \(waitLong("Dan left: 3 in the call", "$d/$n")); done
            kill $(cat $d/Ann.pid) $(cat $d/Bob.pid) $(cat $d/Cat.pid); wait 2>/dev/null
            for n in Ann Bob Cat Dan; do sed "s/^/$n /" $d/$n; done; rm -rf $d
            """, timeout: 120)
        for name in ["Ann", "Bob", "Cat"] {
            let lines = result.lines(tagged: name)
            let others = Set(["Ann", "Bob", "Cat", "Dan"]).subtracting([name])
            let joined = lines.filter { $0.contains(" joined: ") }
            #expect(Set(joined.compactMap { $0.split(separator: " ").first.map(String.init) }) == others, "\(name): \(lines)")
            #expect(joined.contains { $0.hasSuffix("joined: 4 in the call") }, "\(name): \(lines)")
            #expect(lines.contains("Dan left: 3 in the call"), "\(name): \(lines)")
        }
        #expect(result.lines(tagged: "Dan").contains { $0.hasSuffix("joined: 4 in the call") }, "\(result.lines)")
    }
}
