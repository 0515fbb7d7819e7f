import Crypto
import NIOCore
import Testing

@testable import GameKitTransport

/// Fixed vectors computed by an independent implementation (scripts/key-vectors.py, pyca/cryptography).
@Suite("Key schedule")
struct KeyScheduleTests {
    enum Vector {
        static let psk = "23da55b5ab70301ee436c3ecb4e11389be211f920ea708d3334f1119faded7b8"
        static let pskEmpty = "6aed3a0dd052b575a7918b4faf540b9ba73cbdc4eb602aaf10fe81050504bac4"
        static let initiatorPublic = "07a37cbc142093c8b755dc1b10e86cb426374ad16aa853ed0bdfc0b2b86d1c7c"
        static let responderPublic = "5714769d116bf76436ae74bc793d2c30ad1903c59ac5273805c7e2698b410c36"
        static let shared = "c9ea6a3f79a000b60b076d4afc990b272f3f0b5aaa3f0b8713c209273e363863"
        static let challengeKey = "241a167a4c9496d48d4c773d38f91385d7515ec045b3225a87f514f3c86d6399"
        static let requestKey = "05c5d1e23a2569b5784779fb9b75a88f6564704bf7c2122aac81cc068aaeb78b"
        static let responseKey = "83365010cb6ab4db44fbe0aa17601782c786c74b20efc583219ff500c5e9051f"
        static let cancelKey = "b8330c1882e26471a3b6573f91fc89585b5ca74f25ccea94be92a5b4a5705bf7"
        static let initiatorToResponder = "e84ac7ad1cfe945b54e4c9cbf40c2a8d3943446440c24f9e13313d3d18e31f42"
        static let responderToInitiator = "d76079566e6f77515627fc28044b3fc2d03b321637709fff4a88b9ebff5d1c82"
        static let sealedPacket5 = "fd0c5298c3d00cc3e760c74070d4dd8c3450fdcb790e432036a3e9"
        static let truncatedMAC = "b04030fbf1408413d1d23995723584f5"
        static let livenessKey = "606713d6eb0e468bcf63c8cb3812f900b90a011983434db5bc9bab54a92e6dee"
        static let probe =
            "0a01000007a37cbc142093c8b755dc1b10e86cb426374ad16aa853ed0bdfc0b2b86d1c7c01020304050607086ee05ecd32428d808e9a12d77908a093"
        static let probeReply = "0b01000001020304050607086937d7f2506c3bfe5610f0b264705fd3"
        static let verification = "394ac3acbd"
    }

