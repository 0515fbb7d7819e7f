#if OpenSSL
import COpenSSL
import Crypto
import NIOCore

extension PacketCipher {
    /// OpenSSL when its contexts can be made (a FIPS-only OpenSSL may refuse ChaCha20), else
    /// swift-crypto.
    static func makeBackend(_ cipher: DataCipher, key: SymmetricKey) -> any PacketCipherBackend {
        OpenSSLPacketCipher(cipher, key: key) ?? SwiftCryptoPacketCipher(cipher, key: key)
    }

    static let preferredBackendName = "OpenSSL libcrypto"
}

/// OpenSSL's EVP AEAD with one context per key, made when the link opens and given a fresh
/// nonce and direction per packet (ogk_aead_seal/open in Sources/COpenSSL/shim.h). The machine
/// that owns the link serialises every call, so the context is never used at once.
final class OpenSSLPacketCipher: PacketCipherBackend, @unchecked Sendable {
    private let context: OpaquePointer

    init?(_ cipher: DataCipher, key: SymmetricKey) {
        let made = key.withUnsafeBytes { key in
            ogk_aead_new(Int32(cipher.rawValue), key.baseAddress?.assumingMemoryBound(to: UInt8.self))
        }
        guard let made else { return nil }
        self.context = made
    }

    deinit {
        ogk_aead_free(self.context)
    }

    func seal(_ plaintext: ByteBuffer, header: ByteBuffer, into output: inout ByteBuffer) {
        let length = plaintext.readableBytes
        output.writeWithUnsafeMutableBytes(minimumWritableBytes: length + WireSize.tag) { out in
            let sealed = plaintext.withUnsafeReadableBytes { plain in
                header.withUnsafeReadableBytes { aad in
                    let header = aad.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    return ogk_aead_seal(
                        self.context, header + 4, header, aad.count,
                        plain.baseAddress?.assumingMemoryBound(to: UInt8.self), length, out.baseAddress?.assumingMemoryBound(to: UInt8.self))
                }
            }
            // Sealing cannot fail with a valid context, key and nonce.
            precondition(sealed == 1, "OpenSSL could not seal a packet")
            return length + WireSize.tag
        }
    }

    func open(_ datagram: ByteBuffer) -> ByteBuffer? {
        let length = datagram.readableBytes - DataPacketHeader.size - WireSize.tag
        var plaintext = ByteBufferAllocator().buffer(capacity: length)
        var opened: Int32 = 0
        datagram.withUnsafeReadableBytes { bytes in
            let base = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
            plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { out in
                opened = ogk_aead_open(self.context, base + 4, base, DataPacketHeader.size, base + DataPacketHeader.size, length, out.baseAddress?.assumingMemoryBound(to: UInt8.self))
                return opened == 1 ? length : 0
            }
        }
        return opened == 1 ? plaintext : nil
    }
}
#endif
