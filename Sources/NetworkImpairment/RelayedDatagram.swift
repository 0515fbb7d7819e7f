import NIOCore

/// A datagram inside ``UDPImpairmentRelay``'s models: the payload plus the client it belongs
/// to, so that one model per direction can serve every client.
///
/// The payload is compacted on creation: NIO reads each datagram into a 64 KiB pooled
/// buffer, and a delayed datagram that kept a slice of it would pin that whole buffer (and
/// stop the pool from reusing it) for as long as it waits.
struct RelayedDatagram: ImpairableDatagram, Sendable {
    /// The client this datagram came from (forward) or goes to (backward).
    var client: SocketAddress
    var payload: ByteBuffer

    init(client: SocketAddress, payload: ByteBuffer, allocator: ByteBufferAllocator) {
        self.client = client
        if payload.storageCapacity > 2 * payload.readableBytes + 256 {
            var compact = allocator.buffer(capacity: payload.readableBytes)
            compact.writeImmutableBuffer(payload)
            self.payload = compact
        } else {
            self.payload = payload
        }
    }

    var impairableByteCount: Int {
        self.payload.impairableByteCount
    }

    mutating func flipBit(at bitIndex: Int) {
        self.payload.flipBit(at: bitIndex)
    }
}
