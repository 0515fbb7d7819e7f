import NIOCore

/// Limits each side announces in its handshake message, encrypted with the handshake payload.
///
/// A sender obeys the receiver's limits: it never sends a reliable message larger than
/// `maxReliableMessageSize`, a datagram larger than `maxDatagramSize`, or reliable bytes beyond the
/// receive window; and it uses `maxAckDelay` in its retransmission timeout.
struct TransportParameters: Equatable, Sendable {
    static let encodedSize = 20

    var receiveWindow: UInt32
    var maxReliableMessageSize: UInt32
    var maxUnreliableMessageSize: UInt32
    var maxAckDelayMicroseconds: UInt32
    var maxDatagramSize: UInt16
    /// The `data ciphers` field (PROTOCOL §3.7): in an initiation, one bit per ``DataCipher`` the
    /// initiator accepts; in a response, the one the responder chose. 0 (a 0.1 peer, which wrote
    /// it as reserved) means ChaCha20-Poly1305.
    var dataCiphers: UInt16 = 0

    func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(self.receiveWindow)
        buffer.writeInteger(self.maxReliableMessageSize)
        buffer.writeInteger(self.maxUnreliableMessageSize)
        buffer.writeInteger(self.maxAckDelayMicroseconds)
        buffer.writeInteger(self.maxDatagramSize)
        buffer.writeInteger(self.dataCiphers)
    }

    /// Reads the parameters, or returns nil when they are truncated or out of range.
    static func decode(from buffer: inout ByteBuffer) -> TransportParameters? {
        guard
            let window = buffer.readInteger(as: UInt32.self),
            let reliable = buffer.readInteger(as: UInt32.self),
            let unreliable = buffer.readInteger(as: UInt32.self),
            let ackDelay = buffer.readInteger(as: UInt32.self),
            let datagram = buffer.readInteger(as: UInt16.self),
            let ciphers = buffer.readInteger(as: UInt16.self)
        else { return nil }
        let parameters = TransportParameters(
            receiveWindow: window,
            maxReliableMessageSize: reliable,
            maxUnreliableMessageSize: unreliable,
            maxAckDelayMicroseconds: ackDelay,
            maxDatagramSize: datagram,
            dataCiphers: ciphers
        )
        guard parameters.isValid else { return nil }
        return parameters
    }

    /// Whether the values allow a working link at all.
    var isValid: Bool {
        Int(self.maxDatagramSize) >= WireSize.minimumDatagram
            && UInt64(self.receiveWindow) >= UInt64(self.maxReliableMessageSize) + 16
            && self.maxAckDelayMicroseconds <= 1_000_000
    }
}
