import NIOCore

/// The frames a data packet's plaintext is made of (docs/PROTOCOL.md §5).
///
/// A packet carries any mix of frames; each starts with a one-byte type. Decoding is strict: an
/// unknown type or a frame running past the end of the packet is a protocol violation.
enum Frame: Equatable {
    case ping
    case ack(AckFrame)
    /// Bytes of the reliable stream starting at `offset`.
    case reliable(offset: UInt64, data: ByteBuffer)
    /// A whole unreliable message.
    case unreliable(ByteBuffer)
    case unreliableFragment(UnreliableFragment)
    /// The receiver accepts reliable stream bytes below `maxOffset`.
    case window(maxOffset: UInt64)
    case close(code: UInt16)

    enum TypeByte: UInt8 {
        case padding = 0x00
        case ping = 0x01
        case ack = 0x02
        case reliable = 0x03
        case unreliable = 0x04
        case unreliableFragment = 0x05
        case window = 0x06
        case close = 0x07
    }
}

/// A piece of an unreliable message too large for one packet.
struct UnreliableFragment: Equatable {
    var messageID: UInt64
    var totalLength: UInt64
    var offset: UInt64
    var data: ByteBuffer
}

/// Acknowledged packet numbers: the largest, then ranges going down, as in QUIC's ACK frame.
struct AckFrame: Equatable {
    /// Acknowledged ranges, highest first, disjoint and non-adjacent.
    var ranges: [ClosedRange<UInt64>]
    /// How long the receiver held the acknowledgement of the largest packet, in microseconds.
    var ackDelayMicroseconds: UInt64

    var largest: UInt64 { self.ranges[0].upperBound }
}

/// Why a packet's plaintext could not be read.
enum FrameDecodingError: Error, Equatable {
    case unknownFrameType(UInt8)
    case truncated
    case invalidAckRanges
    case valueOutOfRange
}

// MARK: - Decoding

/// Reads frames one at a time from a decrypted packet, skipping padding.
struct FrameReader {
    private var buffer: ByteBuffer

    init(_ plaintext: ByteBuffer) {
        self.buffer = plaintext
    }

    mutating func next() throws(FrameDecodingError) -> Frame? {
        while let typeByte = self.buffer.readInteger(as: UInt8.self) {
            guard let type = Frame.TypeByte(rawValue: typeByte) else {
                throw .unknownFrameType(typeByte)
            }
            switch type {
            case .padding:
                continue
            case .ping:
                return .ping
            case .ack:
                return .ack(try self.readAck())
            case .reliable:
                let offset = try self.readVarInt()
                let data = try self.readLengthPrefixed()
                guard offset <= VarInt.maximum - UInt64(data.readableBytes) else { throw .valueOutOfRange }
                return .reliable(offset: offset, data: data)
            case .unreliable:
                return .unreliable(try self.readLengthPrefixed())
            case .unreliableFragment:
                let id = try self.readVarInt()
                let total = try self.readVarInt()
                let offset = try self.readVarInt()
                let data = try self.readLengthPrefixed()
                let (end, overflow) = offset.addingReportingOverflow(UInt64(data.readableBytes))
                guard !overflow, end <= total, data.readableBytes > 0 else { throw .valueOutOfRange }
                return .unreliableFragment(UnreliableFragment(messageID: id, totalLength: total, offset: offset, data: data))
            case .window:
                return .window(maxOffset: try self.readVarInt())
            case .close:
                guard let code = self.buffer.readInteger(as: UInt16.self) else { throw .truncated }
                return .close(code: code)
            }
        }
        return nil
    }

    private mutating func readVarInt() throws(FrameDecodingError) -> UInt64 {
        guard let value = self.buffer.readVarInt() else { throw .truncated }
        return value
    }

    private mutating func readLengthPrefixed() throws(FrameDecodingError) -> ByteBuffer {
        let length = try self.readVarInt()
        guard length <= UInt64(self.buffer.readableBytes), let data = self.buffer.readSlice(length: Int(length)) else {
            throw .truncated
        }
        return data
    }

    private mutating func readAck() throws(FrameDecodingError) -> AckFrame {
        let largest = try self.readVarInt()
        let delay = try self.readVarInt()
        let rangeCount = try self.readVarInt()
        let firstLength = try self.readVarInt()
        guard firstLength <= largest else { throw .invalidAckRanges }
        // Each further range takes at least two bytes, so a count larger than that is a lie.
        guard rangeCount <= UInt64(self.buffer.readableBytes / 2) else { throw .invalidAckRanges }
        var ranges: [ClosedRange<UInt64>] = []
        ranges.reserveCapacity(Int(rangeCount) + 1)
        var smallest = largest - firstLength
        ranges.append(smallest...largest)
        for _ in 0..<rangeCount {
            let gap = try self.readVarInt()
            let length = try self.readVarInt()
            // The next range ends gap + 2 below the previous range's smallest value.
            guard smallest >= gap + 2 else { throw .invalidAckRanges }
            let upper = smallest - gap - 2
            guard length <= upper else { throw .invalidAckRanges }
            smallest = upper - length
            ranges.append(smallest...upper)
        }
        return AckFrame(ranges: ranges, ackDelayMicroseconds: delay)
    }
}

