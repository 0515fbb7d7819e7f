/// The voice engine's packets (docs/PROTOCOL.md §16). The engine makes and takes them; how they
/// travel (encrypted, over a voice link or through the application) is the caller's business.
///
/// Every packet starts with one byte: version in the high nibble (1), kind in the low nibble.
public enum VoicePacket: Equatable, Sendable {
    /// One frame of Opus audio. `sequence` counts packets sent; `timestamp` counts samples at
    /// 16 kHz from a random start; `flags` bit 0 marks a muted sender.
    case audio(sequence: UInt16, timestamp: UInt32, muted: Bool, payload: [UInt8])
    /// One frame of Opus audio, as `audio`, with coarser copies of earlier frames (RFC 2198's
    /// idea): sent while the receiver asks for cover against bursts of loss.
    case redundantAudio(sequence: UInt16, timestamp: UInt32, muted: Bool, payload: [UInt8], earlier: [EarlierFrame])
    /// A receiver's report on the audio it gets: loss in the last interval in percent, the
    /// highest sequence number seen, the p95 arrival jitter, the jitter buffer's target, and how
    /// many frames back the receiver wants each packet to cover (0: no redundancy; 2 or 3: copies
    /// of the frames 2…`burstCover` back).
    case report(
        lossPercent: UInt8, highestSequence: UInt16, jitterMilliseconds: UInt16, targetDelayMilliseconds: UInt16, burstCover: UInt8 = 0)

    /// A coarser copy of the frame `distance` frames before the packet's own.
    public struct EarlierFrame: Equatable, Sendable {
        /// Frames back, 1…``VoicePacket/maximumDistance``.
        public var distance: Int
        /// Its Opus packet.
        public var payload: [UInt8]

        public init(distance: Int, payload: [UInt8]) {
            self.distance = distance
            self.payload = payload
        }
    }

    /// The version this engine speaks.
    public static let version: UInt8 = 1
    static let audioKind: UInt8 = 1
    static let reportKind: UInt8 = 2
    static let redundantAudioKind: UInt8 = 3
    /// Bytes before an audio packet's Opus payload.
    public static let audioHeaderSize = 8
    /// The most earlier frames one packet carries, and the farthest back one may be.
    public static let maximumEarlierFrames = 3
    public static let maximumDistance = 15
    /// The deepest cover a receiver may ask for.
    public static let maximumBurstCover: UInt8 = 3

    /// Why a packet was refused.
    public enum DecodeError: Error, Equatable {
        case empty
        case unsupportedVersion(UInt8)
        case unknownKind(UInt8)
        case truncated
        case tooLarge(Int)
        case emptyAudio
        /// An earlier frame's distance is 0, beyond ``VoicePacket/maximumDistance``, or repeated,
        /// or there are more than ``VoicePacket/maximumEarlierFrames``.
        case badRedundancy
    }

    /// The packet's bytes.
    public func encoded() -> [UInt8] {
        switch self {
        case .audio(let sequence, let timestamp, let muted, let payload):
            var bytes = Self.audioHeader(Self.audioKind, sequence, timestamp, muted, capacity: payload.count)
            bytes.append(contentsOf: payload)
            return bytes
        case .redundantAudio(let sequence, let timestamp, let muted, let payload, let earlier):
            let size = 1 + earlier.reduce(payload.count) { $0 + 3 + $1.payload.count }
            var bytes = Self.audioHeader(Self.redundantAudioKind, sequence, timestamp, muted, capacity: size)
            bytes.append(UInt8(earlier.count))
            for frame in earlier {
                bytes.append(UInt8(frame.distance))
                bytes.append(contentsOf: bigEndian(UInt16(frame.payload.count)))
            }
            for frame in earlier { bytes.append(contentsOf: frame.payload) }
            bytes.append(contentsOf: payload)
            return bytes
        case .report(let loss, let highest, let jitter, let target, let cover):
            var bytes: [UInt8] = [Self.version << 4 | Self.reportKind, loss]
            bytes.append(contentsOf: bigEndian(highest))
            bytes.append(contentsOf: bigEndian(jitter))
            bytes.append(contentsOf: bigEndian(target))
            bytes.append(cover)
            return bytes
        }
    }

