import NIOCore

/// A second machine on a driven socket (PROTOCOL §1.2, §18.1): the datagrams whose first byte
/// the socket's own machine does not use are the tenant's, and the own machine's datagrams to
/// the tenant's virtual destinations are the tenant's to carry. An online session's socket
/// has the transport as its own machine and the room client (rendezvous, relay) as tenant.
///
/// Every method runs on the socket's event loop (``eventLoop``).
@_spi(Machine) public protocol SocketTenant: AnyObject, Sendable {
    /// The event loop of the socket the tenant shares (the owner binds the socket on it).
    var eventLoop: EventLoop { get }

    /// Starts writing the tenant's own datagrams to `socket` (which the tenant must not close),
    /// bound at `localAddress`. `owner` takes datagrams for the socket's own machine that reach
    /// the tenant by another way (a TCP stream to its relay).
    func attach(_ socket: any DatagramSocket<SocketAddress>, localAddress: SocketAddress?, owner: TenantOwner)

    /// A datagram whose first byte is not the own machine's. Returns a datagram for the own
    /// machine carried inside it (a relayed one, unwrapped) and the source to give it; nil when
    /// the tenant took the datagram.
    func receive(_ datagram: ByteBuffer, from source: SocketAddress) -> (ByteBuffer, SocketAddress)?

    /// A read batch ended, or the socket became writable again: the tenant runs its cycle.
    func receiveComplete()

    /// Where the own machine's datagrams to `destination` go: as they are (an ordinary address),
    /// straight to another address (a virtual one with a direct path), or to the tenant.
    func route(_ destination: SocketAddress) -> TenantRoute

    /// The source to give the own machine for its datagram from `source` (the virtual address
    /// of a direct path's far end, else `source`).
    func translate(source: SocketAddress) -> SocketAddress

    /// Takes the own machine's datagram to a virtual destination that ``route(_:)`` said the
    /// tenant carries. Called for each such datagram of a batch, then ``carryComplete()`` once.
    func carry(_ datagram: ByteBuffer, to destination: SocketAddress)

    /// The datagrams of one batch are all handed over: the tenant sends them now (the socket
    /// may be closing right after).
    func carryComplete()

    /// The socket is closing: the tenant says its last words (a goodbye to its server) and
    /// stops. The socket closes when the future completes.
    func close() -> EventLoopFuture<Void>
}

/// How a tenant hands datagrams to the socket's own machine outside a read of the socket.
@_spi(Machine) public struct TenantOwner: Sendable {
    /// Takes one datagram, from a source (event loop only).
    public var receive: @Sendable (ByteBuffer, SocketAddress) -> Void
    /// The datagrams handed over so far are all there: the machine runs its cycle.
    public var receiveComplete: @Sendable () -> Void

    public init(receive: @escaping @Sendable (ByteBuffer, SocketAddress) -> Void, receiveComplete: @escaping @Sendable () -> Void) {
        self.receive = receive
        self.receiveComplete = receiveComplete
    }
}

/// Where a datagram of a socket's own machine goes (``SocketTenant/route(_:)``).
@_spi(Machine) public enum TenantRoute: Sendable, Equatable {
    /// An ordinary address: sent as it is.
    case own
    /// A virtual address the tenant has a direct path for: sent there instead.
    case direct(SocketAddress)
    /// A virtual address the tenant carries (through its relay).
    case carried
}

/// The own machine's side of a socket with a tenant: datagrams to the tenant's virtual
/// destinations go to the tenant; the rest, and closing, to the socket itself (after the tenant
/// has closed).
@_spi(Machine) public final class TenantRoutedSocket: DatagramSocket {
    public typealias Destination = SocketAddress

    @usableFromInline let base: any DatagramSocket<SocketAddress>
    @usableFromInline let tenant: any SocketTenant

    public init(base: any DatagramSocket<SocketAddress>, tenant: any SocketTenant) {
        self.base = base
        self.tenant = tenant
    }

    public var isWritable: Bool { self.base.isWritable }
    public var allocator: ByteBufferAllocator { self.base.allocator }

    public func write(_ batch: TransmitBatch<SocketAddress>, written: EventLoopPromise<Void>?) -> [SocketAddress] {
        var kept = TransmitBatch<SocketAddress>(buffer: batch.buffer)
        var carried = false
        var changed = false
        for index in batch.datagrams.indices {
            var datagram = batch.datagrams[index]
            switch self.tenant.route(datagram.destination) {
            case .own:
                kept.datagrams.append(datagram)
            case .direct(let address):
                datagram.destination = address
                kept.datagrams.append(datagram)
                changed = true
            case .carried:
                self.tenant.carry(batch.bytes(of: index), to: datagram.destination)
                carried = true
                changed = true
            }
        }
        if carried { self.tenant.carryComplete() }
        guard changed else { return self.base.write(batch, written: written) }
        guard !kept.datagrams.isEmpty else {
            written?.succeed()
            return []
        }
        return self.base.write(kept, written: written)
    }

    public func isRoutable(_ destination: SocketAddress) -> Bool {
        switch self.tenant.route(destination) {
        case .own: self.base.isRoutable(destination)
        case .direct(let address): self.base.isRoutable(address)
        case .carried: true
        }
    }

    public func close() -> EventLoopFuture<Void> {
        // Event loop only, as every socket method: the base is touched on that loop.
        let base = NIOLoopBound(self.base, eventLoop: self.tenant.eventLoop)
        return self.tenant.close().flatMap { base.value.close() }
    }
}

/// The tenant's side of a shared socket: writes go to it, closing is left to its owner.
@_spi(Machine) public final class BorrowedSocket: DatagramSocket {
    public typealias Destination = SocketAddress

    @usableFromInline let base: any DatagramSocket<SocketAddress>
    @usableFromInline let eventLoop: EventLoop

    public init(_ base: any DatagramSocket<SocketAddress>, eventLoop: EventLoop) {
        self.base = base
        self.eventLoop = eventLoop
    }

    public var isWritable: Bool { self.base.isWritable }
    public var allocator: ByteBufferAllocator { self.base.allocator }

    public func write(_ batch: TransmitBatch<SocketAddress>, written: EventLoopPromise<Void>?) -> [SocketAddress] {
        self.base.write(batch, written: written)
    }

    public func isRoutable(_ destination: SocketAddress) -> Bool { self.base.isRoutable(destination) }

    /// Does nothing: the owner closes the socket.
    public func close() -> EventLoopFuture<Void> {
        self.eventLoop.makeSucceededVoidFuture()
    }
}
