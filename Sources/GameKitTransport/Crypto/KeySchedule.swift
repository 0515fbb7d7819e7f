import Crypto
import NIOCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The optional session password as key material for liveness probes (PROTOCOL §4.8), where it
/// is only ever mixed with a Diffie-Hellman secret of the two endpoints' static keys. The
/// handshake does not use it: it runs CPace on the password itself (``HandshakeSecret``).
struct PreSharedKey: Sendable {
    let key: SymmetricKey

    init(password: [UInt8]?) {
        let prk = HKDF<SHA256>.extract(
            inputKeyMaterial: SymmetricKey(data: password ?? []),
            salt: Array(KeySchedule.Label.preSharedKey.utf8)
        )
        self.key = SymmetricKey(data: prk)
    }
}

/// What a handshake's CPace run starts from: the generator the password gives. Computed once per
/// endpoint; without a password the password is the empty string, so that a side with one fails
/// cleanly against a side without.
struct HandshakeSecret: Sendable {
    /// CPace's channel identifier: binds a run to this protocol and its version.
    static let channel = Array("OpenGameKit transport v2".utf8)

    let generator: [UInt8]

    init(password: [UInt8]?) {
        self.generator = CPace.generator(password: password ?? [], channel: Self.channel, sessionID: [])
    }
}

/// Every key one handshake derives from its CPace key and transcript (PROTOCOL §4.2).
struct HandshakeKeys: Sendable {
    /// The responder's key confirmation: the tag of the challenge.
    var challenge: SymmetricKey
    /// Seals the initiator's request (and so confirms the initiator's key).
    var request: SymmetricKey
    /// Seals the responder's acceptance.
    var response: SymmetricKey
    /// Authenticates the initiator's cancel.
    var cancel: SymmetricKey
    var link: LinkKeys
}

/// The keys of one established link, one per direction.
struct LinkKeys: Sendable {
    var initiatorToResponder: SymmetricKey
    var responderToInitiator: SymmetricKey
    /// The link's verification code (PROTOCOL §4.9): 5 bytes both ends derive from the transcript.
    var verification: [UInt8] = []
}

/// Every key derivation of the protocol, in one place so that docs/PROTOCOL.md §4 can list them
/// against the code. All use HKDF-SHA256 (RFC 5869).
enum KeySchedule {
    enum Label {
        static let preSharedKey = "OpenGameKit v1 psk"
        static let handshake = "ogk2 handshake"
        static let liveness = "ogk1 liveness"
        static let verification = "ogk2 verification"
    }

    /// Bytes of a verification code.
    static let verificationSize = 5

    /// The verification code of a link (PROTOCOL §4.9): the first 40 bits of SHA-256 of a label
    /// and the transcript. Both ends show it; a party that ran a handshake with each of them in
    /// the other's name (a relay that interposes) leaves them with different transcripts, and so
    /// different codes, unless it matched 40 bits while the handshake waited.
    static func verificationCode(transcriptHash: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: Array(Label.verification.utf8) + transcriptHash).prefix(Self.verificationSize))
    }

    /// The key two endpoints share for liveness probes (PROTOCOL §4.8): from X25519 of their
    /// static liveness keys and the password, bound to both public keys (in byte order, so that
    /// both sides derive the same key).
    static func livenessKey(sharedSecret: SharedSecret, psk: PreSharedKey, publicKeys: ([UInt8], [UInt8])) -> SymmetricKey {
        let (first, second) = publicKeys.0.lexicographicallyPrecedes(publicKeys.1) ? publicKeys : (publicKeys.1, publicKeys.0)
        let salt = psk.key.withUnsafeBytes { Array($0) }
        return sharedSecret.hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: salt, sharedInfo: Array(Label.liveness.utf8) + first + second, outputByteCount: 32)
    }

    /// The transcript hash: SHA-256 over the initiation and the challenge, each without its last
    /// 16 bytes (`mac2`, the tag).
    static func transcriptHash(initiationHeader: ByteBuffer, challengeHeader: ByteBuffer) -> [UInt8] {
        var hasher = SHA256()
        initiationHeader.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        challengeHeader.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        return Array(hasher.finalize())
    }

    /// The handshake's keys: HKDF-SHA256 with CPace's intermediate session key as input, the
    /// transcript hash as salt.
    static func handshakeKeys(intermediateKey: [UInt8], transcriptHash: [UInt8]) -> HandshakeKeys {
        let okm = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: intermediateKey),
            salt: transcriptHash,
            info: Array(Label.handshake.utf8),
            outputByteCount: 192
        )
        return okm.withUnsafeBytes { bytes in
            HandshakeKeys(
                challenge: SymmetricKey(data: bytes[0..<32]),
                request: SymmetricKey(data: bytes[32..<64]),
                response: SymmetricKey(data: bytes[64..<96]),
                cancel: SymmetricKey(data: bytes[96..<128]),
                link: LinkKeys(
                    initiatorToResponder: SymmetricKey(data: bytes[128..<160]),
                    responderToInitiator: SymmetricKey(data: bytes[160..<192]),
                    verification: Self.verificationCode(transcriptHash: transcriptHash)
                )
            )
        }
    }

    /// Both sides' half of a handshake's key derivation: CPace's key from `scalar` and the
    /// other's share, then ``handshakeKeys(intermediateKey:transcriptHash:)``. Nil when the
    /// other's share is not a group element or gives the identity (CPace's abort).
    static func handshakeKeys(
        scalar: [UInt8], peerShare: ByteBuffer, initiatorShare: ByteBuffer, responderShare: ByteBuffer,
        initiationHeader: ByteBuffer, challengeHeader: ByteBuffer
    ) -> HandshakeKeys? {
        guard let point = CPace.multiply(scalar, Array(buffer: peerShare)) else { return nil }
        let isk = CPace.intermediateKey(
            sessionID: [], sharedPoint: point,
            initiatorShare: Array(buffer: initiatorShare), initiatorData: [], responderShare: Array(buffer: responderShare), responderData: [])
        let transcript = Self.transcriptHash(initiationHeader: initiationHeader, challengeHeader: challengeHeader)
        return Self.handshakeKeys(intermediateKey: isk, transcriptHash: transcript)
    }

    /// X25519 with the peer's raw public key; nil when the key is malformed or the result is all
    /// zeros (a low-order point: the peer would not contribute to the secret), as WireGuard checks.
    static func agree(_ privateKey: Curve25519.KeyAgreement.PrivateKey, peerPublicKey: ByteBuffer) -> SharedSecret? {
        guard
            let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: Array(buffer: peerPublicKey)),
            let shared = try? privateKey.sharedSecretFromKeyAgreement(with: peer),
            shared.withUnsafeBytes({ $0.contains { $0 != 0 } })
        else { return nil }
        return shared
    }

    /// HMAC-SHA256 truncated to 16 bytes: mac2, cookies and cancel MACs.
    static func truncatedMAC(key: SymmetricKey, over message: ByteBuffer) -> [UInt8] {
        var mac = HMAC<SHA256>(key: key)
        message.withUnsafeReadableBytes { mac.update(data: $0) }
        return Array(mac.finalize().prefix(WireSize.mac))
    }

    /// Compares two MACs in time independent of where they differ.
    static func constantTimeEqual(_ lhs: ByteBuffer, _ rhs: [UInt8]) -> Bool {
        guard lhs.readableBytes == rhs.count else { return false }
        var difference: UInt8 = 0
        lhs.withUnsafeReadableBytes { bytes in
            for index in 0..<rhs.count { difference |= bytes[index] ^ rhs[index] }
        }
        return difference == 0
    }
}
