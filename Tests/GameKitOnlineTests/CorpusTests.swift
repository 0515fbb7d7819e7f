import Foundation
import NIOCore
import Testing

@testable import GameKitOnline

/// The fuzzing seeds of the online harness are written by an independent Python encoder from
/// PROTOCOL §18 (Fuzz/make-message-corpus.py): the Swift decoders must read each one back.
@Suite("Online messages from the independent encoder")
struct CorpusTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/Corpus/online").standardized

    static func seed(_ name: String) throws -> ByteBuffer {
        let data = try Data(contentsOf: Self.folder.appendingPathComponent(name))
        return ByteBuffer(bytes: data.dropFirst())  // the harness's selector byte
    }

    @Test(arguments: ["create", "join", "refresh", "leave", "fetch", "update", "room", "roster", "member", "refused", "left"])
    func rendezvousSeedsDecode(name: String) throws {
        let message = try RendezvousMessage.decode(try Self.seed(name))
        #expect(message.encoded == (try Self.seed(name)))
    }

    @Test(arguments: ["allocate", "allocated", "relay-refused", "relay-data"])
    func relaySeedsDecode(name: String) throws {
        let message = try RelayMessage.decode(try Self.seed(name))
        #expect(message.encoded == (try Self.seed(name)))
    }

    @Test func theRecordReadsAsWritten() throws {
        guard case .member(_, _, let record) = try RendezvousMessage.decode(try Self.seed("member")) else {
            Issue.record("not a member")
            return
        }
        #expect(record.peerID == 42 && record.displayName == "Zoë" && record.isVisible && !record.isBusy)
        #expect(record.candidates.map(\.address) == [try SocketAddress(ipAddress: "10.1.2.3", port: 4000), try SocketAddress(ipAddress: "::1", port: 5000)])
        #expect(record.iceUfrag == "abcd")
    }
}
