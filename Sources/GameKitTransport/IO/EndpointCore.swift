@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitOnline
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// An endpoint's machine on the package's one driver, its socket, and the waits of the async
/// API (a link to open, room to send).
///
/// The driver (``DatagramDriver``) does the locking, the cycle and the timer; this type adds
/// what only the transport has: tasks that wait on the machine's outcomes
/// (``WaitingEndpoint``), the socket's own counters, metrics, an online session's TCP streams
/// (EndpointCore+Online.swift), and a shutdown that first closes every link.
final class EndpointCore: @unchecked Sendable {
    /// How long shutdown may wait for a congested socket to take the final CLOSE packets.
    static let shutdownFlushLimit = TimeAmount.milliseconds(500)

    let eventLoop: EventLoop
    let driver: DatagramDriver<WaitingEndpoint>
    /// The metrics and the task that samples them (EndpointCore+Metrics.swift); event loop only.
    var metrics: TransportMetrics?
    var metricsTask: RepeatedTask?
    private let socketBox = NIOLockedValueBox<UDPChannelSocket?>(nil)
    /// An online session's streams to its rendezvous and relay (nil for other endpoints).
    let streams: OnlineStreams?

    /// `onRoomEvent` receives the online layer's events when `machine` has one.
    init(
        machine: SocketMachine, eventLoop: EventLoop, logger: Logger, onEvent: @escaping @Sendable (TransportEvent) -> Void,
        onRoomEvent: @escaping @Sendable (RoomEvent) -> Void = { _ in }
    ) {
        self.eventLoop = eventLoop
        let streams = machine.online == nil ? nil : OnlineStreams()
        self.streams = streams
        self.driver = DatagramDriver(machine: WaitingEndpoint(socket: machine), eventLoop: eventLoop) { delivery in
            switch delivery {
            case .event(let event):
                event.log(to: logger)
                onEvent(event)
            case .resume(let resumption):
                resumption.resume()
            case .room(let event):
                streams?.follow(event)
                onRoomEvent(event)
            }
        }
    }

    /// The channel handler for a socket of this endpoint.
    func makeChannelHandler() -> DriverChannelHandler<WaitingEndpoint> {
        let inactive: (Channel) -> Void = { [self] channel in self.socketBox.withLockedValue { $0 }?.channelInactive(channel) }
        return DriverChannelHandler(driver: self.driver, source: { $0.remoteAddress }, inactive: inactive)
    }

    /// Takes the bound socket (event loop only), and how to bind another at the same address
    /// should this one be closed underneath.
    func attach(_ channel: Channel, segmentationOffload: Bool, reopen: @escaping @Sendable () async throws -> Channel) {
        self.eventLoop.preconditionInEventLoop()
        let socket = UDPChannelSocket(channel: channel, segmentationOffload: segmentationOffload, reopen: reopen)
        let driver = self.driver
        socket.onReplacement(shouldReopen: { !driver.isClosing }, replaced: { driver.runCycle() })
        self.socketBox.withLockedValue { $0 = socket }
        if let streams = self.streams {
            self.startOnline(localAddress: channel.localAddress, streams: streams)
            self.driver.attach(streams.socket(over: socket))
        } else {
            self.driver.attach(socket)
        }
    }

    // MARK: - Application side (any thread)

    /// Runs `body` on the machine under the lock and schedules a cycle.
    func perform<Result>(_ body: (inout EndpointMachine, NIODeadline) throws(TransportError) -> Result) throws(TransportError) -> Result {
        let result = try self.driver.perform { (endpoint: inout WaitingEndpoint, now) throws(TransportError) in
            try body(&endpoint.socket.endpoint, now)
        }
        guard let result else { throw .endpointClosed }
        return result
    }

    /// Reads the machine under the lock.
    func read<Result>(_ body: (EndpointMachine) -> Result) -> Result {
        self.driver.read { body($0.socket.endpoint) }
    }

    /// The machine's counters with the socket's own.
    var statistics: EndpointStatistics {
        self.withSocketCounters(self.read(\.endpointStatistics))
    }

    /// The endpoint's counters and every open link's, taken together.
    var figures: (EndpointStatistics, [(LinkID, LinkStatistics)]) {
        let (statistics, links) = self.read { machine in
            let links = machine.links.keys.sorted().compactMap { key in
                machine.linkStatistics(LinkID(rawValue: key)).map { (LinkID(rawValue: key), $0) }
            }
            return (machine.endpointStatistics, links)
        }
        return (self.withSocketCounters(statistics), links)
    }

