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
        static let initiationKey = "68923dcdbeb831c90bbf6aed629645ff2fc70a22786a3d34ab8b5a3e5c7f96f5"
        static let cancelKey = "203f40c0a6c0ecb0fc3ff277fa444dbdea907842bcab0788bea7ea90d7676cee"
        static let responseKey = "c495b1c4e5c13f5b68b8c4bf1a76fcaada18e203e5f913afc015517f52fc986d"
        static let initiatorToResponder = "3821e04b7c7b470e72c5bae690990465247fff3ed8a94040bd79ec540967899c"
        static let responderToInitiator = "e4fd3c00ba6caaa9445c7ef06187954928ec853b263a8cbab771f2eccf46311f"
        static let sealedPacket5 = "c9a6bd3190ea5c2cc528dbeef19d27f07ef15c3c9f98cd0bd3e681"
        static let truncatedMAC = "b04030fbf1408413d1d23995723584f5"
        static let livenessKey = "606713d6eb0e468bcf63c8cb3812f900b90a011983434db5bc9bab54a92e6dee"
        static let probe =
            "0a01000007a37cbc142093c8b755dc1b10e86cb426374ad16aa853ed0bdfc0b2b86d1c7c01020304050607086ee05ecd32428d808e9a12d77908a093"
        static let probeReply = "0b01000001020304050607086937d7f2506c3bfe5610f0b264705fd3"
        static let verification = "ba136a9b1a"
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
        let psk = PreSharedKey(password: Array("correct horse".utf8))
        let ephemeral = ByteBuffer(bytes: self.initiator.publicKey.rawRepresentation)
        #expect(Self.hex(self.initiator.publicKey.rawRepresentation) == Vector.initiatorPublic)
        #expect(Self.hex(KeySchedule.initiationKey(psk: psk, initiatorEphemeral: ephemeral)) == Vector.initiationKey)
        #expect(Self.hex(KeySchedule.cancelKey(psk: psk, initiatorEphemeral: ephemeral)) == Vector.cancelKey)
    }

    @Test func sessionKeysMatchTheVectors() throws {
        let psk = PreSharedKey(password: Array("correct horse".utf8))
        #expect(Self.hex(self.responder.publicKey.rawRepresentation) == Vector.responderPublic)
        let shared = try self.initiator.sharedSecretFromKeyAgreement(with: self.responder.publicKey)
        #expect(shared.withUnsafeBytes { Self.hex(Array($0)) } == Vector.shared)
        let transcript = KeySchedule.transcriptHash(
            initiationWithoutMAC: ByteBuffer(string: "initiation bytes"),
            responseHeader: ByteBuffer(string: "response header")
        )
        let (response, link) = KeySchedule.sessionKeys(sharedSecret: shared, psk: psk, transcriptHash: transcript)
        #expect(Self.hex(response) == Vector.responseKey)
        #expect(Self.hex(link.initiatorToResponder) == Vector.initiatorToResponder)
        #expect(Self.hex(link.responderToInitiator) == Vector.responderToInitiator)
        #expect(Self.hex(link.verification) == Vector.verification)
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
