import Foundation
import NetworkImpairment
import Testing

/// gk-chat in real terminals: tmux (its own server, in the sandbox) runs two of them; the test
/// types keys with `send-keys` and reads the screens with `capture-pane`. After quitting, `stty`
/// in the same terminal shows it back in cooked mode.
@Suite("gk-chat in real terminals (tmux)", .serialized)
struct ChatTerminalTests {
    /// Bash: wait (at most 20 s) until pane `pane` shows `text`.
    static func await(_ pane: String, _ text: String) -> String {
        "for i in $(seq 200); do $T capture-pane -p -t \(pane) | grep -qF '\(text)' && break; sleep 0.05; done"
    }

    /// Bash: run gk-chat as `name` in `pane`, then `stty -a` into $d/<pane>.stty once it exits.
    static func launch(_ pane: String, _ name: String, _ arguments: String) -> String {
        "$T send-keys -t \(pane) \"gk-chat --name \(name) \(arguments); stty -a > $d/\(pane).stty\" Enter"
    }

    /// Bash: the screen of `pane`, each line tagged `tag`.
    static func capture(_ pane: String, _ tag: String) -> String {
        "$T capture-pane -p -t \(pane) | sed 's/^/\(tag) /'"
    }

    static func screen(_ result: SandboxScript.Result, _ tag: String) -> String {
        result.lines.filter { $0.hasPrefix("\(tag) ") || $0 == tag }.map { String($0.dropFirst(min($0.count, tag.count + 1))) }.joined(separator: "\n")
    }

    static func script(_ body: String) -> String {
        """
        d=$(mktemp -d)
        export TERM=xterm-256color
        T="tmux -S $d/tmux.sock"
        # The tmux server must not hold this script's output open (the test reads it to the end),
        # and goes away however the script ends.
        trap '$T kill-server 2>/dev/null; rm -rf $d' EXIT
        $T new-session -d -s a -x 90 -y 20 "bash --norc --noprofile" < /dev/null > /dev/null 2>&1
        $T new-session -d -s b -x 90 -y 20 "bash --norc --noprofile" < /dev/null > /dev/null 2>&1
        \(body)
        """
    }

    @Test func twoTerminalsInviteAcceptChatAndQuitToACookedTerminal() async throws {
        let result = try await SandboxScript.run(
            Self.script(
                """
                \(Self.launch("a", "Alice", "--session-id tmux-chat --seconds 40"))
                \(Self.launch("b", "Bob", "--session-id tmux-chat --seconds 40"))
                \(Self.await("a", "Bob"))
                \(Self.capture("a", "SEARCHING"))
                $T send-keys -t a Enter
                \(Self.await("a", "Waiting for Bob to accept"))
                \(Self.await("b", "Alice wants to connect"))
                \(Self.capture("a", "INVITING"))
                \(Self.capture("b", "INVITED"))
                $T send-keys -t b a
                \(Self.await("a", "Connected to Bob"))
                \(Self.await("b", "Connected to Alice"))
                $T send-keys -t a "hello from alice" Enter
                \(Self.await("b", "Alice: hello from alice"))
                $T send-keys -t b "hi from bob" Enter
                \(Self.await("a", "Bob: hi from bob"))
                \(Self.capture("a", "CHAT-A"))
                \(Self.capture("b", "CHAT-B"))
                $T send-keys -t a C-c
                \(Self.await("b", "Searching for nearby peers"))
                \(Self.capture("b", "BACK"))
                $T send-keys -t b Escape
                for i in $(seq 200); do [ -s $d/a.stty ] && [ -s $d/b.stty ] && break; sleep 0.05; done
                sed 's/^/STTY-A /' $d/a.stty; sed 's/^/STTY-B /' $d/b.stty
                """), timeout: 90)
        let all = result.lines.joined(separator: "\n")
        #expect(Self.screen(result, "SEARCHING").contains("Bob"), "\(all)")
        #expect(Self.screen(result, "INVITING").contains("Waiting for Bob to accept… (Esc cancels)"), "\(all)")
        #expect(Self.screen(result, "INVITED").contains("Alice wants to connect — [A]ccept / [D]ecline"), "\(all)")
        for tag in ["CHAT-A", "CHAT-B"] {
            let screen = Self.screen(result, tag)
            #expect(screen.contains("Alice: hello from alice") && screen.contains("Bob: hi from bob"), "\(tag): \(screen)")
        }
        #expect(Self.screen(result, "BACK").contains("Searching for nearby peers"), "\(all)")
        // Both terminals are back in cooked mode: canonical input and echo on.
        for tag in ["STTY-A", "STTY-B"] {
            let stty = Self.screen(result, tag)
            #expect(stty.contains(" icanon") && !stty.contains("-icanon"), "\(tag): \(stty)")
            #expect(stty.contains(" echo ") && !stty.contains("-echo "), "\(tag): \(stty)")
        }
    }

