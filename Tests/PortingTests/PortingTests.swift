import Foundation
import NetworkImpairment
import Testing

/// The lecture's two view controllers and the guide's snippets, ported as Tests/Porting shows,
/// run as the applications they were: one process per device, in the sandbox, each device named
/// by its own host name (a UTS namespace of its own), the picker answered on standard input as a
/// user would tap it. One device runs the Swift 6 build (gk-port), the other the Swift 5 build
/// (gk-port-swift5, started under the name gk-port, so that both are the same application with
/// the same default session ID, as two installs of one app).
@Suite("Game Kit code ported as written")
struct PortingTests {
    /// Bash: start `demo` of the build `binary` on the device `host`, as `tag`, reading the FIFO
    /// $d/<tag>.in (held open on descriptor `fd`, read-write so that opening it never waits for
    /// a device that did not start), writing $d/<tag>.
    static func device(_ tag: String, host: String, binary: String, _ demo: String, fd: Int) -> String {
        """
        mkfifo $d/\(tag).in
        exec \(fd)<>$d/\(tag).in
        unshare --uts sh -c "hostname \(host); exec \(binary) \(demo)" < $d/\(tag).in > $d/\(tag) 2>&1 &
        """
    }

    /// Bash: wait (at most 20 s) until the output of `tag` has `count` lines containing `text`.
    static func await(_ tag: String, _ text: String, count: Int = 1) -> String {
        SandboxScript.awaitText(text, in: "$d/\(tag)", count: count)
    }

    static func run(_ body: String, tags: [String]) async throws -> SandboxScript.Result {
        try await SandboxScript.run(
            """
            trap '' PIPE
            d=$(mktemp -d)
            ln -s "$(command -v gk-port-swift5)" $d/gk-port
            \(body)
            for pid in $(jobs -p); do kill $pid 2>/dev/null; done
            exec 3>&- 4>&- 2>/dev/null
            wait
            \(tags.map { "sed 's/^/\($0) /' $d/\($0)" }.joined(separator: "\n"))
            rm -rf $d
            """, timeout: 90)
    }

    /// What `tag` printed: its JSON lines, and every line.
    static func output(_ result: SandboxScript.Result, _ tag: String) -> (objects: [[String: Any]], lines: [String]) {
        (result.objects(tagged: tag), result.lines(tagged: tag))
    }

    /// The values a screen element showed, in order.
    static func shown(_ objects: [[String: Any]], _ element: String) -> [String] {
        objects.filter { $0["ui"] as? String == element }.compactMap { $0["text"] as? String }
    }

    @Test func theReferenceSymbolTableHoldsInBothLanguageModes() async throws {
        let result = try await SandboxScript.run("gk-port symbols | sed 's/^/6 /'; gk-port-swift5 symbols | sed 's/^/5 /'")
        for tag in ["6", "5"] {
            let table = try #require(result.objects(tagged: tag).first, "\(result.lines)")
            #expect(table["symbols"] as? Int == 108, "\(table)")
            #expect((table["failures"] as? [String])?.isEmpty == true, "\(table)")
        }
        #expect(result.status == 0)
    }

    @Test func aPickerMaskWithoutNearbyStopsTheProgramAsGameKitsExceptionDid() async throws {
        let result = try await SandboxScript.run("gk-port mask-without-nearby 2>&1; echo \"status $?\"")
        let all = result.lines.joined(separator: "\n")
        #expect(result.lines.contains { $0.contains("connectionTypesMask must include .nearby") }, "\(all)")
        #expect(!result.lines.contains { $0.contains("\"refused\":false") }, "\(all)")
        #expect(result.lines.last.map { $0.hasPrefix("status ") && $0 != "status 0" } == true, "\(all)")
    }

