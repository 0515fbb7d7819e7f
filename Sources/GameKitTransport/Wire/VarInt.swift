import NIOCore

/// Variable-length integers as QUIC encodes them (RFC 9000 §16).
///
/// The two high bits of the first byte give the length (1, 2, 4 or 8 bytes); the remaining bits
/// hold the value in network byte order. Frames use them for offsets, lengths and packet numbers
/// so that small values, the common case, cost one or two bytes.
enum VarInt {
    /// The largest encodable value, 2⁶² − 1.
    static let maximum: UInt64 = (1 << 62) - 1

    /// The number of bytes `value` takes on the wire.
    static func encodedLength(_ value: UInt64) -> Int {
        if value < (1 << 6) { return 1 }
        if value < (1 << 14) { return 2 }
        if value < (1 << 30) { return 4 }
        precondition(value <= maximum, "value too large for a variable-length integer")
        return 8
    }

    /// Writes `value` at the start of `bytes` (which must have room) and returns its length.
    static func encode(_ value: UInt64, into bytes: UnsafeMutableRawBufferPointer) -> Int {
        let length = Self.encodedLength(value)
        let prefix: UInt64 = length == 1 ? 0 : length == 2 ? 0x4000 : length == 4 ? 0x8000_0000 : 0xC000_0000_0000_0000
        var bigEndian = (value | prefix).bigEndian
        withUnsafeBytes(of: &bigEndian) { word in
            bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: word[(8 - length)...]))
        }
        return length
    }
}

extension ByteBuffer {
    /// Appends `value` as a variable-length integer and returns the number of bytes written.
    @discardableResult
    mutating func writeVarInt(_ value: UInt64) -> Int {
        switch VarInt.encodedLength(value) {
        case 1: return self.writeInteger(UInt8(value))
        case 2: return self.writeInteger(UInt16(value) | 0x4000)
        case 4: return self.writeInteger(UInt32(value) | 0x8000_0000)
        default: return self.writeInteger(value | 0xC000_0000_0000_0000)
        }
    }

    /// Reads a variable-length integer, or returns nil (consuming nothing) when the readable
    /// bytes end before it does.
    mutating func readVarInt() -> UInt64? {
        guard let first = self.getInteger(at: self.readerIndex, as: UInt8.self) else { return nil }
        switch first >> 6 {
        case 0:
            self.moveReaderIndex(forwardBy: 1)
            return UInt64(first)
        case 1:
            return self.readInteger(as: UInt16.self).map { UInt64($0 & 0x3FFF) }
        case 2:
            return self.readInteger(as: UInt32.self).map { UInt64($0 & 0x3FFF_FFFF) }
        default:
            return self.readInteger(as: UInt64.self).map { $0 & 0x3FFF_FFFF_FFFF_FFFF }
        }
    }
}
