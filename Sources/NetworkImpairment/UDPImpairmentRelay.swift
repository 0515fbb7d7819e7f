import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A UDP relay that puts an ``ImpairmentModel`` between two real programs.
///
/// In-process models cover the transport's logic; the relay covers everything else: two
/// separate processes (a `gk-link` pair, a benchmark and its peer) talking over real sockets
/// while the path between them loses, delays, reorders, duplicates and corrupts datagrams.
///
/// Clients send to ``localAddress``. Each distinct client source address gets its own
/// upstream socket (ephemeral port) connected to the target, like a NAT, so the target sees
/// one distinct source per client; what the target sends back on that socket goes to that
/// client from ``localAddress``. Client → target datagrams go through a model with the
/// `forward` profile and seed `seed`; target → client datagrams through one with the
/// `backward` profile and seed `seed ^ 0x9E3779B97F4A7C15`. Mappings live until ``stop()``.
///
/// Everything runs on one event loop of the given group, with one timer per direction.
/// Socket buffers are set to 4 MiB (as far as the kernel allows) so the relay itself adds as
/// little loss as possible; datagrams it could not send are counted in
/// ``ImpairmentStatistics/sendFailures``.
public final class UDPImpairmentRelay: Sendable {
    // MARK: - Properties

    /// The address clients send to (with the actual port when `listen` had port 0).
    public let localAddress: SocketAddress

    /// Where client datagrams are relayed to.
    public let targetAddress: SocketAddress

    private let eventLoop: any EventLoop
    private let core: NIOLoopBound<RelayCore>
    private let finalStatistics = NIOLockedValueBox<Statistics?>(nil)

    private init(localAddress: SocketAddress, targetAddress: SocketAddress, core: NIOLoopBound<RelayCore>) {
        self.localAddress = localAddress
        self.targetAddress = targetAddress
        self.eventLoop = core.eventLoop
        self.core = core
    }

    // MARK: - Starting

    /// Validates both profiles, binds `listen` on one event loop of `group` and starts relaying
    /// toward `target`.
    ///
    /// - Throws: ``ImpairmentProfile/ValidationError`` for an invalid profile, or the socket
    ///   error if `listen` cannot be bound.
    public static func start(
        listen: SocketAddress,
        target: SocketAddress,
        forward: ImpairmentProfile,
        backward: ImpairmentProfile,
        seed: UInt64,
        group: any EventLoopGroup
    ) async throws -> UDPImpairmentRelay {
        try forward.validate()
        try backward.validate()
        let loop = group.next()
        let core = try await loop.submit {
            NIOLoopBound(
                RelayCore(loop: loop, target: target, forward: forward, backward: backward, seed: seed),
                eventLoop: loop
            )
        }.get()
        let channel = try await self.datagramBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    core.value.listenChannel = channel
                    try channel.pipeline.syncOperations.addHandler(ListenHandler(core: core.value))
                }
            }
            .bind(to: listen)
            .get()
        guard let localAddress = channel.localAddress else {
            try? await channel.close()
            throw ChannelError.unknownLocalAddress
        }
        return UDPImpairmentRelay(localAddress: localAddress, targetAddress: target, core: core)
    }

    // MARK: - Observing and stopping

    /// What each direction has done so far (after ``stop()``: the final counts).
    public func statistics() async -> (forward: ImpairmentStatistics, backward: ImpairmentStatistics) {
        if let final = self.finalStatistics.withLockedValue({ $0 }) {
            return (final.forward, final.backward)
        }
        let core = self.core
        let current = try? await self.eventLoop.submit { core.value.statistics() }.get()
        let statistics = current ?? self.finalStatistics.withLockedValue { $0 } ?? Statistics()
        return (statistics.forward, statistics.backward)
    }

    /// Stops relaying: datagrams still in flight are discarded and every socket is closed
    /// before this returns. Calling it again does nothing.
    public func stop() async throws {
        let core = self.core
        let statistics = try await self.eventLoop.flatSubmit { core.value.stop() }.get()
        self.finalStatistics.withLockedValue { final in
            if final == nil { final = statistics }
        }
    }

    // MARK: - Shared configuration

    /// Both directions' counters, passed between the event loop and callers.
    struct Statistics: Sendable, Equatable {
        var forward = ImpairmentStatistics()
        var backward = ImpairmentStatistics()
    }

    /// The seeds of the forward and backward models for a relay seed.
    static func directionSeeds(_ seed: UInt64) -> (forward: UInt64, backward: UInt64) {
        (seed, seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The socket buffer size the relay asks for (the kernel may cap it at `rmem_max`).
    static let socketBufferSize = 4 << 20

    /// The largest UDP payload, so that no datagram is ever truncated on read.
    static let maximumDatagramSize = 65_536

    /// How many datagrams one socket wake-up reads before the models are pumped and the
    /// writes flushed together.
    static let maximumMessagesPerRead: UInt = 32

    /// A bootstrap with the relay's socket options, for the listen and upstream sockets. No
    /// SO_REUSEADDR: with it Linux may give two sockets one ephemeral port.
    static func datagramBootstrap(group: any EventLoopGroup) -> DatagramBootstrap {
        DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_rcvbuf), value: Self.socketBufferSize)
            .channelOption(.socketOption(.so_sndbuf), value: Self.socketBufferSize)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: Self.maximumDatagramSize))
            .channelOption(.maxMessagesPerRead, value: Self.maximumMessagesPerRead)
    }
}