    /// The picker's own online prompt: Alice creates a room, Bob mistypes its code (told why,
    /// back to the choice), then types it in the keys that are commands elsewhere; they connect
    /// through the room (no multicast DNS: the picker's online sessions list members only).
    @Test func thePickerCreatesARoomAndJoinsOneWithATypedCode() async throws {
        let result = try await SandboxScript.run(
            Self.script(
                """
                gk-rendezvous --listen 127.0.0.1:7878 --duration 60 > $d/rendezvous &
                \(Self.launch("a", "Alice", "--session-id tmux-online --rendezvous 127.0.0.1:7878 --seconds 50"))
                \(Self.launch("b", "Bob", "--session-id tmux-online --rendezvous 127.0.0.1:7878 --seconds 50"))
                \(Self.await("a", "How do you want to connect"))
                $T send-keys -t a Down Enter
                \(Self.await("a", "Join with a code"))
                \(Self.capture("a", "ROOMS"))
                $T send-keys -t a Enter
                \(Self.await("a", "waiting for others"))
                code=$($T capture-pane -p -t a | grep -o 'Room [0-9A-Z]\\{4\\}-[0-9A-Z]\\{4\\}-[0-9A-Z]\\{4\\}' | head -1 | cut -c6-)
                echo "CODE $code"
                \(Self.await("b", "How do you want to connect"))
                $T send-keys -t b Down Enter
                \(Self.await("b", "Join with a code"))
                $T send-keys -t b Down Enter
                \(Self.await("b", "Room code: _"))
                $T send-keys -t b "zzzzzz00000s" Enter
                \(Self.await("b", "Could not join the room"))
                \(Self.capture("b", "WRONG"))
                $T send-keys -t b Down Enter
                \(Self.await("b", "Room code: _"))
                $T send-keys -t b "$(echo $code | tr 'A-Z' 'a-z')"
                \(Self.await("b", "Room code: $code"))
                $T send-keys -t b Enter
                \(Self.await("b", "Alice"))
                \(Self.capture("b", "MEMBERS"))
                $T send-keys -t b Enter
                \(Self.await("a", "Bob wants to connect"))
                $T send-keys -t a a
                \(Self.await("a", "Connected to Bob"))
                \(Self.await("b", "Connected to Alice"))
                $T send-keys -t b "over the room" Enter
                \(Self.await("a", "Bob: over the room"))
                \(Self.capture("a", "CHAT-A"))
                $T send-keys -t a C-c
                $T send-keys -t b C-c
                for i in $(seq 200); do [ -s $d/a.stty ] && [ -s $d/b.stty ] && break; sleep 0.05; done
                kill %1; wait %1
                sed 's/^/R /' $d/rendezvous
                """), timeout: 90)
        let all = result.lines.joined(separator: "\n")
        let code = try #require(result.lines.first { $0.hasPrefix("CODE ") }.map { String($0.dropFirst(5)) }, "\(all)")
        #expect(code.count == 14, "\(all)")
        #expect(Self.screen(result, "ROOMS").contains("Create a room"), "\(all)")
        #expect(Self.screen(result, "WRONG").contains("Could not join the room: There is no room ZZZZ-ZZ00-000S"), "\(all)")
        let members = Self.screen(result, "MEMBERS")
        #expect(members.contains("Room \(code): choose a peer to invite") && members.contains("Alice"), "\(all)")
        let chat = Self.screen(result, "CHAT-A")
        #expect(chat.contains("Bob: over the room"), "\(all)")
        #expect(chat.contains("Connected to Bob (relayed") || chat.contains("Connected to Bob (direct"), "\(all)")
        // The rendezvous refused the wrong code and saw both members join the one room.
        let log = result.objects(tagged: "R")
        #expect(log.contains { $0["event"] as? String == "refused" && $0["reason"] as? String == "noSuchRoom" }, "\(all)")
        let joined = log.filter { $0["event"] as? String == "member_joined" }
        #expect(Set(joined.compactMap { $0["name"] as? String }) == ["Alice", "Bob"], "\(all)")
        #expect(Set(joined.compactMap { $0["room"] as? String }).count == 1, "\(all)")
    }

