import NIOCore

/// Bytes a layer under the endpoint writes in front of some of its datagrams, in the same send
/// buffer (an online session's relay header, PROTOCOL §18.7): the endpoint leaves them free, so
/// that a relayed datagram is framed without a copy.
protocol TransmitHeadroom {
    /// Leaves the bytes a datagram to `destination` needs in front of it, at `output`'s writer
    /// index (none for most destinations).
    mutating func reserve(for destination: SocketAddress, in output: inout ByteBuffer)
}

/// No headroom: the endpoint alone on its socket.
struct NoHeadroom: TransmitHeadroom {
    @inline(__always)
    func reserve(for destination: SocketAddress, in output: inout ByteBuffer) {}
}
