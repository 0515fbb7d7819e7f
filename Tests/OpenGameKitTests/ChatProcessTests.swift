import Foundation
import NetworkImpairment
import Testing

/// gk-chat processes in line mode (standard input and output are pipes), driven through FIFOs
/// inside a sandbox: the picker's flows and the chat, end to end across processes.
@Suite("gk-chat across processes, line mode")
struct ChatProcessTests {
    /// Bash: start gk-chat as `tag` with its input from the FIFO $d/<tag>.in (held open on file
    /// descriptor `fd`) and its output in $d/<tag>.
    static func start(_ tag: String, fd: Int, _ arguments: String) -> String {
        """
        mkfifo $d/\(tag).in
        gk-chat \(arguments) --seconds 40 < $d/\(tag).in > $d/\(tag) 2>&1 &
        exec \(fd)>$d/\(tag).in
        """
    }

    /// Bash: wait (at most 20 s) until the output of `tag` has `count` lines containing `text`.
    static func await(_ tag: String, _ text: String, count: Int = 1) -> String {
        SandboxScript.awaitText(text, in: "$d/\(tag)", count: count)
    }

    /// The lines each program printed, by tag.
    static func output(_ result: SandboxScript.Result, _ tag: String) -> [String] {
        result.lines(tagged: tag)
    }

    static func run(_ body: String, tags: [String]) async throws -> SandboxScript.Result {
        try await SandboxScript.run(
            """
            d=$(mktemp -d)
            \(body)
            exec 3>&- 4>&- 5>&- 2>/dev/null
            wait
            \(tags.map { "sed 's/^/\($0) /' $d/\($0)" }.joined(separator: "\n"))
            rm -rf $d
            """, timeout: 90)
    }

    @Test func oneInvitesTheOtherAcceptsTheyChatAndALeaveBringsThePickerBack() async throws {
        let result = try await Self.run(
            """
            \(Self.start("A", fd: 3, "--name Alice --session-id chat-accept"))
            \(Self.start("B", fd: 4, "--name Bob --session-id chat-accept"))
            \(Self.await("A", "list: 1) Bob"))
            echo 1 >&3
            \(Self.await("B", "Alice wants to connect"))
            echo a >&4
            \(Self.await("A", "Connected to Bob"))
            \(Self.await("B", "Connected to Alice"))
            echo "hello from alice" >&3
            \(Self.await("B", "Alice: hello from alice"))
            echo "hi from bob" >&4
            \(Self.await("A", "Bob: hi from bob"))
            echo /quit >&3
            \(Self.await("B", "Alice left"))
            \(Self.await("B", "picker: Searching", count: 2))
            """, tags: ["A", "B"])
        let alice = Self.output(result, "A")
        let bob = Self.output(result, "B")
        let all = result.lines.joined(separator: "\n")
        #expect(alice.contains("picker: Waiting for Bob to accept… (Esc cancels)"), "\(all)")
        #expect(alice.contains("chat: Alice: hello from alice") && alice.contains("chat: Bob: hi from bob"), "\(all)")
        #expect(bob.contains("picker: Alice wants to connect — [A]ccept / [D]ecline"), "\(all)")
        #expect(bob.contains("chat: Alice: hello from alice") && bob.contains("chat: Bob: hi from bob"), "\(all)")
        // Alice quit: Bob saw her leave and is back in the picker.
        let left = try #require(bob.firstIndex(of: "chat: * Alice left"), "\(all)")
        #expect(bob[left...].contains("picker: Searching for nearby peers…"), "\(all)")
    }

    /// The picker's online prompt in line mode: `2` chooses online, `1` creates a room, `2` then
    /// a line joins with a code. Bob sends his choice and the code at once: the code waits for
    /// the prompt it belongs to (it is not read as picker commands).
    @Test func inLineModeThePickerCreatesARoomAndTheOtherJoinsWithItsCode() async throws {
        let result = try await Self.run(
            """
            gk-rendezvous --listen 127.0.0.1:7878 --duration 45 > /dev/null &
            rendezvous=$!
            \(Self.start("A", fd: 3, "--name Alice --session-id chat-line-room --rendezvous 127.0.0.1:7878"))
            \(Self.start("B", fd: 4, "--name Bob --session-id chat-line-room --rendezvous 127.0.0.1:7878"))
            \(Self.await("A", "picker: How do you want to connect?"))
            echo 2 >&3
            \(Self.await("A", "list: 1) Create a room, 2) Join with a code"))
            echo 1 >&3
            \(Self.await("A", "waiting for others"))
            code=$(grep -o 'Room [0-9A-Z]\\{4\\}-[0-9A-Z]\\{4\\}-[0-9A-Z]\\{4\\}' $d/A | head -1 | cut -c6-)
            \(Self.await("B", "picker: How do you want to connect?"))
            printf '2\\njoin\\n%s\\n' "$code" >&4
            \(Self.await("B", "list: 1) Alice"))
            echo 1 >&4
            \(Self.await("A", "Bob wants to connect"))
            echo a >&3
            \(Self.await("B", "Connected to Alice"))
            echo "through the room" >&4
            \(Self.await("A", "Bob: through the room"))
            echo /quit >&3
            echo /quit >&4
            kill $rendezvous
            """, tags: ["A", "B"])
        let alice = Self.output(result, "A")
        let bob = Self.output(result, "B")
        let all = result.lines.joined(separator: "\n")
        let room = try #require(alice.first { $0.hasPrefix("picker: Room ") }, "\(all)")
        let code = String(room.dropFirst("picker: Room ".count).prefix(14))
        #expect(bob.contains("picker: Room code: _") && bob.contains("picker: Room code: \(code)_"), "\(all)")
        #expect(bob.contains("picker: Room \(code): choose a peer to invite"), "\(all)")
        #expect(alice.contains("chat: Bob: through the room"), "\(all)")
        // Nothing Bob sent was taken for a picker command on the wrong screen.
        #expect(!bob.contains { $0.contains("is not a room code") }, "\(all)")
    }

