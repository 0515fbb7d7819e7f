import CSodium
import Crypto

/// CPace, the balanced password-authenticated key exchange of draft-irtf-cfrg-cpace, with the
/// cipher suite CPACE-RISTR255-SHA512 in its initiator-responder setting (PROTOCOL §4.1).
///
/// Both sides derive a generator of the ristretto255 group from the password, send that
/// generator times a fresh secret scalar, and multiply what they receive by their own scalar.
/// They arrive at the same point only when they used the same password; a party that sees the
/// two shares learns nothing it could test password guesses against, and a party that takes part
/// learns whether one guess (the password it used) was right.
///
/// The group operations are libsodium's (`crypto_core_ristretto255_*`,
/// `crypto_scalarmult_ristretto255`); hashing is swift-crypto's SHA-512. Nothing here does field
/// arithmetic of its own.
enum CPace {
    /// Bytes of an encoded group element (a share, the generator, the shared point).
    static let elementSize = 32
    /// Bytes of a scalar.
    static let scalarSize = 32
    /// Bytes of the intermediate session key (SHA-512).
    static let keySize = 64
    /// The suite's domain-separation identifier.
    static let domain = Array("CPaceRistretto255".utf8)
    /// SHA-512's input block size, which the generator string's padding fills.
    static let hashBlockSize = 128

    /// libsodium must be initialised once before use (it picks its implementations then).
    private static let sodiumReady: Bool = sodium_init() >= 0

    /// The generator for a password (PRS), a channel identifier (CI) and a session identifier
    /// (sid): SHA-512 of the generator string, mapped into the group (RFC 9496 element derivation).
    static func generator(password: [UInt8], channel: [UInt8], sessionID: [UInt8]) -> [UInt8] {
        precondition(Self.sodiumReady, "libsodium could not be initialised")
        let digest = Array(SHA512.hash(data: Self.generatorString(password: password, channel: channel, sessionID: sessionID)))
        var element = [UInt8](repeating: 0, count: Self.elementSize)
        _ = crypto_core_ristretto255_from_hash(&element, digest)
        return element
    }

    /// lv_cat(DSI, PRS, zero padding, CI, sid), the padding such that DSI and PRS fill the hash's
    /// first input block.
    static func generatorString(password: [UInt8], channel: [UInt8], sessionID: [UInt8]) -> [UInt8] {
        let padding = max(0, Self.hashBlockSize - 1 - Self.prependLength(password).count - Self.prependLength(Self.domain).count)
        return Self.lengthValueConcatenation([Self.domain, password, [UInt8](repeating: 0, count: padding), channel, sessionID])
    }

    /// A fresh secret scalar, uniform modulo the group order.
    static func randomScalar() -> [UInt8] {
        precondition(Self.sodiumReady, "libsodium could not be initialised")
        var scalar = [UInt8](repeating: 0, count: Self.scalarSize)
        crypto_core_ristretto255_scalar_random(&scalar)
        return scalar
    }

    /// `scalar` times `element`, encoded; nil when `element` is not the encoding of a group
    /// element or the product is the identity (scalar_mult_vfy's abort conditions).
    static func multiply(_ scalar: [UInt8], _ element: [UInt8]) -> [UInt8]? {
        precondition(Self.sodiumReady, "libsodium could not be initialised")
        guard scalar.count == Self.scalarSize, element.count == Self.elementSize else { return nil }
        var product = [UInt8](repeating: 0, count: Self.elementSize)
        guard crypto_scalarmult_ristretto255(&product, scalar, element) == 0 else { return nil }
        return product
    }

    /// The intermediate session key, ISK = SHA-512(lv_cat(DSI ‖ "_ISK", sid, K) ‖
    /// transcript_ir(Ya, ADa, Yb, ADb)).
    static func intermediateKey(
        sessionID: [UInt8], sharedPoint: [UInt8],
        initiatorShare: [UInt8], initiatorData: [UInt8], responderShare: [UInt8], responderData: [UInt8]
    ) -> [UInt8] {
        var hasher = SHA512()
        hasher.update(data: Self.lengthValueConcatenation([Self.domain + Array("_ISK".utf8), sessionID, sharedPoint]))
        hasher.update(data: Self.transcript(initiatorShare: initiatorShare, initiatorData: initiatorData, responderShare: responderShare, responderData: responderData))
        return Array(hasher.finalize())
    }

    /// transcript_ir: lv_cat(Ya, ADa) ‖ lv_cat(Yb, ADb).
    static func transcript(initiatorShare: [UInt8], initiatorData: [UInt8], responderShare: [UInt8], responderData: [UInt8]) -> [UInt8] {
        Self.lengthValueConcatenation([initiatorShare, initiatorData]) + Self.lengthValueConcatenation([responderShare, responderData])
    }

    /// The string with its length in front, as LEB128.
    static func prependLength(_ bytes: [UInt8]) -> [UInt8] {
        var length = bytes.count
        var encoded: [UInt8] = []
        repeat {
            let low = UInt8(length & 0x7F)
            length >>= 7
            encoded.append(length == 0 ? low : low | 0x80)
        } while length != 0
        return encoded + bytes
    }

    /// Each string with its length in front, concatenated.
    static func lengthValueConcatenation(_ parts: [[UInt8]]) -> [UInt8] {
        parts.flatMap(Self.prependLength)
    }
}
