import NIOCore

/// The only handler in an endpoint's channel pipeline: hands received datagrams to the core
/// (splitting receive-offload batches back into datagrams) and tells it when a read batch ends
/// and when the socket becomes writable again.
final class EndpointChannelHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let core: EndpointCore

    init(core: EndpointCore) {
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = self.unwrapInboundIn(data)
        self.core.receive(envelope)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.core.runCycle()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.core.runCycle()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.core.socketClosed(context.channel)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // ICMP errors (e.g. port unreachable) surface as read errors on UDP sockets; the link's own
        // timers decide what they mean, so the channel stays open.
    }
}