    @Test func optionsThatDoNotGoTogetherAreRefusedWithTheReason() async throws {
        let result = try await SandboxScript.run(
            """
            gk-chat --online-only 2>&1 | sed 's/^/A /'; echo "A exit ${PIPESTATUS[0]}"
            gk-chat --mode server --rendezvous 127.0.0.1:7878 2>&1 | sed 's/^/B /'; echo "B exit ${PIPESTATUS[0]}"
            """)
        let all = result.lines.joined(separator: "\n")
        #expect(result.lines(tagged: "A").contains("Error: --online-only goes with --online"), "\(all)")
        #expect(result.lines(tagged: "A").contains("exit 64"), "\(all)")
        #expect(result.lines(tagged: "B").contains { $0.hasPrefix("Error: --rendezvous without --online offers rooms in the picker") }, "\(all)")
        #expect(result.lines(tagged: "B").contains("exit 64"), "\(all)")
    }

    @Test func aDeclineACancelAndATimeoutAreShownOnBothSides() async throws {
        let result = try await Self.run(
            """
            \(Self.start("A", fd: 3, "--name Alice --session-id chat-refuse --invite-timeout 2"))
            \(Self.start("B", fd: 4, "--name Bob --session-id chat-refuse"))
            \(Self.await("A", "list: 1) Bob"))
            echo 1 >&3
            \(Self.await("B", "Alice wants to connect"))
            echo d >&4
            \(Self.await("A", "Bob declined."))
            echo 1 >&3
            \(Self.await("B", "Alice wants to connect"))
            sleep 0.3
            echo c >&3
            \(Self.await("B", "Alice withdrew the invitation."))
            echo 1 >&3
            \(Self.await("A", "Bob did not answer."))
            \(Self.await("B", "Alice withdrew the invitation.", count: 2))
            echo q >&3
            """, tags: ["A", "B"])
        let alice = Self.output(result, "A")
        let bob = Self.output(result, "B")
        let all = result.lines.joined(separator: "\n")
        #expect(alice.contains("picker: Bob declined."), "\(all)")
        #expect(alice.contains("picker: Bob did not answer."), "\(all)")
        #expect(bob.filter { $0 == "picker: Alice wants to connect — [A]ccept / [D]ecline" }.count == 3, "\(all)")
        #expect(bob.filter { $0 == "picker: Alice withdrew the invitation." }.count == 2, "\(all)")
        #expect(!alice.contains { $0.hasPrefix("chat:") } && !bob.contains { $0.hasPrefix("chat:") }, "\(all)")
    }

    @Test func aRoomOfAServerAndTwoClientsChatsThroughTheServer() async throws {
        let result = try await Self.run(
            """
            \(Self.start("S", fd: 3, "--name Server --session-id chat-room --mode server"))
            \(Self.start("B", fd: 4, "--name Bob --session-id chat-room --mode client"))
            \(Self.start("C", fd: 5, "--name Carol --session-id chat-room --mode client"))
            \(Self.await("B", "list: 1) Server"))
            echo 1 >&4
            \(Self.await("B", "Connected to Server"))
            \(Self.await("C", "list: 1) Server"))
            echo 1 >&5
            \(Self.await("C", "Connected to Server"))
            \(Self.await("B", "Carol joined"))
            echo "bob here" >&4
            \(Self.await("C", "Bob: bob here"))
            echo "carol here" >&5
            \(Self.await("B", "Carol: carol here"))
            echo "server here" >&3
            \(Self.await("B", "Server: server here"))
            \(Self.await("C", "Server: server here"))
            echo /quit >&3
            """, tags: ["S", "B", "C"])
        let server = Self.output(result, "S")
        let bob = Self.output(result, "B")
        let carol = Self.output(result, "C")
        let all = result.lines.joined(separator: "\n")
        #expect(server.contains("chat: Bob: bob here") && server.contains("chat: Carol: carol here"), "\(all)")
        #expect(bob.contains("chat: Carol: carol here") && bob.contains("chat: Server: server here"), "\(all)")
        #expect(carol.contains("chat: Bob: bob here") && carol.contains("chat: Server: server here"), "\(all)")
    }
}
