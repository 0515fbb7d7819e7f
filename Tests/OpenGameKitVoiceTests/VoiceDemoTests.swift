import Foundation
import NetworkImpairment
import Testing

/// gk-voice, the demo, through scripts/voice's scripted call (line mode): the picker, "Connected
/// to …", live meters, m (mute), - (volume), q (hang up).
@Suite("gk-voice demo")
struct VoiceDemoTests {
    @Test("A scripted call: connected, meters move, mute and volume show, hang-up returns to the picker")
    func scriptedCall() async throws {
        let result = try await SandboxScript.run("scripts/voice < /dev/null", timeout: 120)
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
            code=$(grep -o 'Room [0-9A-Z]\\{4\\}-[0-9A-Z]\\{4\\}-[0-9A-Z]\\{4\\}' $d/alice | head -1 | cut -c6-)
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

    /// `gk-voice group` in four terminals (tmux, in the sandbox): Alice speaks a WAV file, the
    /// others silence. Everyone is in one call and Bob's screen shows Alice as the active
    /// speaker; m mutes Bob; then each leaves the way users end programs (Ctrl-C, kill -9, kill,
    /// closing the terminal) and Bob's screen follows.
    @Test("gk-voice group in terminals: one call of four, then Ctrl-C, kill -9, kill and a closed terminal")
    func groupInTerminals() async throws {
        let result = try await SandboxScript.run(
            """
            d=$(mktemp -d)
            export TERM=xterm-256color
            T="tmux -S $d/tmux.sock"
            trap '$T kill-server 2>/dev/null; rm -rf $d' EXIT
            scripts/voice-reference $d/say.wav > /dev/null 2>&1
            sox -n -r 16000 -c 1 -b 16 $d/quiet.wav trim 0 1
            run() { echo "exec \(SandboxScript.binaries.path)/gk-voice group --session-id tmux-group --name $1 --input $d/$2.wav --output $d/$1.wav --seconds 60 2> $d/$1.err"; }
            $T new-session -d -s Alice -x 90 -y 20 "$(run Alice say)" < /dev/null > /dev/null 2>&1
            for n in Bob Carol Dave; do $T new-session -d -s $n -x 90 -y 20 "$(run $n quiet)" < /dev/null > /dev/null 2>&1; done
            # Targets end in ":" (a session): a bare name may match a window.
            screen() { $T capture-pane -p -t Bob: 2>/dev/null; }
            until_bob() { for i in $(seq 300); do screen | grep -qE -- "$1" && return; sleep 0.05; done; echo "TIMEOUT $1"; }
            until_bob "In the call with 3 others"
            until_bob "Alice .*◀ active"
            screen | sed 's/^/FOUR /'
            $T send-keys -t Bob: m
            until_bob "Microphone muted"
            $T send-keys -t Carol: C-c
            until_bob "In the call with 2 others"
            screen | sed 's/^/NO-CAROL /'
            kill -9 $($T list-panes -t Dave: -F '#{pane_pid}')
            until_bob "In the call with 1 other"
            screen | sed 's/^/NO-DAVE /'
            kill $($T list-panes -t Alice: -F '#{pane_pid}')
            until_bob "Waiting for others"
            B=$($T list-panes -t Bob: -F '#{pane_pid}')
            $T kill-session -t Bob:
            for i in $(seq 100); do st=$(ps -o stat= -p $B 2>/dev/null); [ -z "$st" ] || [ "${st#Z}" != "$st" ] && break; sleep 0.05; done
            st=$(ps -o stat= -p $B 2>/dev/null); [ -z "$st" ] || [ "${st#Z}" != "$st" ] && echo "BOB GONE"
            cat $d/*.err
            """, timeout: 120)
        #expect(!result.lines.contains { $0.hasPrefix("TIMEOUT") }, "\(result.lines)")
        let four = result.lines.filter { $0.hasPrefix("FOUR ") }
        #expect(four.contains { $0.contains("Alice") && $0.contains("◀ active") }, "\(four)")
        #expect(four.contains { $0.contains("Carol") } && four.contains { $0.contains("Dave") })
        #expect(!result.lines.filter { $0.hasPrefix("NO-CAROL ") }.contains { $0.contains("Carol") })
        let noDave = result.lines.filter { $0.hasPrefix("NO-DAVE ") }
        #expect(!noDave.contains { $0.contains("Dave") } && noDave.contains { $0.contains("Microphone muted") }, "\(noDave)")
        #expect(result.lines.contains("BOB GONE"), "\(result.lines)")
    }
}
