@_spi(Machine) import GameKitMachine
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Datagrams over TCP, for networks that block UDP (PROTOCOL §18.12): each datagram is a frame of
/// a 2-byte big-endian length and its bytes. The rendezvous accepts such streams on its port; a
/// session opens one to its rendezvous (and relay) when UDP gets no answer.
final class FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    /// The largest frame accepted (a datagram never exceeds it).
    static let maximumFrame = 2048

    func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self) else { return .needMoreData }
        guard Int(length) <= Self.maximumFrame else { throw FrameTooLarge() }
        guard buffer.readableBytes >= 2 + Int(length) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 2)
        context.fireChannelRead(Self.wrapInboundOut(buffer.readSlice(length: Int(length))!))
        return .continue
    }

    struct FrameTooLarge: Error {}
}

/// The TCP streams of a socket's datagrams, by the address they stand for: a datagram to an
/// address with a stream goes down that stream, framed; other datagrams go to the UDP socket.
/// A stream that cannot take more (its kernel buffer and NIO's write buffer full) drops what is
/// written to it, as a full UDP path would, so that nothing arrives late in a burst.
final class StreamCarrier: @unchecked Sendable {
    private let streams = NIOLockedValueBox<[SocketAddress: Channel]>([:])
    /// Datagrams dropped because a stream was full.
    let dropped = NIOLockedValueBox<UInt64>(0)
    /// Bytes queued for a stream before datagrams to it are dropped.
    static let writeBufferLimit = 256 << 10

    var isEmpty: Bool { self.streams.withLockedValue { $0.isEmpty } }

    func add(_ channel: Channel, for address: SocketAddress) {
        self.streams.withLockedValue { $0[address] = channel }
    }

    /// Forgets `channel`, the stream for `address` (unless another has replaced it).
    func remove(_ channel: Channel, for address: SocketAddress) {
        self.streams.withLockedValue { streams in
            if streams[address] === channel { streams[address] = nil }
        }
    }

    func stream(to address: SocketAddress) -> Channel? {
        self.streams.withLockedValue { $0[address] }
    }

    /// Writes `bytes` to the stream for `address`; false when there is none.
    func send(_ bytes: ByteBuffer, to address: SocketAddress) -> Bool {
        guard let channel = self.stream(to: address) else { return false }
        guard channel.isWritable else {
            self.dropped.withLockedValue { $0 += 1 }
            return true
        }
        var frame = channel.allocator.buffer(capacity: 2 + bytes.readableBytes)
        frame.writeInteger(UInt16(bytes.readableBytes))
        frame.writeImmutableBuffer(bytes)
        channel.writeAndFlush(frame, promise: nil)
        return true
    }

    func closeAll() {
        let channels = self.streams.withLockedValue { streams -> [Channel] in
            defer { streams.removeAll() }
            return Array(streams.values)
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// Channel options of every stream: small buffers, so a full one shows at once.
    static func configure(_ channel: Channel) -> EventLoopFuture<Void> {
        channel.setOption(.writeBufferWaterMark, value: .init(low: Self.writeBufferLimit / 2, high: Self.writeBufferLimit))
            .flatMap { channel.setOption(.socketOption(.tcp_nodelay), value: 1) }
    }
}

/// A datagram socket whose datagrams to some addresses go down TCP streams instead.
final class StreamRoutedSocket: DatagramSocket {
    typealias Destination = SocketAddress

    let base: any DatagramSocket<SocketAddress>
    let carrier: StreamCarrier

    init(base: any DatagramSocket<SocketAddress>, carrier: StreamCarrier) {
        self.base = base
        self.carrier = carrier
    }

    var isWritable: Bool { self.base.isWritable }
    var allocator: ByteBufferAllocator { self.base.allocator }

    func write(_ batch: TransmitBatch<SocketAddress>, written: EventLoopPromise<Void>?) -> [SocketAddress] {
        guard !self.carrier.isEmpty else { return self.base.write(batch, written: written) }
        var kept = TransmitBatch<SocketAddress>(buffer: batch.buffer)
        for index in batch.datagrams.indices where !self.carrier.send(batch.bytes(of: index), to: batch.datagrams[index].destination) {
            kept.datagrams.append(batch.datagrams[index])
        }
        guard !kept.datagrams.isEmpty else {
            written?.succeed()
            return []
        }
        return self.base.write(kept, written: written)
    }

    func isRoutable(_ destination: SocketAddress) -> Bool {
        self.carrier.stream(to: destination) != nil || self.base.isRoutable(destination)
    }

    func close() -> EventLoopFuture<Void> {
        self.carrier.closeAll()
        return self.base.close()
    }
}

/// Hands a stream's frames to a receiver as datagrams from `source`, and reports its end.
final class StreamFrameHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let source: SocketAddress
    private let receive: (ByteBuffer, SocketAddress) -> Void
    private let complete: () -> Void
    private let closed: (Channel) -> Void

    init(source: SocketAddress, receive: @escaping (ByteBuffer, SocketAddress) -> Void, complete: @escaping () -> Void, closed: @escaping (Channel) -> Void) {
        self.source = source
        self.receive = receive
        self.complete = complete
        self.closed = closed
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.receive(Self.unwrapInboundIn(data), self.source)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.complete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closed(context.channel)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
