import Crypto
import NIOCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The optional session password, turned into the key material every handshake key depends on.
///
/// Without a password the key is derived from the empty string, so the handshake still binds both
/// sides to "no password" and a side that has one fails cleanly against a side that has none.
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
        static let initiation = "ogk1 initiation"
        static let cancel = "ogk1 cancel"
        static let session = "ogk1 session"
        static let liveness = "ogk1 liveness"
        static let verification = "ogk1 verification"
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

    /// Seals the initiation's parameters and payload; proves the initiator holds the password.
    static func initiationKey(psk: PreSharedKey, initiatorEphemeral: ByteBuffer) -> SymmetricKey {
        HKDF<SHA256>.expand(
            pseudoRandomKey: psk.key,
            info: Array(Label.initiation.utf8) + Array(buffer: initiatorEphemeral),
            outputByteCount: 32
        )
    }

    /// Authenticates a cancel message for the initiation made with `initiatorEphemeral`.
    static func cancelKey(psk: PreSharedKey, initiatorEphemeral: ByteBuffer) -> SymmetricKey {
        HKDF<SHA256>.expand(
            pseudoRandomKey: psk.key,
            info: Array(Label.cancel.utf8) + Array(buffer: initiatorEphemeral),
            outputByteCount: 32
        )
    }

    /// The transcript hash: SHA-256 over the initiation (without mac2) and the response header.
    static func transcriptHash(initiationWithoutMAC: ByteBuffer, responseHeader: ByteBuffer) -> [UInt8] {
        var hasher = SHA256()
        initiationWithoutMAC.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        responseHeader.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        return Array(hasher.finalize())
    }

    /// The response key and both directions' packet keys, from the X25519 shared secret, the
    /// password and the transcript.
    static func sessionKeys(
        sharedSecret: SharedSecret,
        psk: PreSharedKey,
        transcriptHash: [UInt8]
    ) -> (response: SymmetricKey, link: LinkKeys) {
        let salt = psk.key.withUnsafeBytes { Array($0) }
        let okm = sharedSecret.hkdfDerivedSymmetricKey(
            using: SHA256.self,
            salt: salt,
            sharedInfo: Array(Label.session.utf8) + transcriptHash,
            outputByteCount: 96
        )
        return okm.withUnsafeBytes { bytes in
            (
                SymmetricKey(data: bytes[0..<32]),
                LinkKeys(
                    initiatorToResponder: SymmetricKey(data: bytes[32..<64]),
                    responderToInitiator: SymmetricKey(data: bytes[64..<96]),
                    verification: Self.verificationCode(transcriptHash: transcriptHash)
                )
            )
        }
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
