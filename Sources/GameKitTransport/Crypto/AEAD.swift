import Crypto
import NIOCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// ChaCha20-Poly1305 (RFC 8439) over ByteBuffers, with the protocol's nonce layout: four zero
/// bytes, then a 64-bit big-endian counter (the packet number; zero for handshake messages,
/// whose keys are used once).
///
/// Every datagram after the handshake is sealed here, so this is the hot path: it passes the
/// buffers' memory to swift-crypto without intermediate arrays.
enum AEAD {
    /// Appends the ciphertext of `plaintext` and its 16-byte tag to `output`.
    static func seal(
        _ plaintext: ByteBuffer,
        key: SymmetricKey,
        counter: UInt64,
        authenticating header: ByteBuffer,
        into output: inout ByteBuffer
    ) {
        let nonce = Self.nonce(counter)
        let box = plaintext.withUnsafeReadableBytes { plain in
            header.withUnsafeReadableBytes { aad in
                // Sealing cannot fail with a 256-bit key and a 96-bit nonce.
                try! ChaChaPoly.seal(plain, using: key, nonce: nonce, authenticating: aad)
            }
        }
        output.writeBytes(box.ciphertext)
        output.writeBytes(box.tag)
    }

    /// Opens `sealed` (ciphertext followed by the tag), or returns nil if it does not
    /// authenticate.
    static func open(
        _ sealed: ByteBuffer,
        key: SymmetricKey,
        counter: UInt64,
        authenticating header: ByteBuffer
    ) -> ByteBuffer? {
        guard sealed.readableBytes >= WireSize.tag else { return nil }
        let nonce = Self.nonce(counter)
        let cipherLength = sealed.readableBytes - WireSize.tag
        let plaintext: Data? = sealed.withUnsafeReadableBytes { bytes in
            guard
                let box = try? ChaChaPoly.SealedBox(
                    nonce: nonce,
                    ciphertext: UnsafeRawBufferPointer(rebasing: bytes[0..<cipherLength]),
                    tag: UnsafeRawBufferPointer(rebasing: bytes[cipherLength...])
                )
            else { return nil }
            return header.withUnsafeReadableBytes { aad in
                try? ChaChaPoly.open(box, using: key, authenticating: aad)
            }
        }
        guard let plaintext else { return nil }
        var buffer = ByteBufferAllocator().buffer(capacity: plaintext.count)
        buffer.writeBytes(plaintext)
        return buffer
    }

    private static func nonce(_ counter: UInt64) -> ChaChaPoly.Nonce {
        var bytes: (UInt32, UInt32, UInt32) = (0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw.storeBytes(of: counter.bigEndian, toByteOffset: 4, as: UInt64.self)
        }
        return withUnsafeBytes(of: bytes) { try! ChaChaPoly.Nonce(data: $0) }
    }
}