    @Test func theLecturesChatCrossesBetweenASwift6AndASwift5Build() async throws {
        let result = try await Self.run(
            """
            \(Self.device("A", host: "Alice", binary: "gk-port", "chat", fd: 3))
            \(Self.device("B", host: "Bob", binary: "$d/gk-port", "chat", fd: 4))
            \(Self.await("A", "list: 1) Bob"))
            echo 1 >&3
            \(Self.await("B", "Alice wants to connect"))
            echo a >&4
            \(Self.await("A", "\"picker\":\"hidden\""))
            \(Self.await("B", "\"picker\":\"hidden\""))
            echo "type Hi Bob, this is the Swift 6 build" >&3
            \(Self.await("B", "Alice: Hi Bob"))
            echo "type Hi Alice, Swift 5 here" >&4
            \(Self.await("A", "Bob: Hi Alice"))
            echo disconnect >&3
            \(Self.await("A", "\"picker\":\"shown\"", count: 2))
            \(Self.await("B", "\"picker\":\"shown\"", count: 2))
            """, tags: ["A", "B"])
        let alice = Self.output(result, "A")
        let bob = Self.output(result, "B")
        let all = result.lines.joined(separator: "\n")
        let conversation = "Alice: Hi Bob, this is the Swift 6 build\nBob: Hi Alice, Swift 5 here"
        #expect(Self.shown(alice.objects, "messagesView").last == conversation, "\(all)")
        #expect(Self.shown(bob.objects, "messagesView").last == conversation, "\(all)")
        // Every screen change was made on the main thread, as UIKit demands.
        let changes = alice.objects + bob.objects
        #expect(changes.count > 6 && changes.allSatisfy { $0["main"] as? Bool == true }, "\(all)")
        // Alice's disconnect (the lecture's button): Bob hears .stateDisconnected and, as the
        // lecture wrote, both are back in the picker.
        #expect(alice.objects.filter { $0["picker"] as? String == "shown" }.count == 2, "\(all)")
        #expect(bob.objects.filter { $0["picker"] as? String == "shown" }.count == 2, "\(all)")
        #expect(!all.contains("Fatal error"), "\(all)")
    }

    @Test func theLecturesVoiceChatStartsOnStateConnected() async throws {
        let result = try await Self.run(
            """
            \(Self.device("A", host: "Alice", binary: "gk-port", "voice", fd: 3))
            \(Self.device("B", host: "Bob", binary: "$d/gk-port", "voice", fd: 4))
            \(Self.await("A", "list: 1) Bob"))
            echo 1 >&3
            \(Self.await("B", "Alice wants to connect"))
            echo a >&4
            \(Self.await("A", "\"audio\":\"flowing\""))
            \(Self.await("B", "\"audio\":\"flowing\""))
            echo mute >&3
            echo "volume 0.25" >&4
            \(Self.await("A", "\"muted\":\"true\""))
            \(Self.await("B", "\"volume\":\"0.25\""))
            echo disconnect >&3
            \(Self.await("B", "Not Connected"))
            \(Self.await("B", "\"picker\":\"shown\"", count: 2))
            """, tags: ["A", "B"])
        let alice = Self.output(result, "A")
        let bob = Self.output(result, "B")
        let all = result.lines.joined(separator: "\n")
        // The voice chat started from session(_:peer:didChange:) with .stateConnected, which
        // reached the delegate each controller set when the picker handed it the session.
        #expect(Self.shown(alice.objects, "status").first == "Connected to Bob", "\(all)")
        #expect(Self.shown(bob.objects, "status").first == "Connected to Alice", "\(all)")
        let aliceVoice = alice.objects.compactMap { $0["voice"] as? [String: String] }
        let bobVoice = bob.objects.compactMap { $0["voice"] as? [String: String] }
        #expect(aliceVoice.contains { $0["audio"] == "flowing" && $0["path"] == "direct" }, "\(all)")
        #expect(bobVoice.contains { $0["audio"] == "flowing" && $0["path"] == "direct" }, "\(all)")
        // viewDidLoad's volume, then the switch and the slider.
        #expect(aliceVoice.first?["volume"] == "0.5", "\(all)")
        #expect(aliceVoice.contains { $0["muted"] == "true" }, "\(all)")
        #expect(bobVoice.contains { $0["volume"] == "0.25" }, "\(all)")
        // Alice's disconnect: Bob stops his chat and is back in the picker; nobody crashed.
        #expect(Self.shown(bob.objects, "status").last == "Not Connected", "\(all)")
        #expect((alice.objects + bob.objects).allSatisfy { $0["main"] as? Bool == true }, "\(all)")
        #expect(!all.contains("Fatal error"), "\(all)")
    }