    private static func audioHeader(_ kind: UInt8, _ sequence: UInt16, _ timestamp: UInt32, _ muted: Bool, capacity: Int) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(Self.audioHeaderSize + capacity)
        bytes.append(Self.version << 4 | kind)
        bytes.append(muted ? 1 : 0)
        bytes.append(contentsOf: bigEndian(sequence))
        bytes.append(contentsOf: bigEndian(timestamp))
        return bytes
    }

    /// Parses a packet; anything malformed is an error, never a crash.
    public init(decoding bytes: [UInt8]) throws(DecodeError) {
        guard let first = bytes.first else { throw .empty }
        guard first >> 4 == Self.version else { throw .unsupportedVersion(first >> 4) }
        switch first & 0x0F {
        case Self.audioKind:
            guard bytes.count >= Self.audioHeaderSize else { throw .truncated }
            guard bytes.count > Self.audioHeaderSize else { throw .emptyAudio }
            guard bytes.count <= Self.audioHeaderSize + opusMaximumPacket else { throw .tooLarge(bytes.count) }
            self = .audio(
                sequence: UInt16(bytes[2]) << 8 | UInt16(bytes[3]), timestamp: Self.timestamp(bytes), muted: bytes[1] & 1 != 0,
                payload: Array(bytes[Self.audioHeaderSize...]))
        case Self.redundantAudioKind:
            self = try Self.decodeRedundant(bytes)
        case Self.reportKind:
            guard bytes.count >= 8 else { throw .truncated }
            // Reports of 8 bytes (before burst cover existed) ask for none.
            self = .report(
                lossPercent: min(bytes[1], 100),
                highestSequence: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
                jitterMilliseconds: UInt16(bytes[4]) << 8 | UInt16(bytes[5]),
                targetDelayMilliseconds: UInt16(bytes[6]) << 8 | UInt16(bytes[7]),
                burstCover: bytes.count > 8 ? min(bytes[8], Self.maximumBurstCover) : 0)
        default:
            throw .unknownKind(first & 0x0F)
        }
    }

    private static func timestamp(_ bytes: [UInt8]) -> UInt32 {
        UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7])
    }

    private static func decodeRedundant(_ bytes: [UInt8]) throws(DecodeError) -> VoicePacket {
        guard bytes.count > Self.audioHeaderSize else { throw .truncated }
        let count = Int(bytes[Self.audioHeaderSize])
        guard count <= Self.maximumEarlierFrames else { throw .badRedundancy }
        var offset = Self.audioHeaderSize + 1
        guard bytes.count >= offset + 3 * count else { throw .truncated }
        var blocks: [(distance: Int, length: Int)] = []
        for _ in 0..<count {
            let distance = Int(bytes[offset])
            let length = Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            guard (1...Self.maximumDistance).contains(distance), !blocks.contains(where: { $0.distance == distance }) else { throw .badRedundancy }
            guard (1...opusMaximumPacket).contains(length) else { throw length == 0 ? .emptyAudio : .tooLarge(length) }
            blocks.append((distance, length))
            offset += 3
        }
        var earlier: [EarlierFrame] = []
        for block in blocks {
            guard bytes.count >= offset + block.length else { throw .truncated }
            earlier.append(EarlierFrame(distance: block.distance, payload: Array(bytes[offset..<offset + block.length])))
            offset += block.length
        }
        let primary = bytes.count - offset
        guard primary > 0 else { throw .emptyAudio }
        guard primary <= opusMaximumPacket else { throw .tooLarge(primary) }
        return .redundantAudio(
            sequence: UInt16(bytes[2]) << 8 | UInt16(bytes[3]), timestamp: Self.timestamp(bytes), muted: bytes[1] & 1 != 0,
            payload: Array(bytes[offset...]), earlier: earlier)
    }
}

private func bigEndian(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
private func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
}
