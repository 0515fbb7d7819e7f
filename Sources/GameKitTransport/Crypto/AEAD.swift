import Crypto
import NIOCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// ChaCha20-Poly1305 (RFC 8439) over ByteBuffers, with the protocol's 96-bit nonce: a 32-bit
/// prefix then a 64-bit counter, both big-endian. Handshake messages use prefix and counter zero
/// (their keys are used once); the liveness messages use their own counters. Data packets go
/// through ``PacketCipher`` instead, whose cipher the handshake chooses.
enum AEAD {
    static let nonceSize = 12

    /// Appends the ciphertext of `plaintext` and its 16-byte tag to `output`.
    static func seal(
        _ plaintext: ByteBuffer,
        key: SymmetricKey,
        noncePrefix: UInt32 = 0,
        counter: UInt64,
        authenticating header: ByteBuffer,
        into output: inout ByteBuffer
    ) {
        let nonce = Self.nonce(prefix: noncePrefix, counter: counter)
        let box = plaintext.withUnsafeReadableBytes { plain in
            header.withUnsafeReadableBytes { aad in
                // Sealing cannot fail with a 256-bit key and a 96-bit nonce.
                try! ChaChaPoly.seal(plain, using: key, nonce: nonce, authenticating: aad)
            }
        }
        box.combined.withUnsafeBytes { combined in
            _ = output.writeBytes(UnsafeRawBufferPointer(rebasing: combined[Self.nonceSize...]))
        }
    }

    /// Opens `sealed` (ciphertext followed by the tag), or returns nil if it does not
    /// authenticate. For handshake messages.
    static func open(
        _ sealed: ByteBuffer,
        key: SymmetricKey,
        noncePrefix: UInt32 = 0,
        counter: UInt64,
        authenticating header: ByteBuffer
    ) -> ByteBuffer? {
        guard sealed.readableBytes >= WireSize.tag else { return nil }
        var combined = ByteBuffer()
        combined.reserveCapacity(Self.nonceSize + sealed.readableBytes)
        combined.writeInteger(noncePrefix)
        combined.writeInteger(counter)
        combined.writeImmutableBuffer(sealed)
        return header.withUnsafeReadableBytes { aad in
            combined.withUnsafeReadableBytes { Self.open(combined: $0, key: key, authenticating: aad) }
        }
    }

    /// `combined` is nonce ‖ ciphertext ‖ tag.
    private static func open(combined: UnsafeRawBufferPointer, key: SymmetricKey, authenticating aad: UnsafeRawBufferPointer) -> ByteBuffer? {
        guard
            let box = try? ChaChaPoly.SealedBox(combined: combined),
            let plaintext = try? ChaChaPoly.open(box, using: key, authenticating: aad)
        else { return nil }
        var buffer = ByteBufferAllocator().buffer(capacity: plaintext.count)
        buffer.writeBytes(plaintext)
        return buffer
    }

    private static func nonce(prefix: UInt32, counter: UInt64) -> ChaChaPoly.Nonce {
        var bytes: (UInt32, UInt32, UInt32) = (prefix.bigEndian, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw.storeBytes(of: counter.bigEndian, toByteOffset: 4, as: UInt64.self)
        }
        return withUnsafeBytes(of: bytes) { try! ChaChaPoly.Nonce(data: $0) }
    }
}