    private func withSocketCounters(_ statistics: EndpointStatistics) -> EndpointStatistics {
        var statistics = statistics
        if let socket = self.socketBox.withLockedValue({ $0 }) {
            statistics.droppedUnroutable = socket.unroutableDatagrams
            statistics.socketsReopened = socket.socketsReopened
        }
        return statistics
    }

    /// Starts a handshake and waits for its outcome; cancelling the task cancels the handshake.
    func openLink(to address: SocketAddress, payload: ByteBuffer, timeout: TimeAmount?) async throws(TransportError) -> OpenedLink {
        let started = NIOLockedValueBox<LinkID?>(nil)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: WaitingEndpoint.OpenWaiter) in
                do throws(TransportError) {
                    // The waiter is registered under the same lock as the handshake starts, so the
                    // outcome cannot slip past it.
                    let link = try self.driver.perform { (endpoint: inout WaitingEndpoint, now) throws(TransportError) -> LinkID in
                        let link = try endpoint.socket.endpoint.connect(to: address, payload: payload, timeout: timeout, now: now)
                        endpoint.openWaiters[link] = continuation
                        return link
                    }
                    guard let link else {
                        continuation.resume(returning: .failure(.endpointClosed))
                        return
                    }
                    started.withLockedValue { $0 = link }
                    if Task.isCancelled { self.cancelOpen(link) }
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        } onCancel: {
            if let link = started.withLockedValue({ $0 }) { self.cancelOpen(link) }
        }
        return try result.get()
    }

    private func cancelOpen(_ link: LinkID) {
        _ = try? self.perform { machine, now in machine.cancelConnect(link, now: now) }
    }

    /// Sends, waiting (without blocking a thread) while the link's send buffer is full.
    func write(_ message: ByteBuffer, on link: LinkID, mode: SendMode) async throws(TransportError) {
        while true {
            let token = self.driver.withLockedMachine { endpoint -> UInt64 in
                endpoint.nextWaiterToken += 1
                return endpoint.nextWaiterToken
            }
            let outcome: Result<Void, TransportError>? = await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: WaitingEndpoint.SpaceWaiter) in
                    enum Attempt { case sent, waiting, cancelled }
                    let attempt: Attempt?
                    do throws(TransportError) {
                        attempt = try self.driver.perform { (endpoint: inout WaitingEndpoint, _) throws(TransportError) -> Attempt in
                            do throws(TransportError) {
                                try endpoint.socket.endpoint.send(message, on: link, mode: mode)
                                return .sent
                            } catch .bufferFull {
                                guard !Task.isCancelled else { return .cancelled }
                                // Resumed with nil when room is released (or the link closes).
                                endpoint.waitForSpace(on: link, token: token, continuation)
                                return .waiting
                            }
                        }
                    } catch {
                        continuation.resume(returning: .failure(error))
                        return
                    }
                    switch attempt {
                    case nil: continuation.resume(returning: .failure(.endpointClosed))
                    case .sent?: continuation.resume(returning: .success(()))
                    case .cancelled?: continuation.resume(returning: .failure(.cancelled))
                    case .waiting?: break
                    }
                }
            } onCancel: {
                let waiter = self.driver.withLockedMachine { $0.removeSpaceWaiter(on: link, token: token) }
                waiter?.resume(returning: .failure(.cancelled))
            }
            switch outcome {
            case .success: return
            case .failure(let error): throw error
            case .none: continue
            }
        }
    }

    /// Closes every link, withdraws every handshake and closes the socket; tasks still waiting
    /// fail with ``TransportError/endpointClosed``.
    func shutdown() async {
        let first = await self.driver.shutdown(flushLimit: Self.shutdownFlushLimit) { endpoint, now in
            endpoint.socket.endpoint.closeAll(now: now)
            // An online session's goodbye to its rendezvous leaves in the same flush.
            endpoint.socket.online?.leave(now: now)
        }
        guard first else { return }
        try? await self.eventLoop.submit { self.stopMetrics() }.get()
        let (opens, spaces) = self.driver.withLockedMachine { $0.takeAllWaiters() }
        for waiter in opens { waiter.resume(returning: .failure(.endpointClosed)) }
        for waiter in spaces { waiter.resume(returning: .failure(.endpointClosed)) }
    }

    /// Closes the socket as a send error would (tests of the socket's replacement).
    func closeSocketUnderneath() async {
        try? await self.socketBox.withLockedValue({ $0 })?.closeUnderneath().get()
    }
}

/// A link opened by ``TransportEndpoint/openLink(to:payload:timeout:)``.
public struct OpenedLink: Sendable {
    /// The new link.
    public let id: LinkID
    /// The responder's address (where its response came from).
    public let remoteAddress: SocketAddress
    /// What the responder put in its accept.
    public let payload: ByteBuffer
}
