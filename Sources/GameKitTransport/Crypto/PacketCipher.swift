import Crypto
import NIOCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One direction's data-packet protection (PROTOCOL §2.2): the link's cipher and that
/// direction's key, prepared once. The 16-byte packet header is the additional data and its
/// bytes 4..<16 (receiver index ‖ packet number) are the nonce.
///
/// Two backends do the work: swift-crypto (always there), and with the package trait `OpenSSL`
/// OpenSSL's libcrypto, which keeps one cipher context per key and writes straight into the
/// datagram, so a packet costs no allocation and no key setup (PacketCipher+OpenSSL.swift).
/// Both produce the same bytes: which one runs is not visible on the wire.
struct PacketCipher: Sendable {
    let cipher: DataCipher
    private let backend: any PacketCipherBackend

    init(_ cipher: DataCipher, key: SymmetricKey) {
        self.cipher = cipher
        self.backend = Self.makeBackend(cipher, key: key)
    }

    /// The name of the backend the transport uses (for figures and logs).
    static var backendName: String { Self.preferredBackendName }

    /// Appends the ciphertext of `plaintext` and its 16-byte tag to `output`. `header` is the
    /// packet's 16-byte header.
    func seal(_ plaintext: ByteBuffer, header: ByteBuffer, into output: inout ByteBuffer) {
        precondition(header.readableBytes == DataPacketHeader.size)
        self.backend.seal(plaintext, header: header, into: &output)
    }

    /// The plaintext of a whole data packet (header, ciphertext, tag), or nil when it does not
    /// authenticate or is too short to hold a tag.
    func open(_ datagram: ByteBuffer) -> ByteBuffer? {
        guard datagram.readableBytes >= DataPacketHeader.size + WireSize.tag else { return nil }
        return self.backend.open(datagram)
    }

    #if !OpenSSL
    static func makeBackend(_ cipher: DataCipher, key: SymmetricKey) -> any PacketCipherBackend {
        SwiftCryptoPacketCipher(cipher, key: key)
    }

    static let preferredBackendName = "swift-crypto"
    #endif
}

/// What a backend does for ``PacketCipher``.
protocol PacketCipherBackend: Sendable {
    func seal(_ plaintext: ByteBuffer, header: ByteBuffer, into output: inout ByteBuffer)
    func open(_ datagram: ByteBuffer) -> ByteBuffer?
}

/// swift-crypto's ChaChaPoly and AES.GCM: a cipher context and a `Data` for each call.
struct SwiftCryptoPacketCipher: PacketCipherBackend {
    let cipher: DataCipher
    let key: SymmetricKey

    init(_ cipher: DataCipher, key: SymmetricKey) {
        self.cipher = cipher
        self.key = key
    }

    func seal(_ plaintext: ByteBuffer, header: ByteBuffer, into output: inout ByteBuffer) {
        // Sealing cannot fail with a 256-bit key and a 96-bit nonce.
        let (ciphertext, tag) = plaintext.withUnsafeReadableBytes { plain in
            header.withUnsafeReadableBytes { aad -> (Data, Data) in
                let nonce = UnsafeRawBufferPointer(rebasing: aad[4..<16])
                switch self.cipher {
                case .chaCha20Poly1305:
                    let box = try! ChaChaPoly.seal(plain, using: self.key, nonce: try! ChaChaPoly.Nonce(data: nonce), authenticating: aad)
                    return (box.ciphertext, box.tag)
                case .aes256GCM:
                    let box = try! AES.GCM.seal(plain, using: self.key, nonce: try! AES.GCM.Nonce(data: nonce), authenticating: aad)
                    return (box.ciphertext, box.tag)
                }
            }
        }
        output.writeBytes(ciphertext)
        output.writeBytes(tag)
    }

    func open(_ datagram: ByteBuffer) -> ByteBuffer? {
        datagram.withUnsafeReadableBytes { bytes -> ByteBuffer? in
            let aad = UnsafeRawBufferPointer(rebasing: bytes[..<DataPacketHeader.size])
            // nonce ‖ ciphertext ‖ tag, straight from the datagram.
            let combined = UnsafeRawBufferPointer(rebasing: bytes[(DataPacketHeader.size - 12)...])
            let plaintext: Data?
            switch self.cipher {
            case .chaCha20Poly1305:
                plaintext = (try? ChaChaPoly.SealedBox(combined: combined)).flatMap { try? ChaChaPoly.open($0, using: self.key, authenticating: aad) }
            case .aes256GCM:
                plaintext = (try? AES.GCM.SealedBox(combined: combined)).flatMap { try? AES.GCM.open($0, using: self.key, authenticating: aad) }
            }
            guard let plaintext else { return nil }
            var buffer = ByteBufferAllocator().buffer(capacity: plaintext.count)
            buffer.writeBytes(plaintext)
            return buffer
        }
    }
}
