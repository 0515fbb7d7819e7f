import NIOCore
import Testing

@testable import OpenGameKit

@Suite("Session wire: handshake payloads and link messages")
struct SessionWireTests {
    @Test func aHelloRoundTripsAndIsPaddedToLeaveRoomForAnyWelcome() throws {
        let hello = SessionHello(sessionKey: SessionHello.sessionKey(for: "chess"), peerID: 4_294_967_295, mode: 2, attempt: 0xDEAD_BEEF, displayName: "Alice")
        let bytes = hello.encode()
        #expect(bytes.readableBytes == SessionHello.paddedSize)
        #expect(bytes.getInteger(at: 14, as: UInt32.self) == 0xDEAD_BEEF)  // after version, key, peer ID, mode
        let longestHello = SessionHello(sessionKey: 1, peerID: 1, mode: 2, attempt: 1, displayName: String(repeating: "x", count: 300))
        #expect(longestHello.encode().readableBytes == SessionHello.paddedSize)
        #expect(SessionWelcome.maximumSize <= SessionHello.paddedSize)
        #expect(try SessionHello.decode(bytes) == hello)
        let longest = SessionWelcome(peerID: 1, displayName: String(repeating: "é", count: 200))
        #expect(longest.encode().readableBytes <= SessionWelcome.maximumSize)
        #expect(try SessionWelcome.decode(longest.encode()).displayName == String(repeating: "é", count: 127))
    }

    /// A data message built from the application's bytes with its kind in front is the same
    /// bytes as one encoded the ordinary way, and shares the payload's storage (no copy); any
    /// other payload is encoded by copying.
    @Test(arguments: [[], [0], [1, 2, 3], Array(repeating: 0xAB, count: 1_500)] as [[UInt8]])
    func aDataMessageIsEncodedWithoutCopyingItsPayload(bytes: [UInt8]) throws {
        let payload = SessionMessage.dataPayload(copying: bytes)
        #expect(Array(payload.readableBytesView) == bytes)
        let framed = SessionMessage.encodedData(payload)
        #expect(framed == SessionMessage.data(ByteBuffer(bytes: bytes)).encode())
        #expect(try SessionMessage.decode(framed) == .data(ByteBuffer(bytes: bytes)))
        let shared = framed.withVeryUnsafeBytes { $0.baseAddress } == payload.withVeryUnsafeBytes { $0.baseAddress }
        #expect(shared, "the payload was copied")
        // A payload with something else in front of it (here a 7) is encoded by copying.
        var other = ByteBuffer(bytes: [7] + bytes)
        other.moveReaderIndex(forwardBy: 1)
        #expect(SessionMessage.encodedData(other) == SessionMessage.data(ByteBuffer(bytes: bytes)).encode())
    }

    @Test func theSessionKeyIsTheFirstEightBytesOfSHA256() {
        // python3 -c "import hashlib; print(hashlib.sha256(b'chess').hexdigest()[:16])"
        #expect(SessionHello.sessionKey(for: "chess") == 0xAC73_9DCC_D121_F712)
        #expect(SessionHello.sessionKey(for: "chess") != SessionHello.sessionKey(for: "Chess"))
    }

    @Test func everyLinkMessageRoundTrips() throws {
        let messages: [SessionMessage] = [
            .data(ByteBuffer(string: "hello")),
            .data(ByteBuffer()),
            .roster([SessionPeerEntry(peerID: 1, displayName: "Bob"), SessionPeerEntry(peerID: 2, displayName: "")]),
            .roster([]),
            .joined(SessionPeerEntry(peerID: 7, displayName: "Carol")),
            .left(peerID: 7),
            .relay(to: [1, 2, 3], data: ByteBuffer(string: "move e4")),
            .relayed(from: 9, data: ByteBuffer(string: "move e5")),
            .drop(peerID: 42),
            .channel(SessionChannel.groupVoice, ByteBuffer(bytes: [0x14, 1, 2])),
            .channelRelay(to: [1, 2], channel: 200, data: ByteBuffer(string: "voice")),
            .channelRelayed(from: 9, channel: 1, data: ByteBuffer()),
        ]
        for message in messages {
            #expect(try SessionMessage.decode(message.encode()) == message)
        }
        #expect(SessionMessage.data(ByteBuffer(string: "x")).encode().readableBytes == 2)  // one byte of overhead
    }

