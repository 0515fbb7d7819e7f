import Crypto
import NIOCore
import Testing

@testable import GameKitTraversal

/// The STUN codec against RFC 5769's test vectors, and against hostile input.
@Suite("STUN codec")
struct STUNCodecTests {
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    // RFC 5769 §2.1: a binding request with short-term credentials.
    static let sampleRequest = bytes("""
        000100582112a442b7e7a701bc34d686fa87dfae802200105354554e20746573742063
        6c69656e74002400046e0001ff80290008932ff9b151263b36000600096576746a3a68
        367659202020000800149aeaa70cbfd8cb56781ef2b5b2d3f249c1b571a280280004e5
        7a3bcf
        """)
    // RFC 5769 §2.2: its IPv4 answer, mapped address 192.0.2.1:32853.
    static let sampleIPv4Response = bytes("""
        0101003c2112a442b7e7a701bc34d686fa87dfae8022000b7465737420766563746f72
        20002000080001a147e112a643000800142b91f599fd9e90c38c7489f92af9ba53f06b
        e7d780280004c07d4c96
        """)
    // RFC 5769 §2.3: the IPv6 answer, 2001:db8:1234:5678:11:2233:4455:6677 port 32853.
    static let sampleIPv6Response = bytes("""
        010100482112a442b7e7a701bc34d686fa87dfae8022000b7465737420766563746f72
        20002000140002a1470113a9faa5d3f179bc25f4b5bed2b9d900080014a382954e4be6
        7bf11784c97c8292c275bfe3ed4180280004c8fb0b4c
        """)
    // RFC 5769 §2.4: a request with long-term credentials.
    static let sampleLongTermRequest = bytes("""
        000100602112a44278ad3433c6ad72c029da412e00060012e3839ee38388e383aae383
        83e382afe382b900000015001c662f2f3439396b39353464364f4c33346f4c39465354
        7679363473410014000b6578616d706c652e6f72670000080014f67024656dd64a3e02
        b8e0712e85c9a28ca89666
        """)
    static let password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)

    /// The attributes other than MESSAGE-INTEGRITY and FINGERPRINT (which cover padding bytes).
    static func body(_ message: STUNMessage) -> [STUNAttribute] {
        message.attributes.filter { $0.type != STUNAttribute.Kind.messageIntegrity.rawValue && $0.type != STUNAttribute.Kind.fingerprint.rawValue }
    }

    @Test("Addresses: IPv4-mapped IPv6 is the IPv4 address it maps; loopback, link-local and wildcard are told apart")
    func addressesFromSockets() throws {
        let mapped = try SocketAddress(ipAddress: "::ffff:192.0.2.7", port: 4000)
        #expect(TraversalAddress(mapped) == TraversalAddress("192.0.2.7", port: 4000))
        #expect(TraversalAddress(mapped)?.isIPv4 == true)
        let v6 = try #require(TraversalAddress(try SocketAddress(ipAddress: "2001:db8::7", port: 4000)))
        #expect(!v6.isIPv4 && v6.bytes.count == 16 && !v6.isLoopback && !v6.isLinkLocal)
        #expect(TraversalAddress("::1", port: 1)?.isLoopback == true && TraversalAddress("127.0.0.9", port: 1)?.isLoopback == true)
        #expect(TraversalAddress("fe80::1", port: 1)?.isLinkLocal == true && TraversalAddress("fec0::1", port: 1)?.isLinkLocal == false)
        #expect(TraversalAddress("169.254.3.4", port: 1)?.isLinkLocal == true && TraversalAddress("169.253.3.4", port: 1)?.isLinkLocal == false)
        #expect(TraversalAddress("::", port: 1)?.isWildcard == true && TraversalAddress("0.0.0.1", port: 1)?.isWildcard == false)
        #expect(TraversalAddress("10.0.0.1", port: 1)?.isLoopback == false)
    }

    @Test("RFC 5769 request: attributes, integrity and fingerprint")
    func sampleRequestDecodes() throws {
        let decoded = try STUNMessage.decode(Self.sampleRequest)
        let message = decoded.message
        #expect(message.method == .binding && message.messageClass == .request)
        #expect(message.attribute(.software)?.stringValue == "STUN test client")
        #expect(message.attribute(.priority)?.uint32Value == 0x6E00_01FF)
        #expect(message.attribute(.iceControlled)?.uint64Value == 0x932F_F9B1_5126_3B36)
        #expect(message.attribute(.username)?.stringValue == "evtj:h6vY")
        #expect(decoded.hasValidIntegrity(key: Self.password))
        #expect(!decoded.hasValidIntegrity(key: Array("wrong".utf8)))
    }

    @Test("Re-encoding the request reproduces its integrity and fingerprint")
    func sampleRequestReencodes() throws {
        let message = try STUNMessage.decode(Self.sampleRequest).message
        let encoded = message.encoded(integrityKey: Self.password, fingerprint: true)
        // The vector pads USERNAME with spaces; the encoder pads with zeros, so compare after
        // re-decoding, and check integrity and fingerprint over the encoder's own bytes.
        let again = try STUNMessage.decode(encoded)
        #expect(Self.body(again.message) == Self.body(message))
        #expect(again.hasValidIntegrity(key: Self.password))
        #expect(encoded.count == Self.sampleRequest.count)
    }

    @Test("RFC 5769 responses: XOR-MAPPED-ADDRESS for IPv4 and IPv6")
    func sampleResponses() throws {
        let v4 = try STUNMessage.decode(Self.sampleIPv4Response)
        #expect(v4.message.messageClass == .success)
        #expect(v4.message.xorAddress(.xorMappedAddress) == TraversalAddress("192.0.2.1", port: 32853))
        #expect(v4.hasValidIntegrity(key: Self.password))
        // The vectors pad SOFTWARE with a space; re-encoded (zero padding) they still verify.
        let reencoded = try STUNMessage.decode(v4.message.encoded(integrityKey: Self.password, fingerprint: true))
        #expect(reencoded.hasValidIntegrity(key: Self.password) && Self.body(reencoded.message) == Self.body(v4.message))

        let v6 = try STUNMessage.decode(Self.sampleIPv6Response)
        #expect(v6.message.xorAddress(.xorMappedAddress) == TraversalAddress("2001:db8:1234:5678:11:2233:4455:6677", port: 32853))
        #expect(v6.hasValidIntegrity(key: Self.password))
    }

    @Test("RFC 5769 long-term credentials: MD5(username:realm:password) verifies")
    func longTermKey() throws {
        let decoded = try STUNMessage.decode(Self.sampleLongTermRequest)
        #expect(decoded.message.attribute(.realm)?.stringValue == "example.org")
        #expect(decoded.message.attribute(.nonce)?.stringValue == "f//499k954d6OL34oL9FSTvy64sA")
        let key = TURNClient.longTermKey(username: "\u{30DE}\u{30C8}\u{30EA}\u{30C3}\u{30AF}\u{30B9}", realm: "example.org", password: "TheMatrIX")
        #expect(decoded.hasValidIntegrity(key: key))
    }

    @Test("Message types interleave method and class bits")
    func messageTypes() {
        for method in [STUNMessage.Method.binding, .allocate, .refresh, .send, .data, .createPermission, .channelBind, .init(rawValue: 0xFFF)] {
            for messageClass in [STUNMessage.Class.request, .indication, .success, .error] {
                let message = STUNMessage(method, messageClass, transactionID: .init(repeating: 1, count: 12))
                let (m, c) = STUNMessage.split(messageType: message.messageType)
                #expect(m == method && c == messageClass)
            }
        }
        #expect(STUNMessage(.allocate, .error, transactionID: .init(repeating: 0, count: 12)).messageType == 0x0113)
        #expect(STUNMessage(.data, .indication, transactionID: .init(repeating: 0, count: 12)).messageType == 0x0017)
    }

    @Test("Hostile input is refused with a reason, never a crash")
    func hostileInput() {
        var request = Self.sampleRequest
        #expect(throws: STUNDecodingError.badLength) { try STUNMessage.decode(Array(request.dropLast(4))) }
        #expect(throws: STUNDecodingError.badLength) { try STUNMessage.decode(Array(request[..<10])) }
        request[4] = 0
        #expect(throws: STUNDecodingError.notSTUN) { try STUNMessage.decode(request) }
        // A flipped bit in the body breaks the fingerprint.
        var flipped = Self.sampleRequest
        flipped[30] ^= 0x01
        #expect(throws: STUNDecodingError.badFingerprint) { try STUNMessage.decode(flipped) }
        // An attribute claiming more bytes than there are.
        var truncated = Array(Self.sampleRequest[..<24]) + [0, 0, 0, 0]
        truncated[3] = 8
        truncated[22] = 0xFF
        #expect(throws: STUNDecodingError.truncatedAttribute) { try STUNMessage.decode(truncated) }
        // Random bytes with a valid header shape.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let length = Int.random(in: 0...24, using: &generator) * 4
            var bytes = (0..<(20 + length)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            bytes[0] &= 0x3F
            bytes[2] = UInt8(length >> 8)
            bytes[3] = UInt8(length & 0xFF)
            bytes.replaceSubrange(4..<8, with: [0x21, 0x12, 0xA4, 0x42])
            if let decoded = try? STUNMessage.decode(bytes) {
                _ = decoded.hasValidIntegrity(key: Self.password)
                _ = decoded.message.xorAddress(.xorMappedAddress)
                _ = decoded.message.errorCode
            }
        }
    }

    @Test("Candidates round-trip their compact form; junk is refused")
    func candidates() {
        let candidates = [
            ICECandidate(kind: .host, address: TraversalAddress("192.168.1.2", port: 5000)!),
            ICECandidate(kind: .serverReflexive, address: TraversalAddress("203.0.113.9", port: 61000)!),
            ICECandidate(kind: .relayed, address: TraversalAddress("2001:db8::5", port: 49152)!, priority: 7),
        ]
        var bytes: [UInt8] = []
        for candidate in candidates { candidate.encode(into: &bytes) }
        var offset = 0
        var decoded: [ICECandidate] = []
        while let candidate = ICECandidate.decode(bytes, at: &offset) { decoded.append(candidate) }
        #expect(decoded == candidates && offset == bytes.count)
        #expect(candidates[0].priority > candidates[1].priority)
        var zeroPort = 0
        #expect(ICECandidate.decode([0, 4, 0, 0, 0, 0, 0, 1, 10, 0, 0, 1], at: &zeroPort) == nil)
        var badFamily = 0
        #expect(ICECandidate.decode([0, 5, 0, 1, 0, 0, 0, 1, 10, 0, 0, 1], at: &badFamily) == nil)
        var short = 0
        #expect(ICECandidate.decode([0, 6, 0, 1, 0, 0, 0, 1, 10, 0, 0, 1], at: &short) == nil)
    }
}
