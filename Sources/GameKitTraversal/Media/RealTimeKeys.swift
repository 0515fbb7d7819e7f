import Crypto

/// One side's ephemeral X25519 key for a real-time connection. Each side sends its
/// ``publicKeyBytes`` in the call signalling; both then derive the same ``RealTimeKeys``.
public struct RealTimeKeyExchange: Sendable {
    private let privateKey = Curve25519.KeyAgreement.PrivateKey()

    /// A fresh key pair.
    public init() {}

    /// The 32-byte public key to send to the other side.
    public var publicKeyBytes: [UInt8] { Array(self.privateKey.publicKey.rawRepresentation) }

    /// Derives the connection's keys from the other side's public key. `isInitiator` tells the
    /// two directions apart; `context` (e.g. a call ID) binds the keys to one call. Throws
    /// ``RealTimeError/invalidKeyShare`` for a key that is not a valid X25519 point.
    public func keys(remotePublicKey: [UInt8], isInitiator: Bool, context: [UInt8]) throws(RealTimeError) -> RealTimeKeys {
        guard remotePublicKey.count == 32,
            let remote = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: remotePublicKey),
            let shared = try? self.privateKey.sharedSecretFromKeyAgreement(with: remote)
        else { throw .invalidKeyShare }
        let (initiatorKey, responderKey) = isInitiator ? (self.publicKeyBytes, remotePublicKey) : (remotePublicKey, self.publicKeyBytes)
        let material = shared.hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: Array(RealTimeKeys.label.utf8), sharedInfo: context + initiatorKey + responderKey, outputByteCount: 96
        ).withUnsafeBytes { Array($0) }
        return RealTimeKeys(material: material, isInitiator: isInitiator)
    }
}

/// The secrets of one real-time connection: a ChaCha20-Poly1305 key per direction and the ICE
/// short-term credentials of both sides, all from one HKDF-SHA256 expansion (PROTOCOL §17.4).
public struct RealTimeKeys: Sendable {
    static let label = "OpenGameKit real-time v1"

    let sendKey: SymmetricKey
    let receiveKey: SymmetricKey
    let credentials: ICEAgent.Credentials
    /// Whether this side sent the invitation (it controls ICE).
    public let isInitiator: Bool

    /// Bytes 0–31: initiator→responder key; 32–63: responder→initiator key; 64–67 and 68–71: the
    /// initiator's and responder's ufrag; 72–83 and 84–95: their passwords (ufrags and passwords
    /// travel as lowercase hex).
    init(material: [UInt8], isInitiator: Bool) {
        precondition(material.count == 96)
        let forward = SymmetricKey(data: material[0..<32])
        let backward = SymmetricKey(data: material[32..<64])
        let initiatorUfrag = Self.hex(material[64..<68]), responderUfrag = Self.hex(material[68..<72])
        let initiatorPassword = Self.hex(material[72..<84]), responderPassword = Self.hex(material[84..<96])
        self.isInitiator = isInitiator
        self.sendKey = isInitiator ? forward : backward
        self.receiveKey = isInitiator ? backward : forward
        self.credentials = isInitiator
            ? .init(localUfrag: initiatorUfrag, localPassword: initiatorPassword, remoteUfrag: responderUfrag, remotePassword: responderPassword)
            : .init(localUfrag: responderUfrag, localPassword: responderPassword, remoteUfrag: initiatorUfrag, remotePassword: initiatorPassword)
    }

    private static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}

/// Errors of the real-time connection.
public enum RealTimeError: Error, Equatable, Sendable {
    /// The other side's public key is not a valid X25519 key.
    case invalidKeyShare
    /// The UDP socket could not be opened.
    case bindFailed(String)
    /// A STUN or TURN server is not a valid address.
    case invalidServer(String)
}
