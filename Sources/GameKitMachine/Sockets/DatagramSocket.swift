import NIOCore

/// Datagrams a machine produced in one round, written back to back into one buffer: the
/// driver polls them in, a socket slices them out (and may merge runs into one segmentation
/// offload send).
package struct TransmitBatch<Destination> {
    /// Where each datagram goes and where its bytes lie in ``buffer``.
    package struct Datagram {
        package var destination: Destination
        package var start: Int
        package var length: Int
    }

    /// The datagrams' bytes, one after another.
    package var buffer: ByteBuffer
    package var datagrams: [Datagram] = []

    package init(buffer: ByteBuffer) {
        self.buffer = buffer
    }

    /// The bytes of datagram `index`, without copying.
    package func bytes(of index: Int) -> ByteBuffer {
        let datagram = self.datagrams[index]
        return self.buffer.getSlice(at: datagram.start, length: datagram.length)!
    }
}

/// What ``DatagramDriver`` writes a machine's datagrams to: one UDP socket
/// (``UDPChannelSocket``), or several (mDNS keeps one per interface and address family).
/// Event loop only.
package protocol DatagramSocket<Destination>: AnyObject {
    associatedtype Destination

    /// False while the kernel will take no more: the driver stops polling datagrams until a
    /// writability change runs a cycle.
    var isWritable: Bool { get }

    /// Where the driver allocates the buffer it polls datagrams into.
    var allocator: ByteBufferAllocator { get }

    /// Writes and flushes the batch. `written` completes once every datagram has left (or failed
    /// to). Returns the destinations the socket has no route to: their datagrams were counted
    /// and dropped, for the machine to find another way (``DatagramMachine/handleUnroutable(_:now:isRoutable:)``).
    func write(_ batch: TransmitBatch<Destination>, written: EventLoopPromise<Void>?) -> [Destination]

    /// Whether datagrams to `destination` would be sent now.
    func isRoutable(_ destination: Destination) -> Bool

    /// Closes the socket (or sockets).
    func close() -> EventLoopFuture<Void>
}
