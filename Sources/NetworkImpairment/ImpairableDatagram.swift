import NIOCore

/// A datagram that ``ImpairmentModel`` can carry and damage.
///
/// The model is generic so that the transport's property tests can push their own datagram
/// types (or plain byte arrays) through it with no copying, while the relay pushes
/// `ByteBuffer`s. All the model needs for corruption is the payload length and a way to
/// flip one bit.
public protocol ImpairableDatagram {
    /// The number of payload bytes that corruption may touch.
    var impairableByteCount: Int { get }

    /// Flips one bit of the payload. Bit `i` is bit `i % 8` (0 = least significant) of payload
    /// byte `i / 8`.
    ///
    /// - Precondition: `0 <= bitIndex < impairableByteCount * 8`.
    mutating func flipBit(at bitIndex: Int)
}

// MARK: - ByteBuffer

/// A `ByteBuffer`'s payload is its readable bytes; bytes before the reader index are untouched.
extension ByteBuffer: ImpairableDatagram {
    /// The number of readable bytes.
    public var impairableByteCount: Int {
        self.readableBytes
    }

    /// Flips one bit of the readable bytes (copying the storage first if it is shared).
    public mutating func flipBit(at bitIndex: Int) {
        precondition(
            bitIndex >= 0 && bitIndex < self.readableBytes * 8,
            "bit \(bitIndex) is outside the \(self.readableBytes) readable bytes"
        )
        let index = self.readerIndex + bitIndex / 8
        let byte = self.getInteger(at: index, as: UInt8.self)!
        self.setInteger(byte ^ (1 << UInt8(bitIndex % 8)), at: index)
    }
}

// MARK: - [UInt8]

/// A byte array's payload is all of its bytes.
extension Array: ImpairableDatagram where Element == UInt8 {
    /// The number of bytes.
    public var impairableByteCount: Int {
        self.count
    }

    /// Flips one bit of the array.
    public mutating func flipBit(at bitIndex: Int) {
        precondition(bitIndex >= 0 && bitIndex < self.count * 8, "bit \(bitIndex) is outside the \(self.count) bytes")
        self[bitIndex / 8] ^= 1 << UInt8(bitIndex % 8)
    }
}
