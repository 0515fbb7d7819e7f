/// The voice engine's packets (docs/PROTOCOL.md §16). The engine makes and takes them; how they
/// travel (encrypted, over a voice link or through the application) is the caller's business.
///
/// Every packet starts with one byte: version in the high nibble (1), kind in the low nibble.
public enum VoicePacket: Equatable, Sendable {
    /// One frame of Opus audio. `sequence` counts packets sent; `timestamp` counts samples at
    /// 16 kHz from a random start; `flags` bit 0 marks a muted sender.
    case audio(sequence: UInt16, timestamp: UInt32, muted: Bool, payload: [UInt8])
    /// A receiver's report on the audio it gets: loss in the last interval in percent, the
    /// highest sequence number seen, the p95 arrival jitter and the jitter buffer's target.
    case report(lossPercent: UInt8, highestSequence: UInt16, jitterMilliseconds: UInt16, targetDelayMilliseconds: UInt16)

    /// The version this engine speaks.
    public static let version: UInt8 = 1
    static let audioKind: UInt8 = 1
    static let reportKind: UInt8 = 2
    /// Bytes before an audio packet's Opus payload.
    public static let audioHeaderSize = 8

    /// Why a packet was refused.
    public enum DecodeError: Error, Equatable {
        case empty
        case unsupportedVersion(UInt8)
        case unknownKind(UInt8)
        case truncated
        case tooLarge(Int)
        case emptyAudio
    }

    /// The packet's bytes.
    public func encoded() -> [UInt8] {
        switch self {
        case .audio(let sequence, let timestamp, let muted, let payload):
            var bytes = [UInt8]()
            bytes.reserveCapacity(Self.audioHeaderSize + payload.count)
            bytes.append(Self.version << 4 | Self.audioKind)
            bytes.append(muted ? 1 : 0)
            bytes.append(contentsOf: bigEndian(sequence))
            bytes.append(contentsOf: bigEndian(timestamp))
            bytes.append(contentsOf: payload)
            return bytes
        case .report(let loss, let highest, let jitter, let target):
            var bytes: [UInt8] = [Self.version << 4 | Self.reportKind, loss]
            bytes.append(contentsOf: bigEndian(highest))
            bytes.append(contentsOf: bigEndian(jitter))
            bytes.append(contentsOf: bigEndian(target))
            return bytes
        }
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
                sequence: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
                timestamp: UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7]),
                muted: bytes[1] & 1 != 0,
                payload: Array(bytes[Self.audioHeaderSize...]))
        case Self.reportKind:
            guard bytes.count >= 8 else { throw .truncated }
            self = .report(
                lossPercent: min(bytes[1], 100),
                highestSequence: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
                jitterMilliseconds: UInt16(bytes[4]) << 8 | UInt16(bytes[5]),
                targetDelayMilliseconds: UInt16(bytes[6]) << 8 | UInt16(bytes[7]))
        default:
            throw .unknownKind(first & 0x0F)
        }
    }
}

private func bigEndian(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
private func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
}
