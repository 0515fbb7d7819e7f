import Crypto
@_spi(Machine) import GameKitMachine
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOPosix

/// A running rendezvous (and relay): ``RendezvousServer`` on one UDP socket. `gk-rendezvous` is
/// this and its options; tests start it in-process too.
@_spi(Machine) public final class RendezvousService: Sendable {
    /// The bound address (ephemeral port resolved).
    public let localAddress: SocketAddress
    /// The key relays check this rendezvous's tickets with.
    public let publicKey: Curve25519.Signing.PublicKey
    private let driver: DatagramDriver<RendezvousServer>
    private let channel: Channel
    /// The TCP listener on the same port (PROTOCOL §18.12), and its members' streams.
    private let listener: Channel
    private let streams: StreamCarrier
    /// Which streams are kept (limits, timeouts, the file-descriptor budget).
    private let gate: StreamGate

    private init(
        localAddress: SocketAddress, publicKey: Curve25519.Signing.PublicKey, driver: DatagramDriver<RendezvousServer>, channel: Channel,
        listener: Channel, streams: StreamCarrier, gate: StreamGate
    ) {
        self.localAddress = localAddress
        self.publicKey = publicKey
        self.driver = driver
        self.channel = channel
        self.listener = listener
        self.streams = streams
        self.gate = gate
    }

    /// Binds `address` and starts serving. `onEvent` hears rooms and members come and go, on
    /// the socket's event loop.
    public static func start(
        at address: SocketAddress, configuration: RendezvousConfiguration, signingKey: Curve25519.Signing.PrivateKey,
        otherIssuers: [Curve25519.Signing.PublicKey] = [], group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onEvent: @escaping @Sendable (RendezvousEvent) -> Void = { _ in }
    ) async throws -> RendezvousService {
        let eventLoop = group.next()
        let machine = RendezvousServer(
            configuration: configuration, signingKey: signingKey, otherIssuers: otherIssuers, clock: .system(), now: .now())
        let driver = DatagramDriver(machine: machine, eventLoop: eventLoop, deliver: onEvent)
        // Segmentation offload both ways, as the transport's sockets have it: a burst a member
        // sends arrives in one read, and what the relay forwards to one member in a row leaves in
        // one send, so the member reads it in one batch too (as it would read the sender directly).
        let receiveOffload = System.supportsUDPReceiveOffload
        var bootstrap = DatagramBootstrap(group: eventLoop)
            .channelOption(.datagramVectorReadMessageCount, value: receiveOffload ? 16 : 64)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: receiveOffload ? 16 * 65_536 : 64 * 2048))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(DriverChannelHandler(driver: driver, source: { $0.remoteAddress }))
                }
            }
        if receiveOffload {
            bootstrap = bootstrap.channelOption(.datagramReceiveOffload, value: true).channelOption(.datagramReceiveSegmentSize, value: true)
        }
        let channel = try await bootstrap.bind(to: address).get()
        guard let local = channel.localAddress else {
            try? await channel.close()
            throw RendezvousServiceError.noLocalAddress
        }
        // Bursts from many members wait in the kernel while the loop is busy.
        await SocketBuffers.enlarge(channel, to: 4 << 20)
        // The same port over TCP, for members whose network blocks UDP: each connection is a
        // source of its own, and what the machine sends there goes down it, framed. The gate
        // keeps what one host or everyone may hold within limits and closes silent streams;
        // its total fits the file descriptors this process may open.
        let streams = StreamCarrier()
        let gate = StreamGate(limits: configuration.streams.fitted(toDescriptors: Self.raiseDescriptorLimit()))
        let listener: Channel
        do {
            listener = try await ServerBootstrap(group: eventLoop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 1024)
                .childChannelInitializer { child in
                    guard let source = child.remoteAddress else { return child.close() }
                    guard let id = gate.admit(child, from: source) else { return child.eventLoop.makeSucceededVoidFuture() }
                    return StreamCarrier.configure(child).flatMapThrowing {
                        try child.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder()))
                        try child.pipeline.syncOperations.addHandler(
                            StreamFrameHandler(
                                source: source,
                                receive: {
                                    gate.framed(id)
                                    driver.receive($0, from: $1)
                                },
                                complete: { driver.runCycle() },
                                closed: {
                                    streams.remove($0, for: source)
                                    gate.closed(id)
                                }))
                        streams.add(child, for: source)
                    }
                }
                .bind(to: local).get()
        } catch {
            try? await channel.close()
            throw error
        }
        gate.start(on: eventLoop)
        try await eventLoop.submit {
            driver.attach(
                StreamRoutedSocket(base: UDPChannelSocket(channel: channel, segmentationOffload: System.supportsUDPSegmentationOffload), carrier: streams))
        }.get()
        return RendezvousService(
            localAddress: local, publicKey: signingKey.publicKey, driver: driver, channel: channel, listener: listener, streams: streams,
            gate: gate)
    }

    /// Raises this process's soft limit on open files to its hard limit; returns the limit now
    /// in force (what the TCP streams' total is fitted to).
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The limits on TCP streams in force (the total fitted to the file descriptors).
    public var streamLimits: StreamLimits { self.gate.limits }

    /// The shared store's news (an instance with ``RendezvousConfiguration/sharedInstance``).
    public func apply(_ input: SharedRoomsInput) {
        _ = self.driver.perform { server, now in server.apply(input, now: now) }
    }

    /// What the rendezvous counted so far.
    public var statistics: RendezvousStatistics {
        var statistics = self.driver.read(\.currentStatistics)
        statistics.streams = self.gate.statistics
        return statistics
    }

    /// Stops serving and closes the socket.
    public func stop() async {
        self.gate.stop()
        try? await self.listener.close()
        _ = await self.driver.shutdown(flushLimit: .milliseconds(100)) { _, _ in }
    }
}

/// Why a rendezvous could not start.
public enum RendezvousServiceError: Error, Sendable {
    case noLocalAddress
}
