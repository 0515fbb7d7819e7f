import Crypto
@_spi(Machine) import GameKitMachine

/// Seals and opens media datagrams of a real-time connection (PROTOCOL §17.5): a 12-byte header
/// (marker 0x90, version 1, two zero bytes, a 64-bit packet counter) that is both the
/// ChaCha20-Poly1305 nonce and its additional data, then the ciphertext and the 16-byte tag.
/// A replay window drops duplicates and packets too old to tell.
struct MediaCipher: Sendable {
    static let marker: UInt8 = 0x90
    static let version: UInt8 = 1
    static let headerSize = 12
    static let tagSize = 16
    static let overhead = headerSize + tagSize

    private let sendKey: SymmetricKey
    private let receiveKey: SymmetricKey
    private var counter: UInt64 = 0
    private var replay = ReplayWindow()
    /// Datagrams that failed authentication or were replays.
    private(set) var rejected = 0

    init(keys: RealTimeKeys) {
        self.sendKey = keys.sendKey
        self.receiveKey = keys.receiveKey
    }

    /// Whether a datagram is media (RFC 7983-style demultiplexing on the first byte: STUN is
    /// 0–3, TURN channel data 64–79, media 0x90).
    static func isMedia(_ bytes: [UInt8]) -> Bool { bytes.first == Self.marker }

    mutating func seal(_ payload: [UInt8]) -> [UInt8] {
        self.counter += 1
        var header: [UInt8] = [Self.marker, Self.version, 0, 0]
        header.appendBigEndian(self.counter)
        // A 256-bit key and a 96-bit nonce cannot fail.
        let box = try! ChaChaPoly.seal(payload, using: self.sendKey, nonce: ChaChaPoly.Nonce(data: header), authenticating: header)
        return header + box.ciphertext + box.tag
    }

    /// The payload, or nil (counted) for anything that does not authenticate or was seen before.
    mutating func open(_ packet: [UInt8]) -> [UInt8]? {
        guard packet.count >= Self.overhead, packet[0] == Self.marker, packet[1] == Self.version else {
            self.rejected += 1
            return nil
        }
        let header = Array(packet[..<Self.headerSize])
        let counter = header[4...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard self.replay.isFresh(counter),
            let box = try? ChaChaPoly.SealedBox(
                nonce: ChaChaPoly.Nonce(data: header), ciphertext: packet[Self.headerSize..<(packet.count - Self.tagSize)],
                tag: packet[(packet.count - Self.tagSize)...]),
            let plain = try? ChaChaPoly.open(box, using: self.receiveKey, authenticating: header)
        else {
            self.rejected += 1
            return nil
        }
        self.replay.record(counter)
        return Array(plain)
    }
}
