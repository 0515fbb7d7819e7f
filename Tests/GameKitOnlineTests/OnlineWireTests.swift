import Crypto
import NIOCore
import Testing

@testable import GameKitOnline

@Suite("Rendezvous and relay wire formats")
struct OnlineWireTests {
    static let token = MemberToken(bytes: Array(0..<16))!
    static let room = RoomHandle(rawValue: 0x0102_0304_0506_0708)
    static let record = MemberRecord(
        peerID: 42, version: 3, displayName: "Zoë's laptop", keyShare: Array(repeating: 7, count: 32), isVisible: true, isBusy: true,
        candidates: [
            .init(kind: .host, address: try! SocketAddress(ipAddress: "10.1.2.3", port: 4000)),
            .init(kind: .serverReflexive, address: try! SocketAddress(ipAddress: "2001:db8::1", port: 5000)),
        ], iceUfrag: "abcdefgh", icePassword: "0123456789abcdefghijklmn")

    static let messages: [RendezvousMessage] = [
        .create(request: 1, sessionKey: 9, holderKey: Array(repeating: 1, count: 32), record: record),
        .join(request: 2, sessionKey: 9, code: RoomCode("ABC-123")!, holderKey: Array(repeating: 2, count: 32), record: record),
        .refresh(request: 3, room: room, token: token, rosterVersion: 77, wantsTicket: true),
        .leave(request: 4, room: room, token: token),
        .fetch(request: 5, room: room, token: token, peerID: 42),
        .update(request: 6, room: room, token: token, record: record),
        .room(request: 7, code: RoomCode("XYZ-789")!, room: room, token: token, memberTimeoutSeconds: 10,
              relay: try! SocketAddress(ipAddress: "192.0.2.9", port: 7879), ticket: Array(repeating: 3, count: RelayTicket.size)),
        .room(request: 7, code: RoomCode("XYZ-789")!, room: room, token: token, memberTimeoutSeconds: 10, relay: nil, ticket: []),
        .roster(request: 8, room: room, version: 5, relay: try! SocketAddress(ipAddress: "192.0.2.9", port: 7879), members: [.init(peerID: 1, version: 1), .init(peerID: 42, version: 3)], ticket: []),
        .member(request: 9, room: room, record: record),
        .refused(request: 10, reason: .rateLimited, retryAfterMilliseconds: 10_000),
        .left(request: 11, room: room),
    ]

    @Test("Every rendezvous message reads back as written")
    func rendezvousMessagesRoundTrip() throws {
        for message in Self.messages {
            #expect(try RendezvousMessage.decode(message.encoded) == message)
        }
    }

    @Test("Registrations are padded, so no answer is larger than its request")
    func registrationsArePadded() throws {
        for message in Self.messages.prefix(2) {
            #expect(message.encoded.readableBytes == RendezvousMessage.registrationSize)
        }
        let biggestAnswer = Self.messages.filter { if case .room = $0 { true } else { false } }.map(\.encoded.readableBytes).max()!
        #expect(biggestAnswer <= RendezvousMessage.registrationSize)
        // Unpadded (cut) or with non-zero padding: refused.
        var cut = Self.messages[0].encoded
        cut.moveWriterIndex(to: cut.writerIndex - 1)
        #expect(throws: OnlineDecodingError.self) { try RendezvousMessage.decode(cut) }
        var dirty = Self.messages[0].encoded
        dirty.setInteger(UInt8(1), at: dirty.writerIndex - 1)
        #expect(throws: OnlineDecodingError.self) { try RendezvousMessage.decode(dirty) }
    }

    @Test("Every truncation and an extra byte are refused, never crash")
    func truncationsAreRefused() {
        for message in Self.messages {
            let bytes = message.encoded
            for length in 0..<bytes.readableBytes {
                #expect(throws: OnlineDecodingError.self) { try RendezvousMessage.decode(bytes.getSlice(at: 0, length: length)!) }
            }
            guard case .refresh = message else { continue }
            var longer = bytes
            longer.writeInteger(UInt8(0))
            #expect(throws: OnlineDecodingError.self) { try RendezvousMessage.decode(longer) }
        }
    }

    @Test("Unknown kinds, bad codes, too many candidates and long names are refused")
    func badFieldsAreRefused() throws {
        var unknown = Self.messages[3].encoded
        unknown.setInteger(UInt8(99), at: 1)
        #expect(throws: OnlineDecodingError.unknownKind(99)) { try RendezvousMessage.decode(unknown) }
        var badCode = Self.messages[1].encoded
        badCode.setInteger(UInt32(1 << 30), at: 18)
        #expect(throws: OnlineDecodingError.self) { try RendezvousMessage.decode(badCode) }
        var record = Self.record
        record.candidates = Array(repeating: record.candidates[0], count: 9)
        record.displayName = String(repeating: "é", count: 80)
        record.iceUfrag = String(repeating: "u", count: 40)
        // Written cut to the limits: eight candidates, a name of at most 100 bytes, whole characters.
        let decoded = try RendezvousMessage.decode(RendezvousMessage.member(request: 1, room: Self.room, record: record).encoded)
        guard case .member(_, _, let read) = decoded else { Issue.record("not a member"); return }
        #expect(read.candidates.count == MemberRecord.maximumCandidates)
        #expect(read.displayName == String(repeating: "é", count: 50))
        #expect(read.iceUfrag.count == MemberRecord.maximumUfragBytes)
        // The largest record still fits a registration, which is then not padded further.
        var largest = record
        largest.candidates = Array(repeating: .init(kind: .host, address: try SocketAddress(ipAddress: "2001:db8::1", port: 1)), count: 8)
        largest.icePassword = String(repeating: "p", count: 64)
        let registration = RendezvousMessage.join(request: 1, sessionKey: 2, code: RoomCode(value: 3)!, holderKey: Array(repeating: 0, count: 32), record: largest)
        #expect(registration.encoded.readableBytes == RendezvousMessage.registrationSize)
    }

    @Test("Relay messages read back; relayed datagrams keep their payload")
    func relayMessagesRoundTrip() throws {
        let key = Curve25519.Signing.PrivateKey()
        let messages: [RelayMessage] = [
            try .allocation(ticket: Array(repeating: 5, count: RelayTicket.size), timestampMilliseconds: 123, holder: key),
            .allocated(expiresInSeconds: 600, bytesLeft: 1 << 30),
            .refused(.expired),
            .data(peer: 42, payload: ByteBuffer(string: "opaque")),
        ]
        for message in messages {
            #expect(try RelayMessage.decode(message.encoded) == message)
            let bytes = message.encoded
            if case .data = message { continue }
            for length in 0..<bytes.readableBytes {
                #expect(throws: OnlineDecodingError.self) { try RelayMessage.decode(bytes.getSlice(at: 0, length: length)!) }
            }
        }
    }

    @Test("Member addresses stand for peer IDs in 100::/64 and nothing else does")
    func memberAddresses() throws {
        for peer: UInt32 in [0, 1, 42, .max] {
            #expect(MemberAddress.peer(of: MemberAddress.of(peer)) == peer)
        }
        #expect(MemberAddress.of(0x0A0B_0C0D).description.contains("100::a0b:c0d"))
        #expect(MemberAddress.peer(of: try SocketAddress(ipAddress: "10.0.0.1", port: 9)) == nil)
        #expect(MemberAddress.peer(of: try SocketAddress(ipAddress: "100:0:0:1::a", port: 9)) == nil)
        #expect(MemberAddress.peer(of: try SocketAddress(ipAddress: "2001:db8::a", port: 9)) == nil)
    }
}