    @Test func malformedInputIsRejectedWithItsReason() {
        #expect(throws: SessionWireError.truncated) { try SessionMessage.decode(ByteBuffer()) }
        #expect(throws: SessionWireError.unknownType(99)) { try SessionMessage.decode(ByteBuffer(bytes: [99])) }
        #expect(throws: SessionWireError.truncated) { try SessionMessage.decode(ByteBuffer(bytes: [3, 0, 0])) }
        #expect(throws: SessionWireError.tooManyPeers(65535)) { try SessionMessage.decode(ByteBuffer(bytes: [1, 0xFF, 0xFF])) }
        #expect(throws: SessionWireError.truncated) { try SessionMessage.decode(ByteBuffer(bytes: [4, 0, 3, 0, 0, 0, 1])) }
        #expect(throws: SessionWireError.truncated) { try SessionMessage.decode(ByteBuffer(bytes: [2, 0, 0, 0, 1, 10, 65])) }
        // Channel messages: the application's channel (0) has messages of its own.
        #expect(throws: SessionWireError.invalidChannel) { try SessionMessage.decode(ByteBuffer(bytes: [7, 0, 1])) }
        #expect(throws: SessionWireError.invalidChannel) { try SessionMessage.decode(ByteBuffer(bytes: [8, 0, 0, 0])) }
        #expect(throws: SessionWireError.truncated) { try SessionMessage.decode(ByteBuffer(bytes: [7])) }
        #expect(throws: SessionWireError.truncated) { try SessionMessage.decode(ByteBuffer(bytes: [8, 1, 0, 2, 0, 0, 0, 1])) }
        #expect(throws: SessionWireError.tooManyPeers(2000)) { try SessionMessage.decode(ByteBuffer(bytes: [8, 1, 0x07, 0xD0])) }
        #expect(throws: SessionWireError.truncated) { try SessionMessage.decode(ByteBuffer(bytes: [9, 1, 0, 0])) }
        #expect(throws: SessionWireError.unknownType(10)) { try SessionMessage.decode(ByteBuffer(bytes: [10])) }
        #expect(throws: SessionWireError.unsupportedVersion(2)) { try SessionHello.decode(ByteBuffer(bytes: [2] + [UInt8](repeating: 0, count: 20))) }
        #expect(throws: SessionWireError.truncated) { try SessionHello.decode(ByteBuffer(bytes: [1, 0, 0])) }
        #expect(throws: SessionWireError.truncated) { try SessionWelcome.decode(ByteBuffer(bytes: [1, 0, 0, 0, 1, 5, 65])) }
    }

    /// Found by Fuzz/Sources/SessionWireFuzzer: invalid UTF-8 grows when read (each bad byte
    /// becomes a 3-byte U+FFFD), so a 255-byte name read from one peer was cut when written on to
    /// others, who then saw another name than the server did.
    @Test func aNameOfInvalidUTF8IsReadAsItWillBeWrittenOn() throws {
        let name: [UInt8] = [0xFF, 0xFF, 0xFF] + Array(repeating: UInt8(ascii: "n"), count: 252)
        var bytes: [UInt8] = [1, 0, 0, 0, 9, UInt8(name.count)] + name
        let welcome = try SessionWelcome.decode(ByteBuffer(bytes: bytes))
        #expect(welcome.displayName.utf8.count <= 255)
        #expect(welcome.displayName.hasPrefix("\u{FFFD}\u{FFFD}\u{FFFD}nnn"))
        #expect(try SessionWelcome.decode(welcome.encode()) == welcome)
        bytes[0] = SessionMessage.Kind.joined.rawValue
        let joined = try SessionMessage.decode(ByteBuffer(bytes: bytes))
        #expect(try SessionMessage.decode(joined.encode()) == joined)
    }

    @Test func randomBytesNeverCrashTheDecoders() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        for _ in 0..<20_000 {
            let count = Int(next() % 64)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
            let buffer = ByteBuffer(bytes: bytes)
            if let message = try? SessionMessage.decode(buffer) {
                #expect((try? SessionMessage.decode(message.encode())) == message)
            }
            _ = try? SessionHello.decode(buffer)
            _ = try? SessionWelcome.decode(buffer)
        }
    }

    @Test func denyReasonsHaveStableCodes() {
        #expect(SessionDenyReason.allCases.map(\.rawValue) == [1, 2, 3, 4, 5, 6, 7, 8])
    }
}
