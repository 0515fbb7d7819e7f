import NIOCore

// MARK: - Listen socket

/// Hands every datagram a client sends to the relay's socket to ``RelayCore``.
final class ListenHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let core: RelayCore

    init(core: RelayCore) {
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        self.core.receivedFromClient(envelope.data, from: envelope.remoteAddress)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.core.pumpForward()
        context.fireChannelReadComplete()
    }

    /// Datagram sockets report non-fatal errors (for example ECONNREFUSED after a client went
    /// away) and stay open; NIO closes the channel itself on fatal ones. Either way there is
    /// nothing to do here, and the error must not travel further as "unhandled".
    func errorCaught(context: ChannelHandlerContext, error: any Error) {}
}

// MARK: - Upstream socket

/// Hands every datagram the target sends to one client's upstream socket to ``RelayCore``,
/// and tells it when that socket closes.
final class UpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let client: SocketAddress
    private let core: RelayCore

    init(client: SocketAddress, core: RelayCore) {
        self.client = client
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        self.core.receivedFromTarget(envelope.data, for: self.client)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.core.pumpBackward()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.core.upstreamClosed(context.channel, for: self.client)
        context.fireChannelInactive()
    }

    /// A connected UDP socket reports ECONNREFUSED when the target's port is closed; the
    /// datagram is simply lost, as on a real network.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {}
}
