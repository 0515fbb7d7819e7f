import NIOCore

/// The only handler in a driven socket's pipeline: hands each received datagram to the driver
/// (splitting receive-offload batches back into datagrams), runs a cycle when a read batch ends
/// and when the socket becomes writable again, and reports the channel going inactive.
package final class DriverChannelHandler<Machine: DatagramMachine>: ChannelInboundHandler {
    package typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let driver: DatagramDriver<Machine>
    private let source: (AddressedEnvelope<ByteBuffer>) -> Machine.Source?
    private let inactive: (Channel) -> Void

    /// `source` names where an envelope came from, or nil to drop it; `inactive` hears the
    /// channel closing.
    package init(
        driver: DatagramDriver<Machine>,
        source: @escaping (AddressedEnvelope<ByteBuffer>) -> Machine.Source?,
        inactive: @escaping (Channel) -> Void = { _ in }
    ) {
        self.driver = driver
        self.source = source
        self.inactive = inactive
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        guard let source = self.source(envelope) else { return }
        let data = envelope.data
        guard let segmentSize = envelope.metadata?.segmentSize, segmentSize > 0, data.readableBytes > segmentSize else {
            self.driver.receive(data, from: source)
            return
        }
        var offset = 0
        while offset < data.readableBytes {
            let length = min(segmentSize, data.readableBytes - offset)
            self.driver.receive(data.getSlice(at: data.readerIndex + offset, length: length)!, from: source)
            offset += length
        }
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        self.driver.runCycle()
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.driver.runCycle()
        }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        self.inactive(context.channel)
    }

    package func errorCaught(context: ChannelHandlerContext, error: Error) {
        // ICMP errors (port unreachable, say) surface as read errors on UDP sockets; the
        // machine's own timers decide what they mean, so the channel stays open.
    }
}
