import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A plain NIO datagram socket for relay tests: it records every datagram it receives and,
/// when it plays the target, echoes each one back to its sender.
final class UDPPeer: Sendable {
    let channel: any Channel
    private let inbox: NIOLockedValueBox<[AddressedEnvelope<ByteBuffer>]>

    private init(channel: any Channel, inbox: NIOLockedValueBox<[AddressedEnvelope<ByteBuffer>]>) {
        self.channel = channel
        self.inbox = inbox
    }

    /// Binds an ephemeral port on `host` (loopback).
    static func bind(on group: any EventLoopGroup, host: String = "127.0.0.1", echo: Bool) async throws -> UDPPeer {
        let inbox = NIOLockedValueBox<[AddressedEnvelope<ByteBuffer>]>([])
        let channel = try await DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
            .channelOption(.socketOption(.so_sndbuf), value: 4 << 20)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 65_536))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RecordingHandler(inbox: inbox, echo: echo))
                }
            }
            .bind(host: host, port: 0)
            .get()
        return UDPPeer(channel: channel, inbox: inbox)
    }

    var address: SocketAddress {
        self.channel.localAddress!
    }

    /// Everything received so far, in arrival order.
    var received: [AddressedEnvelope<ByteBuffer>] {
        self.inbox.withLockedValue { $0 }
    }

    /// The payloads received so far, in arrival order.
    var receivedPayloads: [[UInt8]] {
        self.received.map { Array($0.data.readableBytesView) }
    }

    func send(_ bytes: [UInt8], to address: SocketAddress) async throws {
        try await self.channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: bytes))).get()
    }

    /// Waits until at least `count` datagrams have arrived, or `timeout` has passed (so a
    /// test with a bug fails instead of hanging). Returns whether the count was reached.
    @discardableResult
    func waitForReceived(atLeast count: Int, timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if self.inbox.withLockedValue({ $0.count }) >= count { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return self.inbox.withLockedValue { $0.count } >= count
    }

    func close() async {
        try? await self.channel.close().get()
    }
}

// MARK: - Handler

private final class RecordingHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let inbox: NIOLockedValueBox<[AddressedEnvelope<ByteBuffer>]>
    private let echo: Bool

    init(inbox: NIOLockedValueBox<[AddressedEnvelope<ByteBuffer>]>, echo: Bool) {
        self.inbox = inbox
        self.echo = echo
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        self.inbox.withLockedValue { $0.append(envelope) }
        if self.echo {
            let reply = AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: envelope.data)
            context.writeAndFlush(Self.wrapOutboundOut(reply), promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {}
}
