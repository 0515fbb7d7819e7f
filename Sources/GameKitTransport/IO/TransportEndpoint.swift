import CoreMetrics
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitOnline
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One UDP socket carrying any number of encrypted links to other endpoints.
///
/// ```swift
/// let server = try await TransportEndpoint.bind(host: "::", port: 7000) { event in
///     if case .connectionRequest(let request) = event { _ = try? server.accept(request.id) }
///     if case .received(let message, let link, _) = event { print(link, message.readableBytes) }
/// }
/// let client = try await TransportEndpoint.bind(host: "::", port: 0) { _ in }
/// let link = try await client.openLink(to: server.localAddress)
/// try await client.write(ByteBuffer(string: "hello"), on: link.id)
/// ```
///
/// Every method may be called from any thread. Events are delivered in order on the endpoint's
/// event loop, one at a time; handlers should not block it.
public final class TransportEndpoint: Sendable {
    /// The address the socket is bound to (with the ephemeral port resolved).
    public let localAddress: SocketAddress
    /// The event loop events are delivered on.
    public var eventLoop: EventLoop { self.core.eventLoop }

    /// What seals and opens data packets in this build: "swift-crypto", or "OpenSSL libcrypto"
    /// with the package trait `OpenSSL`. Not visible on the wire.
    public static var packetCipherBackend: String { PacketCipher.backendName }

    let core: EndpointCore

    private init(localAddress: SocketAddress, core: EndpointCore) {
        self.localAddress = localAddress
        self.core = core
    }

    // MARK: - Binding

    /// Binds a socket to `host` (an IPv4 or IPv6 literal, "0.0.0.0" or "::" for all) and `port`
    /// (0 for an ephemeral port).
    public static func bind(
        host: String,
        port: Int,
        configuration: TransportConfiguration = TransportConfiguration(),
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onEvent: @escaping @Sendable (TransportEvent) -> Void
    ) async throws -> TransportEndpoint {
        try await self.bind(
            to: SocketAddress(ipAddress: host, port: port),
            configuration: configuration,
            group: group,
            onEvent: onEvent
        )
    }

    /// Binds a socket to `address`.
    public static func bind(
        to address: SocketAddress,
        configuration: TransportConfiguration = TransportConfiguration(),
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onEvent: @escaping @Sendable (TransportEvent) -> Void
    ) async throws -> TransportEndpoint {
        try await self.bind(to: address, configuration: configuration, online: nil, group: group, onEvent: onEvent)
    }

    /// Binds a socket to `address` with an online session's layer under the endpoint (PROTOCOL
    /// §18.1), when `online` is given: its datagrams and the transport's share the socket as one
    /// machine, and `onRoomEvent` receives the online layer's events on the endpoint's event loop.
    package static func bind(
        to address: SocketAddress,
        configuration: TransportConfiguration = TransportConfiguration(),
        online: OnlineMachine?,
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onEvent: @escaping @Sendable (TransportEvent) -> Void,
        onRoomEvent: @escaping @Sendable (RoomEvent) -> Void = { _ in }
    ) async throws -> TransportEndpoint {
        let machine = try EndpointMachine(configuration: configuration, now: .now())
        let eventLoop = group.next()
        let offload = configuration.segmentationOffload && System.supportsUDPSegmentationOffload
        var logger = configuration.logger
        let core = EndpointCore(
            machine: SocketMachine(endpoint: machine, online: online), eventLoop: eventLoop, logger: logger, onEvent: onEvent, onRoomEvent: onRoomEvent)
        let channel = try await Self.openSocket(at: address, for: core, configuration: configuration)
        guard let local = channel.localAddress else {
            try? await channel.close()
            throw TransportError.invalidConfiguration("socket has no local address")
        }
        // A socket closed under the endpoint is bound again at the same address and port.
        try await eventLoop.submit {
            core.attach(channel, segmentationOffload: offload) { try await Self.openSocket(at: local, for: core, configuration: configuration) }
            if let interval = configuration.metricsInterval {
                core.startMetrics(
                    factory: configuration.metricsFactory ?? MetricsSystem.factory, interval: interval,
                    dimensions: configuration.metricsDimensions)
            }
        }.get()
        logger[metadataKey: "endpoint"] = "\(local)"
        logger.debug("bound", metadata: ["address": "\(local)"])
        return TransportEndpoint(localAddress: local, core: core)
    }

