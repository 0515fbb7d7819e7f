import NIOCore

/// The only handler in a driven socket's pipeline: hands each received datagram to the driver
/// (splitting receive-offload batches back into datagrams), runs a cycle when a read batch ends
/// and when the socket becomes writable again, and reports the channel going inactive.
@_spi(Machine) public final class DriverChannelHandler<Machine: DatagramMachine>: ChannelInboundHandler {
    public typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let receive: (ByteBuffer, Machine.Source) -> Void
    private let cycle: () -> Void
    private let source: (AddressedEnvelope<ByteBuffer>) -> Machine.Source?
    private let inactive: (Channel) -> Void

    /// `source` names where an envelope came from, or nil to drop it; `inactive` hears the
    /// channel closing.
    ///
    /// Inlinable, so that the closures into the driver are made where the machine's type is
    /// known: the driver's cycle then runs specialized for it (a generic one looked type
    /// metadata up on every datagram).
    @inlinable
    public convenience init(
        driver: DatagramDriver<Machine>,
        source: @escaping (AddressedEnvelope<ByteBuffer>) -> Machine.Source?,
        inactive: @escaping (Channel) -> Void = { _ in }
    ) {
        self.init(
            receive: { driver.receive($0, from: $1) }, cycle: { driver.runCycle() }, source: source, inactive: inactive)
    }

    @usableFromInline
    init(
        receive: @escaping (ByteBuffer, Machine.Source) -> Void, cycle: @escaping () -> Void,
        source: @escaping (AddressedEnvelope<ByteBuffer>) -> Machine.Source?, inactive: @escaping (Channel) -> Void
    ) {
        self.receive = receive
        self.cycle = cycle
        self.source = source
        self.inactive = inactive
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        guard let source = self.source(envelope) else { return }
        let data = envelope.data
        guard let segmentSize = envelope.metadata?.segmentSize, segmentSize > 0, data.readableBytes > segmentSize else {
            self.receive(data, source)
            return
        }
        var offset = 0
        while offset < data.readableBytes {
            let length = min(segmentSize, data.readableBytes - offset)
            self.receive(data.getSlice(at: data.readerIndex + offset, length: length)!, source)
            offset += length
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        self.cycle()
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.cycle()
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        self.inactive(context.channel)
    }

    public func errorCaught(context: ChannelHandlerContext, error: Error) {
        // ICMP errors (port unreachable, say) surface as read errors on UDP sockets; the
        // machine's own timers decide what they mean, so the channel stays open.
    }
}
