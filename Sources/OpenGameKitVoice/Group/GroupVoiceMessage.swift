/// What group voice sends on its session channel (docs/PROTOCOL.md §19.1): one byte, version 1
/// in the high nibble and the kind in the low one, then for `media` a voice packet
/// (`VoicePacket`, §16.1) as it is.
enum GroupVoiceMessage: Equatable, Sendable {
    /// "I am in the group call" (reliable). Every member in the call answers `joinReply`.
    case join
    /// "So am I", the answer to `join` (reliable; never answered).
    case joinReply
    /// "I left the call" (reliable).
    case leave
    /// A voice packet: audio to everyone, a report to the participant it is about (unreliable).
    case media([UInt8])

    static let version: UInt8 = 1

    enum DecodeError: Error, Equatable {
        case empty
        case unsupportedVersion(UInt8)
        case unknownKind(UInt8)
        /// A control message with bytes after it, or media with none.
        case badLength
    }

    private var kind: UInt8 {
        switch self {
        case .join: 1
        case .joinReply: 2
        case .leave: 3
        case .media: 4
        }
    }

    /// The message's bytes.
    func encoded() -> [UInt8] {
        let first = Self.version << 4 | kind
        guard case .media(let packet) = self else { return [first] }
        var bytes = [UInt8]()
        bytes.reserveCapacity(packet.count + 1)
        bytes.append(first)
        bytes.append(contentsOf: packet)
        return bytes
    }

    /// Reads a message.
    static func decode(_ bytes: some Collection<UInt8>) throws(DecodeError) -> GroupVoiceMessage {
        guard let first = bytes.first else { throw .empty }
        guard first >> 4 == version else { throw .unsupportedVersion(first >> 4) }
        let rest = bytes.dropFirst()
        switch first & 0x0F {
        case 1, 2, 3:
            guard rest.isEmpty else { throw .badLength }
            return [1: .join, 2: .joinReply, 3: .leave][first & 0x0F]!
        case 4:
            guard !rest.isEmpty else { throw .badLength }
            return .media(Array(rest))
        default:
            throw .unknownKind(first & 0x0F)
        }
    }
}