    /// Binds one socket for `core` at `address`, with the endpoint's options.
    private static func openSocket(at address: SocketAddress, for core: EndpointCore, configuration: TransportConfiguration) async throws -> Channel {
        let receiveOffload = configuration.segmentationOffload && System.supportsUDPReceiveOffload
        // Vector reads (recvmmsg): 64 slots of 2 KB (or of the largest datagram accepted), or 16
        // slots of 64 KB when the kernel may hand over receive-offload batches.
        let slots = receiveOffload ? 16 : 64
        let slotSize = receiveOffload ? 65_536 : max(2_048, configuration.maxDatagramSize)
        // No SO_REUSEADDR: UDP has no TIME_WAIT to skip, and with it Linux may hand out an
        // ephemeral port another such socket already holds; unicast datagrams then reach only
        // one of the two.
        var bootstrap = DatagramBootstrap(group: core.eventLoop)
            .channelOption(.datagramVectorReadMessageCount, value: slots)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: slots * slotSize))
            .channelOption(.maxMessagesPerRead, value: 1)
            .channelOption(.writeBufferWaterMark, value: .init(low: 1 << 20, high: 4 << 20))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(core.makeChannelHandler())
                }
            }
        if receiveOffload {
            bootstrap = bootstrap
                .channelOption(.datagramReceiveOffload, value: true)
                .channelOption(.datagramReceiveSegmentSize, value: true)
        }
        let channel = try await bootstrap.bind(to: address).get()
        await SocketBuffers.enlarge(channel, to: configuration.socketBufferSize)
        return channel
    }

    // MARK: - Opening links

    /// Starts a handshake with the endpoint at `address`, carrying `payload` (at most
    /// `maxDatagramSize - 92` bytes) to its application. The outcome arrives as
    /// ``TransportEvent/linkOpened(_:remoteAddress:payload:)`` or
    /// ``TransportEvent/connectFailed(_:_:)`` with the returned ID. `timeout` defaults to the
    /// configuration's handshake timeout.
    public func connect(to address: SocketAddress, payload: ByteBuffer = ByteBuffer(), timeout: TimeAmount? = nil) throws(TransportError) -> LinkID {
        try self.core.perform { machine, now throws(TransportError) in
            try machine.connect(to: address, payload: payload, timeout: timeout, now: now)
        }
    }

    /// Opens a link and returns once it is open; throws what `connect` would report as failure.
    /// Cancelling the task withdraws the handshake.
    public func openLink(to address: SocketAddress, payload: ByteBuffer = ByteBuffer(), timeout: TimeAmount? = nil) async throws(TransportError) -> OpenedLink {
        try await self.core.openLink(to: address, payload: payload, timeout: timeout)
    }

    /// Withdraws a handshake started with `connect`; the responder is told at once. Returns false
    /// when the handshake had already ended.
    @discardableResult
    public func cancelConnect(_ link: LinkID) -> Bool {
        (try? self.core.perform { machine, now in machine.cancelConnect(link, now: now) }) ?? false
    }

    /// Accepts a connection request. `payload` goes back to the initiator (it may be at most as
    /// large as the initiator's own payload allowed room for). The returned link opens, with
    /// ``TransportEvent/linkOpened(_:remoteAddress:payload:)``, when the initiator confirms.
    public func accept(_ request: ConnectionRequest.ID, payload: ByteBuffer = ByteBuffer()) throws(TransportError) -> LinkID {
        try self.core.perform { machine, now throws(TransportError) in
            try machine.accept(request, payload: payload, now: now)
        }
    }

    /// Denies a connection request; the initiator fails with ``TransportError/denied(code:)``.
    public func deny(_ request: ConnectionRequest.ID, code: UInt16 = 0) throws(TransportError) {
        try self.core.perform { machine, now throws(TransportError) in
            try machine.deny(request, code: code, now: now)
        }
    }

    // MARK: - Messages

    /// Queues a message without waiting. Throws ``TransportError/bufferFull`` when the link's send
    /// buffer is full, ``TransportError/dataTooBig(size:limit:)`` when the message is larger than
    /// the link carries, ``TransportError/linkNotOpen`` when the link is gone.
    public func send(_ message: ByteBuffer, on link: LinkID, mode: SendMode = .reliable) throws(TransportError) {
        try self.core.perform { machine, _ throws(TransportError) in
            try machine.send(message, on: link, mode: mode)
        }
    }

    /// Queues each message on its link, or none of them (when any link would refuse its message,
    /// with the error `send` would throw for it). For sending one message to several peers
    /// without leaving some of them with it and others without.
    public func send(_ batch: [(message: ByteBuffer, link: LinkID)], mode: SendMode = .reliable) throws(TransportError) {
        try self.core.perform { machine, _ throws(TransportError) in
            try machine.send(batch, mode: mode)
        }
    }

    /// Queues a message, waiting while the link's send buffer is full.
    public func write(_ message: ByteBuffer, on link: LinkID, mode: SendMode = .reliable) async throws(TransportError) {
        try await self.core.write(message, on: link, mode: mode)
    }

    /// Closes a link after delivering what is queued on it; the peer is told at once after that.
    public func close(_ link: LinkID, code: UInt16 = 0) throws(TransportError) {
        try self.core.perform { machine, now throws(TransportError) in
            try machine.close(link, code: code, now: now)
        }
    }

    /// Changes how long a silent peer is waited for, on open links too (the keepalive interval
    /// follows when it is derived from the timeout).
    public func setDisconnectTimeout(_ timeout: TimeAmount) throws(TransportError) {
        try self.core.perform { machine, _ throws(TransportError) in
            try machine.setDisconnectTimeout(timeout)
        }
    }

    // MARK: - Liveness

    /// This endpoint's liveness public key (32 bytes): a peer that knows it can probe this
    /// endpoint to learn it is alive (advertise it, as a session does in its TXT record).
    public var livenessPublicKey: [UInt8] {
        self.core.read { $0.livenessPublicKey }
    }

    /// Starts probing the endpoint at `addresses` (tried in turn) whose liveness public key is
    /// `peerKey`: about once a second, less often when many are watched. A peer that answers
    /// none of three probes is reported with ``TransportEvent/liveness(_:alive:)`` `alive: false`,
    /// and with `alive: true` once it answers again. Its answers are authenticated: nobody but the
    /// peer (with the password, if any) can make it look alive.
    ///
    /// - Throws: ``TransportError/invalidConfiguration(_:)`` for a key that is not a valid X25519
    ///   public key, or no address.
    public func watch(_ addresses: [SocketAddress], peerKey: [UInt8]) throws(TransportError) -> LivenessWatchID {
        try self.core.perform { machine, now throws(TransportError) in
            try machine.watch(addresses: addresses, peerKey: peerKey, now: now)
        }
    }

    /// New addresses for a watched peer.
    public func updateWatch(_ id: LivenessWatchID, addresses: [SocketAddress]) {
        try? self.core.perform { machine, _ in machine.updateWatch(id, addresses: addresses) }
    }

    /// Gives a link the peer's other addresses (for example all that discovery lists for it).
    /// When the link's current address loses its route, or nothing answers there for three
    /// retransmission timeouts (at least a second), the link moves to the next of these, without
    /// closing or losing anything, and reports ``TransportEvent/linkMoved(_:from:to:)``
    /// (PROTOCOL §6.7). Replaces the addresses given before; an empty list stops moving.
    public func setAlternateAddresses(_ addresses: [SocketAddress], for link: LinkID) {
        try? self.core.perform { machine, _ in machine.setAlternateAddresses(addresses, for: link) }
    }

    /// Stops probing a peer.
    public func unwatch(_ id: LivenessWatchID) {
        try? self.core.perform { machine, _ in machine.unwatch(id) }
    }

    // MARK: - Introspection

    /// The link's verification code: 5 bytes both ends derive from their handshake (PROTOCOL
    /// §4.9). Two people who compare it (a session shows it as text) know that nobody ran the
    /// handshake in between, not even a relay that carried it. Nil for an unknown link.
    public func verificationCode(for link: LinkID) -> [UInt8]? {
        self.core.read { $0.verificationCode(link) }
    }

    /// The counters and estimates of a link, or nil when it is gone.
    public func statistics(for link: LinkID) -> LinkStatistics? {
        self.core.read { $0.linkStatistics(link) }
    }

    /// The endpoint's counters.
    public var statistics: EndpointStatistics {
        self.core.statistics
    }

    /// Closes every link (telling the peers), withdraws handshakes and closes the socket.
    public func shutdown() async {
        await self.core.shutdown()
    }
}