    @Test func theGuidesSnippetsRunAsWritten() async throws {
        let result = try await Self.run(
            """
            \(Self.device("A", host: "Alice", binary: "gk-port", "guide", fd: 3))
            \(Self.device("B", host: "Bob", binary: "$d/gk-port", "guide", fd: 4))
            \(Self.await("A", "list: 1) Nearby, 2) Online"))
            \(Self.await("B", "list: 1) Nearby, 2) Online"))
            echo >&3
            echo >&4
            \(Self.await("A", "list: 1) Guide Bob"))
            echo 1 >&3
            \(Self.await("B", "Guide Alice wants to connect"))
            echo a >&4
            \(Self.await("A", "\"guideSession\":\"gk-port-guide\""))
            \(Self.await("B", "\"guideSession\":\"gk-port-guide\""))
            echo "send your move" >&3
            \(Self.await("B", "your move"))
            echo voice >&3
            echo voice >&4
            \(Self.await("A", "\"audio\":\"flowing\""))
            \(Self.await("B", "\"audio\":\"flowing\""))
            echo cleanup >&4
            \(Self.await("A", "\"guidePeers\":\"\"", count: 2))
            """, tags: ["A", "B"])
        let alice = Self.output(result, "A")
        let bob = Self.output(result, "B")
        let all = result.lines.joined(separator: "\n")
        // The picker asked for the connection type (the guide offers online too), used the
        // guide's own session from sessionForConnectionType, and handed it over connected.
        #expect(alice.lines.contains("picker: How do you want to connect?"), "\(all)")
        #expect(alice.objects.contains { $0["guideSession"] as? String == "gk-port-guide" }, "\(all)")
        #expect(bob.objects.contains { $0["guideReceived"] as? String == "your move" }, "\(all)")
        // Each side's delegate heard the other connect, then (after Bob's clean-up) leave.
        let alicePeers = alice.objects.compactMap { $0["guidePeers"] as? String }
        #expect(alicePeers.contains { !$0.isEmpty } && alicePeers.last == "", "\(all)")
        // "Adding Voice Chat": both sides attached their client and called; one chat resulted.
        #expect(alice.objects.compactMap { $0["voice"] as? [String: String] }.contains { $0["audio"] == "flowing" }, "\(all)")
        #expect(!all.contains("Fatal error"), "\(all)")
    }

    @Test func underDispatchMainTheDelegatesRunOnTheMainQueueButNotTheMainThread() async throws {
        // What the README says of dispatchMain() (and of an async main, which Swift runs the
        // same way on Linux): Game Kit's calls come on the main queue, one at a time, but Linux
        // serves that queue from another thread. RunLoop.main.run() is the way to the main
        // thread (the other tests).
        let result = try await Self.run(
            """
            \(Self.device("A", host: "Alice", binary: "gk-port", "chat --loop dispatch-main", fd: 3))
            \(Self.device("B", host: "Bob", binary: "gk-port", "chat --loop dispatch-main", fd: 4))
            \(Self.await("A", "list: 1) Bob"))
            echo 1 >&3
            \(Self.await("B", "Alice wants to connect"))
            echo a >&4
            \(Self.await("A", "\"picker\":\"hidden\""))
            echo "type over dispatchMain" >&3
            \(Self.await("B", "Alice: over dispatchMain"))
            """, tags: ["A", "B"])
        let all = result.lines.joined(separator: "\n")
        let bob = Self.output(result, "B")
        #expect(Self.shown(bob.objects, "messagesView").last == "Alice: over dispatchMain", "\(all)")
        let changes = Self.output(result, "A").objects + bob.objects
        #expect(!changes.isEmpty && changes.allSatisfy { $0["main"] as? Bool == false }, "\(all)")
    }
}
