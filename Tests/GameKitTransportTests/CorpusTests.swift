import Foundation
import NIOCore
import Testing

@testable import GameKitTransport

/// The transport harness's seeds are written by an independent Python encoder from PROTOCOL §3
/// (Fuzz/make-corpus.py, with libsodium's ristretto255): a responder reads each as the seed's
/// name says, so the corpus reaches the handshake's deep paths (CPace, the wrong-password
/// reject) and does not rot when the wire changes, as the version-1 seeds once did.
@Suite("Transport handshake seeds from the independent encoder")
struct CorpusTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/Corpus").standardized
    static let source = try! SocketAddress(ipAddress: "10.0.0.2", port: 4000)

    /// The datagrams of a seed: one behind selector 0, or several each behind a 2-byte length
    /// behind selector 2 (the harness's framing).
    static func datagrams(_ name: String) throws -> [ByteBuffer] {
        let data = try Data(contentsOf: Self.folder.appendingPathComponent(name))
        let rest = Array(data.dropFirst())
        switch data.first {
        case 0: return [ByteBuffer(bytes: rest)]
        case 2:
            var datagrams: [ByteBuffer] = []
            var start = 0
            while rest.count - start >= 2 {
                let length = Int(rest[start]) << 8 | Int(rest[start + 1])
                let end = min(start + 2 + length, rest.count)
                datagrams.append(ByteBuffer(bytes: rest[(start + 2)..<end]))
                start = end
            }
            return datagrams
        default: return []
        }
    }

    /// A responder fed the seed's datagrams; its statistics and what it sent.
    static func feed(_ name: String) throws -> (EndpointStatistics, [ByteBuffer]) {
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var machine = try EndpointMachine(configuration: TransportConfiguration(), now: now)
        var sent: [ByteBuffer] = []
        for datagram in try Self.datagrams(name) {
            machine.handle(datagram: datagram, from: Self.source, now: now)
            var buffer = ByteBuffer()
            while machine.pollTransmit(now: now, into: &buffer) != nil {
                sent.append(buffer)
                buffer = ByteBuffer()
            }
        }
        return (machine.endpointStatistics, sent)
    }

    static func type(_ datagram: ByteBuffer) -> (UInt8, UInt8)? {
        guard let type = datagram.getInteger(at: datagram.readerIndex, as: UInt8.self),
            let kind = datagram.getInteger(at: datagram.readerIndex + 2, as: UInt8.self)
        else { return nil }
        return (type, kind)
    }

    @Test(arguments: ["recv-initiation-valid", "recv-initiation-valid-mac2"])
    func aRealInitiationIsChallenged(name: String) throws {
        let (statistics, sent) = try Self.feed(name)
        #expect(statistics.challengesSent == 1)
        let kind = sent.first.flatMap(Self.type)
        #expect(sent.count == 1 && kind?.0 == 5 && kind?.1 == 0 && sent.first?.readableBytes == ChallengeMessage.size)
    }

    @Test(arguments: ["recv-initiation-identity", "recv-initiation-not-an-element", "recv-initiation-nonzero-padding", "recv-initiation-truncated"])
    func aBrokenInitiationGetsNothing(name: String) throws {
        let (statistics, sent) = try Self.feed(name)
        #expect(sent.isEmpty && statistics.challengesSent == 0)
        #expect(statistics.droppedMalformed == 1)
    }

    @Test(arguments: ["recv-initiation-version-1", "recv-initiation-version-3"])
    func anotherVersionIsToldOurs(name: String) throws {
        let (statistics, sent) = try Self.feed(name)
        #expect(statistics.unsupportedVersions == 1)
        #expect(sent.count == 1 && sent.first.flatMap(Self.type)?.0 == PacketType.reject.rawValue)
    }

    /// A request that does not open under its challenge's keys: the handshake fails as a wrong
    /// password would (one reject, a guess spent), and the repeat gets the same reject.
    @Test func aRequestAfterItsInitiationFailsAsAWrongPassword() throws {
        let (statistics, sent) = try Self.feed("seq-initiation-request")
        #expect(statistics.challengesSent == 1 && statistics.handshakeAuthenticationFailures == 1)
        let rejects = sent.filter { Self.type($0)?.0 == PacketType.reject.rawValue }
        #expect(rejects.count == 2 && Set(rejects).count == 1)
    }

    @Test func aRepeatIsChallengedAgainAndAnotherShareOnTheSameIndexIsDropped() throws {
        let (repeatStatistics, repeated) = try Self.feed("seq-initiation-repeat")
        #expect(repeatStatistics.challengesSent == 1 && repeated.count == 2 && repeated[0] == repeated[1])
        let (otherStatistics, _) = try Self.feed("seq-initiation-other-share")
        #expect(otherStatistics.challengesSent == 1 && otherStatistics.droppedStrayHandshake == 1)
    }
}
