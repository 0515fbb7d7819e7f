import NIOCore

/// Datagrams a machine produced in one round, written back to back into one buffer: the
/// driver polls them in, a socket slices them out (and may merge runs into one segmentation
/// offload send).
@_spi(Machine) public struct TransmitBatch<Destination> {
    /// Where each datagram goes and where its bytes lie in ``buffer``.
    public struct Datagram {
        public var destination: Destination
        public var start: Int
        public var length: Int

        @inlinable
        public init(destination: Destination, start: Int, length: Int) {
            self.destination = destination
            self.start = start
            self.length = length
        }
    }

    /// The datagrams' bytes, one after another.
    public var buffer: ByteBuffer
    public var datagrams: [Datagram] = []

    @inlinable
    public init(buffer: ByteBuffer) {
        self.buffer = buffer
    }

    /// The bytes of datagram `index`, without copying.
    @inlinable
    public func bytes(of index: Int) -> ByteBuffer {
        let datagram = self.datagrams[index]
        return self.buffer.getSlice(at: datagram.start, length: datagram.length)!
    }
}

/// What ``DatagramDriver`` writes a machine's datagrams to: one UDP socket
/// (``UDPChannelSocket``), or several (mDNS keeps one per interface and address family).
/// Event loop only.
@_spi(Machine) public protocol DatagramSocket<Destination>: AnyObject {
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
