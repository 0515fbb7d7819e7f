import Crypto
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// The data-packet cipher: its negotiation in the handshake's parameters (PROTOCOL §3.7), the
/// packet protection of both ciphers against swift-crypto's own AEADs (so the OpenSSL backend,
/// when the package is built with that trait, is checked byte for byte against the default), and
/// links that carry messages with each.
@Suite("Data cipher")
struct DataCipherTests {
    // MARK: - Negotiation

    @Test func offersChaChaAlwaysAndAESOnlyWhenAllowed() {
        #expect(DataCipher.offer(preference: .chaCha20Poly1305) == 1)
        #expect(DataCipher.offer(preference: .aes256GCM) == 3)
        #expect(DataCipher.offer(preference: .automatic) == (HardwareAES.isAvailable ? 3 : 1))
    }

    @Test func theResponderPicksAESOnlyWhenOfferedAndAllowed() {
        for preference in [DataCipherPreference.aes256GCM, .chaCha20Poly1305, .automatic] {
            // A 0.1 initiator wrote the field as reserved (zero): ChaCha20-Poly1305.
            #expect(DataCipher.choice(forOffer: 0, preference: preference) == .chaCha20Poly1305)
            #expect(DataCipher.choice(forOffer: 1, preference: preference) == .chaCha20Poly1305)
            // Bits this version does not know are ignored.
            #expect(DataCipher.choice(forOffer: 0xFFF9, preference: preference) == .chaCha20Poly1305)
        }
        #expect(DataCipher.choice(forOffer: 3, preference: .aes256GCM) == .aes256GCM)
        #expect(DataCipher.choice(forOffer: 2, preference: .aes256GCM) == .aes256GCM)
        #expect(DataCipher.choice(forOffer: 0xFFFF, preference: .aes256GCM) == .aes256GCM)
        #expect(DataCipher.choice(forOffer: 3, preference: .chaCha20Poly1305) == .chaCha20Poly1305)
        #expect(DataCipher.choice(forOffer: 3, preference: .automatic) == (HardwareAES.isAvailable ? .aes256GCM : .chaCha20Poly1305))
    }

    @Test func theInitiatorAcceptsOnlyACipherItOffered() {
        // A 0.1 responder answers zero: ChaCha20-Poly1305.
        #expect(DataCipher.chosen(inResponse: 0, offer: 1) == .chaCha20Poly1305)
        #expect(DataCipher.chosen(inResponse: 0, offer: 3) == .chaCha20Poly1305)
        #expect(DataCipher.chosen(inResponse: 1, offer: 3) == .chaCha20Poly1305)
        #expect(DataCipher.chosen(inResponse: 2, offer: 3) == .aes256GCM)
        // Not offered, several at once, or unknown: the response is ignored.
        #expect(DataCipher.chosen(inResponse: 2, offer: 1) == nil)
        #expect(DataCipher.chosen(inResponse: 3, offer: 3) == nil)
        #expect(DataCipher.chosen(inResponse: 4, offer: 7) == nil)
    }

    @Test func theFieldTravelsInTheParameters() {
        var configuration = TransportConfiguration()
        configuration.dataCipher = .aes256GCM
        let parameters = configuration.localParameters
        #expect(parameters.dataCiphers == 3)
        var buffer = ByteBuffer()
        parameters.encode(into: &buffer)
        #expect(buffer.getInteger(at: 18, as: UInt16.self) == 3)
        #expect(TransportParameters.decode(from: &buffer)?.dataCiphers == 3)
    }