    /// A resize redraws the picker to the new size; a crash (SIGSEGV) still gives the terminal back.
    @Test func aResizeRedrawsAndACrashRestoresTheTerminal() async throws {
        let result = try await SandboxScript.run(
            Self.script(
                """
                \(Self.launch("a", "Alice", "--session-id tmux-crash --seconds 30"))
                \(Self.await("a", "Esc or q to cancel"))
                $T resize-window -t a -x 50 -y 12
                sleep 0.5
                \(Self.capture("a", "RESIZED"))
                # Only this pane's gk-chat: other tests run gk-chat processes at the same time.
                pkill -SEGV -x gk-chat -P "$($T list-panes -t a -F '#{pane_pid}')"
                for i in $(seq 200); do [ -s $d/a.stty ] && break; sleep 0.05; done
                sed 's/^/STTY-A /' $d/a.stty
                """), timeout: 60)
        let all = result.lines.joined(separator: "\n")
        let resized = Self.screen(result, "RESIZED").split(separator: "\n", omittingEmptySubsequences: false)
        // Twelve rows, the help line on the last one, nothing wider than the new width.
        #expect(resized.count == 12, "\(all)")
        #expect(resized.last?.contains("Esc or q to cancel") == true, "\(all)")
        #expect(resized.allSatisfy { $0.count <= 50 }, "\(all)")
        let stty = Self.screen(result, "STTY-A")
        #expect(stty.contains(" icanon") && !stty.contains("-icanon") && !stty.contains("-echo "), "\(all)")
    }

    /// `kill` (SIGTERM) and a closed terminal (SIGHUP: tmux kills the session) end gk-chat with
    /// its goodbye: a browser elsewhere sees each withdrawn; the killed one's terminal is cooked.
    @Test func killAndAClosedTerminalSayGoodbyeAndGiveTheTerminalBack() async throws {
        let result = try await SandboxScript.run(
            Self.script(
                """
                gk-mdns browse --type _tmux-bye._udp --seconds 40 --ignore-stdin > $d/m &
                M=$!
                \(Self.launch("a", "Alice", "--session-id tmux-bye --seconds 40"))
                \(Self.launch("b", "Bob", "--session-id tmux-bye --seconds 40"))
                \(Self.await("a", "Bob"))
                \(Self.await("b", "Alice"))
                for i in $(seq 200); do [ $(grep -c '"event":"found"' $d/m) -ge 2 ] && break; sleep 0.05; done
                # Only this pane's gk-chat: other tests run gk-chat processes at the same time.
                kill -TERM $(pgrep -x gk-chat -P "$($T list-panes -t a -F '#{pane_pid}')")
                for i in $(seq 200); do [ -s $d/a.stty ] && break; sleep 0.05; done
                $T kill-session -t b
                for i in $(seq 200); do [ $(grep -c '"event":"lost"' $d/m) -ge 2 ] && break; sleep 0.05; done
                kill $M; wait $M
                sed 's/^/STTY-A /' $d/a.stty
                sed 's/^/M /' $d/m
                """), timeout: 60)
        let all = result.lines.joined(separator: "\n")
        let lost = result.objects(tagged: "M").filter { $0["event"] as? String == "lost" }.compactMap { $0["instance"] as? String }
        #expect(lost.contains { $0.hasPrefix("Alice") } && lost.contains { $0.hasPrefix("Bob") }, "\(all)")
        let stty = Self.screen(result, "STTY-A")
        #expect(stty.contains(" icanon") && !stty.contains("-icanon") && !stty.contains("-echo "), "\(all)")
    }

    @Test func declineCancelAndTimeoutInTheTerminalPicker() async throws {
        let result = try await SandboxScript.run(
            Self.script(
                """
                \(Self.launch("a", "Alice", "--session-id tmux-refuse --invite-timeout 2 --seconds 30"))
                \(Self.launch("b", "Bob", "--session-id tmux-refuse --seconds 30"))
                \(Self.await("a", "Bob"))
                $T send-keys -t a Enter
                \(Self.await("b", "Alice wants to connect"))
                $T send-keys -t b d
                \(Self.await("a", "Bob declined."))
                \(Self.capture("a", "DECLINED"))
                $T send-keys -t a Enter
                \(Self.await("b", "Alice wants to connect"))
                sleep 0.3
                $T send-keys -t a Escape
                \(Self.await("b", "Alice withdrew the invitation."))
                \(Self.capture("b", "WITHDRAWN"))
                $T send-keys -t a Enter
                \(Self.await("b", "Alice wants to connect"))
                \(Self.await("a", "Bob did not answer."))
                \(Self.capture("a", "NO-ANSWER"))
                $T send-keys -t a q
                $T send-keys -t b q
                for i in $(seq 200); do [ -s $d/a.stty ] && [ -s $d/b.stty ] && break; sleep 0.05; done
                sed 's/^/STTY-A /' $d/a.stty
                """), timeout: 90)
        let all = result.lines.joined(separator: "\n")
        #expect(Self.screen(result, "DECLINED").contains("Bob declined."), "\(all)")
        #expect(Self.screen(result, "WITHDRAWN").contains("Alice withdrew the invitation."), "\(all)")
        #expect(Self.screen(result, "NO-ANSWER").contains("Bob did not answer."), "\(all)")
        #expect(Self.screen(result, "STTY-A").contains(" icanon"), "\(all)")
    }
}
