import Foundation
import NIOConcurrencyHelpers
import NetworkImpairment
import OpenGameKit
import Testing

/// The README's session example (ReadmeSessionExample.swift), run for real: two controllers find
/// each other, both connect at once (one request goes ahead), exchange a line each, clean up.
/// The delegate calls arrive on the main queue, Game Kit's default, which the test process runs.
/// Each wait is bounded (60 s) so a broken run ends; a busy machine takes seconds, not minutes.
@Suite("README session example")
struct ReadmeSessionExampleTests {
    static var root: URL { SandboxScript.packageRoot }

    @MainActor
    @Test func theExampleConnectsTwoPlayersWhoTalkAndCleanUp() async throws {
        try NetworkSandbox.requireIsolation()
        let heard = NIOLockedValueBox<[String]>([])
        let alice = GameController(name: "Alice")
        let bob = GameController(name: "Bob")
        alice.onMessage = { line in heard.withLockedValue { $0.append(line) } }
        bob.onMessage = { line in heard.withLockedValue { $0.append(line) } }
        for _ in 0..<2400 where alice.opponent == nil || bob.opponent == nil {
            try await Task.sleep(nanoseconds: 25_000_000)
        }
        #expect(alice.opponent == bob.session.peerID)
        #expect(bob.opponent == alice.session.peerID)
        alice.mySendDataToPeers("e4")
        bob.mySendDataToPeers("e5")
        for _ in 0..<2400 where heard.withLockedValue({ $0.count }) < 2 {
            try await Task.sleep(nanoseconds: 25_000_000)
        }
        #expect(Set(heard.withLockedValue { $0 }) == ["Alice: e4", "Bob: e5"])
        alice.cleanUp()
        for _ in 0..<2400 where bob.opponent != nil {
            try await Task.sleep(nanoseconds: 25_000_000)
        }
        #expect(bob.opponent == nil)
        bob.cleanUp()
        await alice.session.close()
        await bob.session.close()
    }
}