    @Test func hardwareAESIsReadFromTheProcessorFlags() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 pclmulqdq aes avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n"
        #expect(HardwareAES.listsAES(cpuinfo: x86))
        #expect(!HardwareAES.listsAES(cpuinfo: "flags\t\t: fpu sse2 aes avx2\n"))  // no carry-less multiply
        #expect(!HardwareAES.listsAES(cpuinfo: "flags\t\t: fpu sse2 pclmulqdq\n"))
        #expect(HardwareAES.listsAES(cpuinfo: "processor\t: 0\nFeatures\t: fp asimd aes pmull sha1\n"))
        #expect(!HardwareAES.listsAES(cpuinfo: "Features\t: fp asimd\n"))
        #expect(!HardwareAES.listsAES(cpuinfo: ""))
    }

    // MARK: - Packet protection

    /// With the package trait OpenSSL (scripts/check-openssl), these tests run on libcrypto.
    @Test func theBackendIsTheOneTheBuildAskedFor() {
        #if OpenSSL
        #expect(PacketCipher.backendName == "OpenSSL libcrypto")
        #else
        #expect(PacketCipher.backendName == "swift-crypto")
        #endif
    }

    /// A data packet's header: type, reserved, receiver index, packet number.
    private static func header(receiver: UInt32, packet: UInt64) -> ByteBuffer {
        var header = ByteBuffer()
        DataPacketHeader(receiverIndex: receiver, packetNumber: packet).encode(into: &header)
        return header
    }

    @Test(arguments: [DataCipher.chaCha20Poly1305, .aes256GCM])
    func sealedPacketsAreWhatTheStandardAEADProduces(_ cipher: DataCipher) throws {
        let key = SymmetricKey(size: .bits256)
        let sealer = PacketCipher(cipher, key: key)
        for (packet, size) in [(UInt64(0), 1), (1, 17), (0xABCD_EF01_2345, 1168), (7, 64_000)] {
            let header = Self.header(receiver: 0xDEAD_BEEF, packet: packet)
            let plaintext = ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(packet)) })
            var datagram = header
            sealer.seal(plaintext, header: header, into: &datagram)
            #expect(datagram.readableBytes == 16 + size + 16)
            // The reference: swift-crypto's AEAD, nonce = header bytes 4..<16, additional data = header.
            let nonce = Array(header.getBytes(at: 4, length: 12)!)
            let sealed = Array(datagram.getBytes(at: 16, length: size + 16)!)
            let aad = Array(header.readableBytesView)
            let reference: [UInt8]
            switch cipher {
            case .chaCha20Poly1305:
                let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
                reference = Array(try ChaChaPoly.open(box, using: key, authenticating: aad))
            case .aes256GCM:
                let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
                reference = Array(try AES.GCM.open(box, using: key, authenticating: aad))
            }
            #expect(reference == Array(plaintext.readableBytesView))
            // And this side opens it.
            #expect(PacketCipher(cipher, key: key).open(datagram) == plaintext)
        }
    }

    /// One cipher object may seal and open in turn (the OpenSSL backend keeps one context per key
    /// and sets the direction per packet).
    @Test(arguments: [DataCipher.chaCha20Poly1305, .aes256GCM])
    func oneCipherSealsAndOpensInTurn(_ cipher: DataCipher) {
        let both = PacketCipher(cipher, key: SymmetricKey(size: .bits256))
        for packet in UInt64(0)..<4 {
            let header = Self.header(receiver: 3, packet: packet)
            let plaintext = ByteBuffer(repeating: UInt8(packet), count: 50 + Int(packet))
            var datagram = header
            both.seal(plaintext, header: header, into: &datagram)
            #expect(both.open(datagram) == plaintext)
            var changed = datagram
            changed.setInteger(changed.getInteger(at: 20, as: UInt8.self)! ^ 0x80, at: 20)
            #expect(both.open(changed) == nil)
        }
    }

    @Test(arguments: [DataCipher.chaCha20Poly1305, .aes256GCM])
    func anyChangedBitOrWrongKeyFailsToOpen(_ cipher: DataCipher) {
        let key = SymmetricKey(size: .bits256)
        let header = Self.header(receiver: 42, packet: 9)
        var datagram = header
        PacketCipher(cipher, key: key).seal(ByteBuffer(repeating: 0x5A, count: 100), header: header, into: &datagram)
        let opener = PacketCipher(cipher, key: key)
        #expect(opener.open(datagram) != nil)
        // Reserved header byte (authenticated), nonce, ciphertext and tag.
        for offset in [1, 5, 12, 16, 70, datagram.readableBytes - 1] {
            var changed = datagram
            changed.setInteger(changed.getInteger(at: offset, as: UInt8.self)! ^ 0x01, at: offset)
            #expect(opener.open(changed) == nil, "byte \(offset)")
        }
        #expect(PacketCipher(cipher, key: SymmetricKey(size: .bits256)).open(datagram) == nil)
        // The other cipher with the same key does not open it either.
        let other: DataCipher = cipher == .aes256GCM ? .chaCha20Poly1305 : .aes256GCM
        #expect(PacketCipher(other, key: key).open(datagram) == nil)
        // Too short to hold a tag; a bare tag with nothing before it.
        #expect(opener.open(datagram.getSlice(at: 0, length: 31)!) == nil)
        #expect(opener.open(ByteBuffer(repeating: 6, count: 32)) == nil)
        // The opener is still good after the failures.
        #expect(opener.open(datagram) == ByteBuffer(repeating: 0x5A, count: 100))
    }

    // MARK: - Links

    @Test(arguments: [
        (DataCipherPreference.aes256GCM, DataCipherPreference.aes256GCM, DataCipher.aes256GCM),
        (.aes256GCM, .chaCha20Poly1305, .chaCha20Poly1305),
        (.chaCha20Poly1305, .aes256GCM, .chaCha20Poly1305),
        (.chaCha20Poly1305, .chaCha20Poly1305, .chaCha20Poly1305),
    ])
    func bothSidesUseTheNegotiatedCipherAndMessagesFlow(_ initiator: DataCipherPreference, _ responder: DataCipherPreference, _ expected: DataCipher) throws {
        var network = VirtualNetwork()
        var first = TransportConfiguration()
        first.dataCipher = initiator
        var second = TransportConfiguration()
        second.dataCipher = responder
        let a = network.addNode(configuration: first, profile: ImpairmentProfile(loss: 0.05, delay: .milliseconds(2)))
        let b = network.addNode(configuration: second, profile: ImpairmentProfile(loss: 0.05, delay: .milliseconds(2)))
        let opened = network.openLink(from: a, to: b)
        let (sender, receiver) = try #require(opened)
        #expect(network.nodes[a].machine.linkStatistics(sender)?.dataCipher == expected)
        #expect(network.nodes[b].machine.linkStatistics(receiver)?.dataCipher == expected)
        for sequence in 0..<200 {
            try network.nodes[a].machine.send(.numbered(sequence, size: 1000), on: sender, mode: .reliable)
        }
        try network.nodes[b].machine.send(.numbered(7, size: 300), on: receiver, mode: .reliable)
        network.run(for: .seconds(20)) { $0.nodes[b].received(on: receiver, mode: .reliable).count == 200 && $0.nodes[a].received(on: sender, mode: .reliable).count == 1 }
        #expect(network.nodes[b].received(on: receiver, mode: .reliable) == (0..<200).map { ByteBuffer.numbered($0, size: 1000) })
        #expect(network.nodes[a].received(on: sender, mode: .reliable) == [ByteBuffer.numbered(7, size: 300)])
        #expect(network.nodes[a].machine.endpointStatistics.droppedUnauthenticated == 0)
        #expect(network.nodes[b].machine.endpointStatistics.droppedUnauthenticated == 0)
    }
}