    static func hex(_ key: SymmetricKey) -> String { key.withUnsafeBytes { Self.hex(Array($0)) } }
    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
    }
    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return result
    }

    let initiator = try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: Array(1...32) as [UInt8])
    let responder = try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: Array(101...132) as [UInt8])

    @Test func preSharedKeyMatchesTheVector() {
        #expect(Self.hex(PreSharedKey(password: Array("correct horse".utf8)).key) == Vector.psk)
        #expect(Self.hex(PreSharedKey(password: nil).key) == Vector.pskEmpty)
        #expect(Self.hex(PreSharedKey(password: []).key) == Vector.pskEmpty)
    }

    @Test func handshakeKeysMatchTheVectors() {
        // CPace's intermediate session key: the draft's ristretto255 vector (CPaceTests).
        let transcript = KeySchedule.transcriptHash(
            initiationHeader: ByteBuffer(string: "initiation header"),
            challengeHeader: ByteBuffer(string: "challenge header")
        )
        let keys = KeySchedule.handshakeKeys(intermediateKey: Self.bytes(CPaceTests.Vector.intermediateKey), transcriptHash: transcript)
        #expect(Self.hex(keys.challenge) == Vector.challengeKey)
        #expect(Self.hex(keys.request) == Vector.requestKey)
        #expect(Self.hex(keys.response) == Vector.responseKey)
        #expect(Self.hex(keys.cancel) == Vector.cancelKey)
        #expect(Self.hex(keys.link.initiatorToResponder) == Vector.initiatorToResponder)
        #expect(Self.hex(keys.link.responderToInitiator) == Vector.responderToInitiator)
        #expect(Self.hex(keys.link.verification) == Vector.verification)
    }

    @Test func bothSidesOfACPaceRunDeriveTheSameKeysOnlyWithTheSamePassword() throws {
        let secret = HandshakeSecret(password: Array("correct horse".utf8))
        let (a, b) = (CPace.randomScalar(), CPace.randomScalar())
        let ya = ByteBuffer(bytes: try #require(CPace.multiply(a, secret.generator)))
        let yb = ByteBuffer(bytes: try #require(CPace.multiply(b, secret.generator)))
        let (first, second) = (ByteBuffer(string: "initiation"), ByteBuffer(string: "challenge"))
        let initiator = try #require(KeySchedule.handshakeKeys(
            scalar: a, peerShare: yb, initiatorShare: ya, responderShare: yb, initiationHeader: first, challengeHeader: second))
        let responder = try #require(KeySchedule.handshakeKeys(
            scalar: b, peerShare: ya, initiatorShare: ya, responderShare: yb, initiationHeader: first, challengeHeader: second))
        #expect(Self.hex(initiator.request) == Self.hex(responder.request))
        #expect(Self.hex(initiator.link.initiatorToResponder) == Self.hex(responder.link.initiatorToResponder))
        #expect(initiator.link.verification == responder.link.verification)
        // A responder with another password: its share comes from another generator.
        let other = HandshakeSecret(password: Array("correct horsE".utf8))
        let yc = ByteBuffer(bytes: try #require(CPace.multiply(b, other.generator)))
        let wrong = try #require(KeySchedule.handshakeKeys(
            scalar: b, peerShare: ya, initiatorShare: ya, responderShare: yc, initiationHeader: first, challengeHeader: second))
        let initiatorView = try #require(KeySchedule.handshakeKeys(
            scalar: a, peerShare: yc, initiatorShare: ya, responderShare: yc, initiationHeader: first, challengeHeader: second))
        #expect(Self.hex(wrong.request) != Self.hex(initiatorView.request))
        // A share that is not a group element aborts.
        #expect(KeySchedule.handshakeKeys(
            scalar: a, peerShare: ByteBuffer(repeating: 0, count: 32), initiatorShare: ya, responderShare: yb,
            initiationHeader: first, challengeHeader: second) == nil)
    }

    @Test func packetSealMatchesTheVectorAndOpens() throws {
        let key = SymmetricKey(data: Self.bytes(Vector.initiatorToResponder))
        let header = ByteBuffer(repeating: 0, count: 16)
        var sealed = ByteBuffer()
        AEAD.seal(ByteBuffer(string: "hello, link"), key: key, counter: 5, authenticating: header, into: &sealed)
        #expect(Self.hex(sealed.readableBytesView) == Vector.sealedPacket5)
        #expect(AEAD.open(sealed, key: key, counter: 5, authenticating: header) == ByteBuffer(string: "hello, link"))
        // Any other counter, header or key fails.
        #expect(AEAD.open(sealed, key: key, counter: 6, authenticating: header) == nil)
        #expect(AEAD.open(sealed, key: key, counter: 5, authenticating: ByteBuffer(repeating: 1, count: 16)) == nil)
        #expect(AEAD.open(sealed, key: SymmetricKey(size: .bits256), counter: 5, authenticating: header) == nil)
        #expect(AEAD.open(ByteBuffer(repeating: 0, count: 15), key: key, counter: 5, authenticating: header) == nil)
    }

    @Test func truncatedMACMatchesTheVectorAndComparesInConstantTimeShape() {
        let mac = KeySchedule.truncatedMAC(key: SymmetricKey(data: Array("0123456789abcdef".utf8)), over: ByteBuffer(string: "message"))
        #expect(Self.hex(mac) == Vector.truncatedMAC)
        #expect(KeySchedule.constantTimeEqual(ByteBuffer(bytes: mac), mac))
        var wrong = mac
        wrong[15] ^= 1
        #expect(!KeySchedule.constantTimeEqual(ByteBuffer(bytes: mac), wrong))
        #expect(!KeySchedule.constantTimeEqual(ByteBuffer(bytes: mac.prefix(15)), mac))
    }

    @Test func livenessKeyAndMessagesMatchTheVectors() throws {
        let psk = PreSharedKey(password: Array("correct horse".utf8))
        let shared = try self.initiator.sharedSecretFromKeyAgreement(with: self.responder.publicKey)
        let initiatorKey = Array(self.initiator.publicKey.rawRepresentation)
        let responderKey = Array(self.responder.publicKey.rawRepresentation)
        #expect(Self.hex(initiatorKey) == Vector.initiatorPublic && Self.hex(responderKey) == Vector.responderPublic)
        #expect(shared.withUnsafeBytes { Self.hex(Array($0)) } == Vector.shared)
        let key = KeySchedule.livenessKey(sharedSecret: shared, psk: psk, publicKeys: (initiatorKey, responderKey))
        #expect(Self.hex(key) == Vector.livenessKey)
        // The order of the two public keys does not matter: both ends derive the same key.
        #expect(Self.hex(KeySchedule.livenessKey(sharedSecret: shared, psk: psk, publicKeys: (responderKey, initiatorKey))) == Vector.livenessKey)
        let probe = LivenessMessage.probe(.init(proberKey: initiatorKey, nonce: 0x0102_0304_0506_0708), key: key)
        #expect(Self.hex(probe.readableBytesView) == Vector.probe)
        #expect(Self.hex(LivenessMessage.reply(nonce: 0x0102_0304_0506_0708, key: key).readableBytesView) == Vector.probeReply)
        // Another password gives another key.
        let other = KeySchedule.livenessKey(sharedSecret: shared, psk: PreSharedKey(password: nil), publicKeys: (initiatorKey, responderKey))
        #expect(Self.hex(other) != Vector.livenessKey)
    }

    @Test func cookiesDependOnTheSourceAddressAndSurviveOneRotation() throws {
        let start = NIODeadline.uptimeNanoseconds(0)
        var generator = CookieGenerator(now: start)
        let address = try SocketAddress(ipAddress: "10.1.2.3", port: 4000)
        let other = try SocketAddress(ipAddress: "10.1.2.3", port: 4001)
        let message = ByteBuffer(string: "initiation")
        let cookie = SymmetricKey(data: generator.cookie(for: address))
        let mac2 = ByteBuffer(bytes: KeySchedule.truncatedMAC(key: cookie, over: message))
        #expect(generator.isValid(mac2: mac2, message: message, from: address))
        #expect(!generator.isValid(mac2: mac2, message: message, from: other))
        #expect(!generator.isValid(mac2: mac2, message: ByteBuffer(string: "initiatioN"), from: address))
        generator.rotateIfNeeded(now: start + CookieGenerator.rotationInterval)
        #expect(generator.isValid(mac2: mac2, message: message, from: address))
        generator.rotateIfNeeded(now: start + CookieGenerator.rotationInterval * 2)
        #expect(!generator.isValid(mac2: mac2, message: message, from: address))
    }
}