// MARK: - Encoding

/// Writes frames and computes their sizes, so that packet assembly can decide what fits.
enum FrameWriter {
    static func writePing(into buffer: inout ByteBuffer) {
        buffer.writeInteger(Frame.TypeByte.ping.rawValue)
    }

    static func writeWindow(maxOffset: UInt64, into buffer: inout ByteBuffer) {
        buffer.writeInteger(Frame.TypeByte.window.rawValue)
        buffer.writeVarInt(maxOffset)
    }

    static func windowSize(maxOffset: UInt64) -> Int { 1 + VarInt.encodedLength(maxOffset) }

    static func writeClose(code: UInt16, into buffer: inout ByteBuffer) {
        buffer.writeInteger(Frame.TypeByte.close.rawValue)
        buffer.writeInteger(code)
    }

    static let closeSize = 3

    /// The bytes a reliable frame header takes for a chunk at `offset` of `length` bytes.
    static func reliableHeaderSize(offset: UInt64, length: Int) -> Int {
        1 + VarInt.encodedLength(offset) + VarInt.encodedLength(UInt64(length))
    }

    /// Writes the header of a reliable frame; the caller appends the `length` data bytes.
    static func writeReliableHeader(offset: UInt64, length: Int, into buffer: inout ByteBuffer) {
        let size = Self.reliableHeaderSize(offset: offset, length: length)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { bytes in
            bytes[0] = Frame.TypeByte.reliable.rawValue
            let afterOffset = 1 + VarInt.encode(offset, into: UnsafeMutableRawBufferPointer(rebasing: bytes[1...]))
            return afterOffset + VarInt.encode(UInt64(length), into: UnsafeMutableRawBufferPointer(rebasing: bytes[afterOffset...]))
        }
    }

    static func unreliableSize(length: Int) -> Int {
        1 + VarInt.encodedLength(UInt64(length)) + length
    }

    static func writeUnreliable(_ message: ByteBuffer, into buffer: inout ByteBuffer) {
        buffer.writeInteger(Frame.TypeByte.unreliable.rawValue)
        buffer.writeVarInt(UInt64(message.readableBytes))
        buffer.writeImmutableBuffer(message)
    }

    static func fragmentHeaderSize(messageID: UInt64, totalLength: Int, offset: Int, length: Int) -> Int {
        1 + VarInt.encodedLength(messageID) + VarInt.encodedLength(UInt64(totalLength))
            + VarInt.encodedLength(UInt64(offset)) + VarInt.encodedLength(UInt64(length))
    }

    static func writeFragment(messageID: UInt64, totalLength: Int, offset: Int, data: ByteBuffer, into buffer: inout ByteBuffer) {
        buffer.writeInteger(Frame.TypeByte.unreliableFragment.rawValue)
        buffer.writeVarInt(messageID)
        buffer.writeVarInt(UInt64(totalLength))
        buffer.writeVarInt(UInt64(offset))
        buffer.writeVarInt(UInt64(data.readableBytes))
        buffer.writeImmutableBuffer(data)
    }

    /// Writes an ACK frame for the highest ranges of `received` that fit in `space` bytes (at most
    /// `maximumRanges`). Returns false, writing nothing, when not even the first range fits.
    @discardableResult
    static func writeAck(
        received: IntervalSet,
        ackDelayMicroseconds: UInt64,
        maximumRanges: Int,
        space: Int,
        into buffer: inout ByteBuffer
    ) -> Bool {
        let ranges = received.ranges
        guard let top = ranges.last else { return false }
        let largest = top.upperBound - 1
        let firstLength = largest - top.lowerBound
        let fixed = 1 + VarInt.encodedLength(largest) + VarInt.encodedLength(ackDelayMicroseconds) + VarInt.encodedLength(firstLength)
        // Decide how many further ranges fit (the count's own size is bounded by 2 bytes here).
        var extra = 0
        var used = fixed + 2
        guard used <= space else { return false }
        var previousLower = top.lowerBound
        var index = ranges.count - 2
        while index >= 0, extra < maximumRanges - 1 {
            let range = ranges[index]
            let gap = previousLower - range.upperBound - 1
            let length = UInt64(range.count) - 1
            let cost = VarInt.encodedLength(gap) + VarInt.encodedLength(length)
            if used + cost > space { break }
            used += cost
            extra += 1
            previousLower = range.lowerBound
            index -= 1
        }
        buffer.writeInteger(Frame.TypeByte.ack.rawValue)
        buffer.writeVarInt(largest)
        buffer.writeVarInt(ackDelayMicroseconds)
        buffer.writeVarInt(UInt64(extra))
        buffer.writeVarInt(firstLength)
        previousLower = top.lowerBound
        for offset in 0..<extra {
            let range = ranges[ranges.count - 2 - offset]
            // QUIC's gap is one less than the count of missing packet numbers.
            buffer.writeVarInt(previousLower - range.upperBound - 1)
            buffer.writeVarInt(UInt64(range.count) - 1)
            previousLower = range.lowerBound
        }
        return true
    }
}
