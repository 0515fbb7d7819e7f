import Foundation
import NetworkImpairment
import OpenGameKit
import Testing

/// The README's voice chat example (ReadmeVoiceExample.swift) is compiled with the tests and
/// shown in the README exactly as compiled.
@Suite("README voice chat example")
struct ReadmeVoiceExampleTests {
    @Test func theReadmeShowsTheExampleByteForByte() throws {
        let root = SandboxScript.packageRoot
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: root.appendingPathComponent("Tests/OpenGameKitVoiceTests/ReadmeVoiceExample.swift"), encoding: .utf8)
        let start = try #require(source.range(of: "// BEGIN README EXAMPLE\n"))
        let end = try #require(source.range(of: "// END README EXAMPLE"))
        let example = String(source[start.upperBound..<end.lowerBound])
        #expect(readme.contains("```swift\n" + example + "```"))
    }

    /// The example's client as a service sees it: its participant ID is the session's peer ID
    /// (no socket is opened: the session is never made available).
    @Test func theExampleClientNamesItsSessionsPeer() {
        let session: GKSession = GKSession(sessionID: "readme-voice", displayName: "Alice", sessionMode: .peer)
        let client = VoiceClient(session: session)
        #expect(client.participantID() == session.peerID)
    }
}
