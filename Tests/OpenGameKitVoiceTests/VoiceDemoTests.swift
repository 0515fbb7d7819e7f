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

    /// `gk-voice --online`: Alice creates a room (the picker shows its code), Bob joins it with
    /// the code, and they talk with no multicast DNS at all (`--online-only`): the call's
    /// signalling goes through the room, and its media finds a path (the rendezvous is its STUN
    /// server) or uses the session's connection.
    @Test("Online: a voice chat between the members of a room")
    func onlineCall() async throws {
        let result = try await SandboxScript.run(
            """
            export PATH=\(SandboxScript.binaries.path):$PATH
            d=$(mktemp -d)
            trap "rm -rf $d" EXIT
            wait_for() { for _ in $(seq 400); do [ "$(grep -cF "$2" "$d/$1" 2>/dev/null)" -ge 1 ] && return; sleep 0.05; done; }
            scripts/voice-reference $d/alice-says.wav > /dev/null
            scripts/voice-reference $d/bob-says.wav --second-talker > /dev/null
            gk-rendezvous --listen 127.0.0.1:7878 --duration 60 > $d/rendezvous &
            rendezvous=$!
            mkfifo $d/alice.in $d/bob.in
            gk-voice --name Alice --session-id online-voice --online --online-only --input $d/alice-says.wav --output $d/alice-hears.wav --seconds 40 < $d/alice.in > $d/alice 2>&1 &
            exec 3>$d/alice.in
            wait_for alice "waiting for others"
            code=$(grep -o 'Room [0-9A-Z]\\{3\\}-[0-9A-Z]\\{3\\}' $d/alice | head -1 | cut -c6-)
            gk-voice --name Bob --session-id online-voice --online "$code" --online-only --input $d/bob-says.wav --output $d/bob-hears.wav --seconds 40 < $d/bob.in > $d/bob 2>&1 &
            exec 4>$d/bob.in
            wait_for bob "list: 1) Alice"
            echo 1 >&4
            wait_for alice "Bob wants to connect"
            echo a >&3
            wait_for bob "voice: Connected to Alice"
            sleep 4
            echo q >&4
            wait_for alice "ended"
            exec 3>&- 4>&-
            kill $rendezvous
            wait
            sed 's/^/A /' $d/alice; sed 's/^/B /' $d/bob; sed 's/^/R /' $d/rendezvous
            """, timeout: 120)
        let alice = result.lines(tagged: "A")
        let bob = result.lines(tagged: "B")
        let all = result.lines.joined(separator: "\n")
        #expect(alice.contains { $0.hasPrefix("picker: Room ") && $0.contains("waiting for others") }, "\(all)")
        #expect(bob.contains { $0.hasPrefix("picker: Room ") && $0.contains("choose a peer to invite") }, "\(all)")
        #expect(bob.contains { $0.hasPrefix("voice: Connected to Alice · path ") }, "\(all)")
        #expect(alice.contains { $0.contains("Voice chat ended: ") && $0.contains("The other participant ended the chat. (32003)") }, "\(all)")
        // Alice's voice reached Bob: his meter for her reads speech levels.
        let aliceLevels = bob.compactMap { line -> Double? in
            guard line.hasPrefix("voice: Connected"), let range = line.range(of: "· Alice ") else { return nil }
            return Double(line[range.upperBound...].prefix { $0 != "d" }.trimmingCharacters(in: .whitespaces))
        }
        #expect(aliceLevels.contains { $0 > -40 }, "\(aliceLevels)")
        // Both were members of one room of the rendezvous.
        let joined = result.objects(tagged: "R").filter { $0["event"] as? String == "member_joined" }
        #expect(Set(joined.compactMap { $0["name"] as? String }) == ["Alice", "Bob"], "\(all)")
    }
}
