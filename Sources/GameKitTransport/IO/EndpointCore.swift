import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The endpoint's state machine behind a lock, and the event-loop cycle that drives it.
///
/// Application calls (send, accept, close…) may come from any thread: they take the lock, act on
/// the machine at once (so "buffer full" or "unknown request" is known synchronously) and ask the
/// event loop for a cycle. The cycle, always on the event loop, takes the machine's events under
/// the lock and, with the lock released, hands them to the application and resumes waiting tasks;
/// then it takes every datagram queued so far (including the application's replies) under the
/// lock, writes them outside it, and re-arms the single timer. The application's callbacks
/// therefore never run under the lock and may call back into the endpoint freely.
final class EndpointCore: @unchecked Sendable {
    /// Datagrams written per cycle before yielding to reads (another cycle follows at once).
    static let datagramsPerCycle = 512
    /// Datagrams read before a cycle runs in the middle of a read batch, so that acknowledgements
    /// go out while a large batch (up to megabytes with receive offload) is still being processed.
    static let datagramsPerAcknowledgement = 32
    /// How long shutdown may wait for a congested socket to take the final CLOSE packets.
    static let shutdownFlushLimit = TimeAmount.milliseconds(500)
    /// How many times a socket closed under the endpoint is bound again before giving up.
    static let reopenAttempts = 100

    let eventLoop: EventLoop
    let logger: Logger
    /// The metrics and the task that samples them (EndpointCore+Metrics.swift); event loop only.
    var metrics: TransportMetrics?
    var metricsTask: RepeatedTask?
    private let onEvent: @Sendable (TransportEvent) -> Void
    private let lock = NIOLock()

    // MARK: Guarded by `lock`
    private var machine: EndpointMachine
    private var cycleRequested = false
    private var inCycle = false
    /// Set when shutdown begins: the application's calls fail from then on.
    private var isClosing = false
    /// Set when shutdown has sent its last datagrams: no more cycles or timers.
    private var isShutDown = false
    private typealias OpenWaiter = CheckedContinuation<Result<OpenedLink, TransportError>, Never>
    private typealias SpaceWaiter = CheckedContinuation<Result<Void, TransportError>?, Never>
    private var openWaiters: [LinkID: OpenWaiter] = [:]
    private var spaceWaiters: [LinkID: [(token: UInt64, continuation: SpaceWaiter)]] = [:]
    private var nextWaiterToken: UInt64 = 0
    /// Datagrams not handed to the socket for want of a route (``RouteCheck``).
    private var unroutableDatagrams: UInt64 = 0
    /// Sockets bound again after one was closed under the endpoint.
    private var socketsReopened: UInt64 = 0

    // MARK: Event loop only
    private var channel: Channel?
    private var batcher: DatagramBatcher
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var pendingEvents: [TransportEvent] = []
    /// Datagrams read and not yet handed to the machine: the cycle hands them over together,
    /// under the lock it takes anyway, instead of taking it once per datagram.
    private var inbox: [(datagram: ByteBuffer, address: SocketAddress)] = []
    private var isFlushingForShutdown = false
    private var routes = RouteCheck()
    private var reopen: (@Sendable () async throws -> Channel)?
    /// The last datagram written while shutting down: once it has left, all have.
    private var lastShutdownWrite: EventLoopFuture<Void>?

    init(machine: EndpointMachine, eventLoop: EventLoop, segmentationOffload: Bool, logger: Logger, onEvent: @escaping @Sendable (TransportEvent) -> Void) {
        self.machine = machine
        self.logger = logger
        self.eventLoop = eventLoop
        self.onEvent = onEvent
        self.batcher = DatagramBatcher(segmentationOffload: segmentationOffload)
    }

    /// Takes the bound socket, and how to bind another at the same address should this one be
    /// closed under the endpoint (``socketClosed(_:)``).
    func attach(_ channel: Channel, reopen: @escaping @Sendable () async throws -> Channel) {
        self.eventLoop.preconditionInEventLoop()
        self.channel = channel
        self.reopen = reopen
    }

    // MARK: - Application side (any thread)

    /// Runs `body` on the machine under the lock and schedules a cycle.
    func perform<Result>(_ body: (inout EndpointMachine, NIODeadline) throws(TransportError) -> Result) throws(TransportError) -> Result {
        self.lock.lock()
        guard !self.isClosing else {
            self.lock.unlock()
            throw .endpointClosed
        }
        let result: Result
        do {
            result = try body(&self.machine, .now())
        } catch {
            self.lock.unlock()
            throw error
        }
        let schedule = self.requestCycleLocked()
        self.lock.unlock()
        if schedule { self.scheduleCycle() }
        return result
    }

    /// Reads the machine under the lock.
    func read<Result>(_ body: (EndpointMachine) -> Result) -> Result {
        self.lock.withLock { body(self.machine) }
    }

    /// The machine's counters with the socket's own.
    var statistics: EndpointStatistics {
        self.lock.withLock { self.statisticsLocked }
    }

    /// The endpoint's counters and every open link's, taken together.
    var figures: (EndpointStatistics, [(LinkID, LinkStatistics)]) {
        self.lock.withLock {
            let links = self.machine.links.keys.sorted().compactMap { key in
                self.machine.linkStatistics(LinkID(rawValue: key)).map { (LinkID(rawValue: key), $0) }
            }
            return (self.statisticsLocked, links)
        }
    }

    /// The endpoint's counters, under the lock.
    private var statisticsLocked: EndpointStatistics {
        var statistics = self.machine.endpointStatistics
        statistics.droppedUnroutable = self.unroutableDatagrams
        statistics.socketsReopened = self.socketsReopened
        return statistics
    }

    /// Starts a handshake and waits for its outcome; cancelling the task cancels the handshake.
    func openLink(to address: SocketAddress, payload: ByteBuffer, timeout: TimeAmount?) async throws(TransportError) -> OpenedLink {
        let started = NIOLockedValueBox<LinkID?>(nil)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: OpenWaiter) in
                self.lock.lock()
                guard !self.isClosing else {
                    self.lock.unlock()
                    continuation.resume(returning: .failure(.endpointClosed))
                    return
                }
                do throws(TransportError) {
                    // The waiter is registered under the same lock as the handshake starts, so the
                    // outcome cannot slip past it.
                    let link = try self.machine.connect(to: address, payload: payload, timeout: timeout, now: .now())
                    self.openWaiters[link] = continuation
                    started.withLockedValue { $0 = link }
                    let schedule = self.requestCycleLocked()
                    self.lock.unlock()
                    if schedule { self.scheduleCycle() }
                    if Task.isCancelled { self.cancelOpen(link) }
                } catch {
                    self.lock.unlock()
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
            let token = self.lock.withLock { () -> UInt64 in
                self.nextWaiterToken += 1
                return self.nextWaiterToken
            }
            let outcome: Result<Void, TransportError>? = await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: SpaceWaiter) in
                    self.lock.lock()
                    guard !self.isClosing else {
                        self.lock.unlock()
                        continuation.resume(returning: .failure(.endpointClosed))
                        return
                    }
                    do throws(TransportError) {
                        try self.machine.send(message, on: link, mode: mode)
                    } catch .bufferFull {
                        if Task.isCancelled {
                            self.lock.unlock()
                            continuation.resume(returning: .failure(.cancelled))
                        } else {
                            // Resumed with nil when room is released (or the link closes): try again.
                            self.spaceWaiters[link, default: []].append((token, continuation))
                            self.lock.unlock()
                        }
                        return
                    } catch {
                        self.lock.unlock()
                        continuation.resume(returning: .failure(error))
                        return
                    }
                    let schedule = self.requestCycleLocked()
                    self.lock.unlock()
                    if schedule { self.scheduleCycle() }
                    continuation.resume(returning: .success(()))
                }
            } onCancel: {
                let waiter = self.lock.withLock { () -> SpaceWaiter? in
                    guard let index = self.spaceWaiters[link]?.firstIndex(where: { $0.token == token }) else { return nil }
                    return self.spaceWaiters[link]!.remove(at: index).continuation
                }
                waiter?.resume(returning: .failure(.cancelled))
            }
            switch outcome {
            case .success: return
            case .failure(let error): throw error
            case .none: continue
            }
        }
    }

    /// Closes every link, withdraws every handshake and closes the socket.
    func shutdown() async {
        let alreadyShutDown = self.lock.withLock { () -> Bool in
            if self.isClosing { return true }
            self.isClosing = true
            self.machine.closeAll(now: .now())
            return false
        }
        guard !alreadyShutDown else { return }
        let flushed = self.eventLoop.makePromise(of: Void.self)
        let deadline = NIODeadline.now() + Self.shutdownFlushLimit
        self.eventLoop.execute { self.flushForShutdown(until: deadline, flushed) }
        try? await flushed.futureResult.get()
        try? await self.eventLoop.submit { self.stopMetrics() }.get()
        try? await self.currentChannel()?.close()
        let (opens, spaces) = self.lock.withLock { () -> ([OpenWaiter], [SpaceWaiter]) in
            let opens = Array(self.openWaiters.values)
            let spaces = self.spaceWaiters.values.flatMap { $0.map(\.continuation) }
            self.openWaiters.removeAll()
            self.spaceWaiters.removeAll()
            return (opens, spaces)
        }
        for waiter in opens { waiter.resume(returning: .failure(.endpointClosed)) }
        for waiter in spaces { waiter.resume(returning: .failure(.endpointClosed)) }
    }

    // MARK: - Event loop side

    /// Queues a received datagram (or each of a receive-offload batch) for the next cycle, which
    /// runs at the end of the read or after ``datagramsPerAcknowledgement`` of them.
    func receive(_ envelope: AddressedEnvelope<ByteBuffer>) {
        let data = envelope.data
        guard let segmentSize = envelope.metadata?.segmentSize, segmentSize > 0, data.readableBytes > segmentSize else {
            self.receive(data, from: envelope.remoteAddress)
            return
        }
        var offset = 0
        while offset < data.readableBytes {
            let length = min(segmentSize, data.readableBytes - offset)
            self.receive(data.getSlice(at: data.readerIndex + offset, length: length)!, from: envelope.remoteAddress)
            offset += length
        }
    }

    private func receive(_ datagram: ByteBuffer, from address: SocketAddress) {
        self.inbox.append((datagram, address))
        if self.inbox.count >= Self.datagramsPerAcknowledgement {
            self.runCycle()
        }
    }

    /// Hands the datagrams read so far to the machine (lock held).
    private func drainInboxLocked() {
        guard !self.inbox.isEmpty else { return }
        let now = NIODeadline.now()
        for (datagram, address) in self.inbox {
            self.machine.handleDatagram(datagram, from: address, now: now)
        }
        self.inbox.removeAll(keepingCapacity: true)
    }

    /// One cycle: events to the application and waiters resumed first, then every datagram
    /// queued so far (including what the application's callbacks just sent) written, then the
    /// timer re-armed. Repeats while work remains, at most four rounds before yielding; returns
    /// whether work remained (a further cycle has then been scheduled).
    @discardableResult
    func runCycle() -> Bool {
        self.eventLoop.preconditionInEventLoop()
        var rounds = 0
        var again = true
        while again, rounds < 4 {
            rounds += 1
            // 1. Events and waiters, handed over with the lock released.
            let (opened, released) = self.lock.withLock { () -> ([(OpenWaiter, Result<OpenedLink, TransportError>)], [SpaceWaiter]) in
                self.inCycle = true
                self.drainInboxLocked()
                while let event = self.machine.popEvent() { self.pendingEvents.append(event) }
                return (self.takeOpenWaitersLocked(), self.takeSpaceWaitersLocked())
            }
            for event in self.pendingEvents {
                event.log(to: self.logger)
                self.onEvent(event)
            }
            self.pendingEvents.removeAll(keepingCapacity: true)
            for (waiter, result) in opened { waiter.resume(returning: result) }
            for waiter in released { waiter.resume(returning: nil) }
            // 2. Datagrams: everything queued until now.
            let envelopes = self.lock.withLock { () -> [AddressedEnvelope<ByteBuffer>] in
                self.cycleRequested = false
                let (envelopes, more) = self.collectDatagramsLocked()
                self.inCycle = false
                let unresumed = !self.machine.releasedSpace.isEmpty && !self.spaceWaiters.isEmpty
                again = more || self.machine.hasPendingEvents || unresumed || self.cycleRequested
                return envelopes
            }
            let (routable, moved) = self.routable(envelopes)
            if moved { again = true }
            if let channel = self.channel, let last = routable.last {
                for envelope in routable.dropLast() { channel.write(envelope, promise: nil) }
                if self.isFlushingForShutdown {
                    let written = self.eventLoop.makePromise(of: Void.self)
                    channel.write(last, promise: written)
                    self.lastShutdownWrite = written.futureResult
                } else {
                    channel.write(last, promise: nil)
                }
                channel.flush()
            }
        }
        if again {
            // Let reads and other tasks in before continuing.
            let schedule = self.lock.withLock { self.requestCycleLocked() }
            if schedule { self.scheduleCycle() }
        }
        self.rearmTimer()
        return again
    }

    // MARK: - Private (lock held)

    /// Returns true when the caller must schedule a cycle on the event loop.
    private func requestCycleLocked() -> Bool {
        guard !self.cycleRequested else { return false }
        self.cycleRequested = true
        return !self.inCycle
    }

    private func collectDatagramsLocked() -> ([AddressedEnvelope<ByteBuffer>], Bool) {
        guard let channel = self.channel, channel.isWritable, !self.isShutDown else { return ([], false) }
        let now = NIODeadline.now()
        var buffer = channel.allocator.buffer(capacity: 2048)
        var count = 0
        while count < Self.datagramsPerCycle {
            let start = buffer.writerIndex
            guard let address = self.machine.pollDatagram(now: now, into: &buffer) else {
                return (self.batcher.takeEnvelopes(from: buffer), false)
            }
            if count == 0 {
                // More may follow: make room for a whole batch at once.
                buffer.reserveCapacity(64 * 1024)
            }
            self.batcher.add(address: address, start: start, length: buffer.writerIndex - start)
            count += 1
        }
        return (self.batcher.takeEnvelopes(from: buffer), true)
    }

    private func takeOpenWaitersLocked() -> [(OpenWaiter, Result<OpenedLink, TransportError>)] {
        guard !self.openWaiters.isEmpty else { return [] }
        var resumed: [(OpenWaiter, Result<OpenedLink, TransportError>)] = []
        for event in self.pendingEvents {
            switch event {
            case .linkOpened(let link, let address, let payload):
                if let waiter = self.openWaiters.removeValue(forKey: link) {
                    resumed.append((waiter, .success(OpenedLink(id: link, remoteAddress: address, payload: payload))))
                }
            case .connectFailed(let link, let error):
                if let waiter = self.openWaiters.removeValue(forKey: link) {
                    resumed.append((waiter, .failure(error)))
                }
            default:
                break
            }
        }
        return resumed
    }

    private func takeSpaceWaitersLocked() -> [SpaceWaiter] {
        var links = self.machine.releasedSpace
        self.machine.releasedSpace.removeAll(keepingCapacity: true)
        for event in self.pendingEvents {
            if case .linkClosed(let link, _) = event { links.append(link) }
        }
        guard !self.spaceWaiters.isEmpty else { return [] }
        var resumed: [SpaceWaiter] = []
        for link in links {
            if let waiters = self.spaceWaiters.removeValue(forKey: link) {
                resumed.append(contentsOf: waiters.map(\.continuation))
            }
        }
        return resumed
    }

    // MARK: - Private (event loop)

    /// The envelopes whose destination has a route; the others are counted and dropped, and the
    /// links sending there move to another of their peer's addresses that has one (PROTOCOL
    /// §6.7; links without one wait for their own timers). Returns whether a link moved (its
    /// PING waits for the next round).
    private func routable(_ envelopes: [AddressedEnvelope<ByteBuffer>]) -> (kept: [AddressedEnvelope<ByteBuffer>], moved: Bool) {
        let now = NIODeadline.now()
        var kept = envelopes
        var dropped: UInt64 = 0
        var unroutable: [SocketAddress] = []
        kept.removeAll { envelope in
            guard !self.routes.isRoutable(envelope.remoteAddress, now: now) else { return false }
            let segment = envelope.metadata?.segmentSize ?? 0
            dropped += segment > 0 ? UInt64((envelope.data.readableBytes + segment - 1) / segment) : 1
            if !unroutable.contains(envelope.remoteAddress) { unroutable.append(envelope.remoteAddress) }
            return true
        }
        guard dropped > 0 else { return (kept, false) }
        let moved = self.lock.withLock { () -> Bool in
            self.unroutableDatagrams += dropped
            let before = self.machine.statistics.linkMoves
            for address in unroutable {
                self.machine.handleUnroutable(address, now: now) { self.routes.isRoutable($0, now: now) }
            }
            return self.machine.statistics.linkMoves != before
        }
        return (kept, moved)
    }

    /// The socket now (read on the event loop, where it may be replaced).
    private func currentChannel() async -> Channel? {
        (try? await self.eventLoop.submit { self.channel }.get()) ?? nil
    }

    /// Closes the socket as a send error would (tests of ``socketClosed(_:)``).
    func closeSocketUnderneath() async {
        try? await self.currentChannel()?.close()
    }

    /// The socket closed while the endpoint is running (NIO closes a datagram channel on most
    /// send errors): bind another at the same address and carry on. The links keep their state;
    /// what was in flight in the failed write is recovered by their retransmissions. Retries
    /// back off up to a second, at most `reopenAttempts` times.
    func socketClosed(_ channel: Channel) {
        self.eventLoop.preconditionInEventLoop()
        guard let current = self.channel, current === channel, let reopen = self.reopen else { return }
        guard !self.lock.withLock({ self.isClosing }) else { return }
        self.channel = nil
        Task {
            for attempt in 0..<Self.reopenAttempts {
                guard !self.lock.withLock({ self.isClosing }) else { return }
                if let fresh = try? await reopen() {
                    let kept = try? await self.eventLoop.submit { () -> Bool in
                        guard !self.lock.withLock({ self.isClosing }) else { return false }
                        self.channel = fresh
                        // What closed the socket was most likely a send to an address whose route
                        // had just gone (an interface went down): ask the kernel afresh.
                        self.routes = RouteCheck()
                        self.lock.withLock { self.socketsReopened += 1 }
                        self.runCycle()
                        return true
                    }.get()
                    if kept != true { try? await fresh.close() }
                    return
                }
                try? await Task.sleep(nanoseconds: UInt64(min(attempt + 1, 10)) * 100_000_000)
            }
        }
    }

    /// Sends every CLOSE, cancel and denial before the socket closes. While the socket cannot
    /// take more it waits (until `deadline`); then it waits, within the same bound, for the last
    /// datagram to leave the channel, since closing the channel discards writes queued in it.
    private func flushForShutdown(until deadline: NIODeadline, _ done: EventLoopPromise<Void>) {
        self.isFlushingForShutdown = true
        // Bounded: the machine has no more to send once each link has sent its CLOSEs.
        for _ in 0..<10_000 where self.runCycle() {}
        if let channel = self.channel, !channel.isWritable, NIODeadline.now() < deadline {
            self.eventLoop.scheduleTask(in: .milliseconds(2)) { self.flushForShutdown(until: deadline, done) }
            return
        }
        self.lock.withLock { self.isShutDown = true }
        self.timer?.cancel()
        self.timer = nil
        guard let lastWrite = self.lastShutdownWrite else {
            done.succeed()
            return
        }
        let timeout = self.eventLoop.scheduleTask(deadline: deadline) { done.succeed() }
        lastWrite.whenComplete { _ in
            timeout.cancel()
            done.succeed()  // a second completion, after the timeout, is ignored by NIO
        }
    }

    private func scheduleCycle() {
        self.eventLoop.execute { self.runCycle() }
    }

    private func rearmTimer() {
        guard var next = self.lock.withLock({ self.isShutDown ? nil : self.machine.nextDeadline }) else {
            self.timer?.cancel()
            self.timer = nil
            self.timerDeadline = nil
            return
        }
        if let channel = self.channel, !channel.isWritable {
            // Nothing can be sent until the socket drains (which runs a cycle), so a due deadline
            // (an acknowledgement, say) would stay due: do not fire again at once.
            next = max(next, .now() + .milliseconds(1))
        }
        if let current = self.timerDeadline, current <= next, self.timer != nil { return }
        self.timer?.cancel()
        self.timerDeadline = next
        self.timer = self.eventLoop.scheduleTask(deadline: next) {
            self.timer = nil
            self.timerDeadline = nil
            let now = NIODeadline.now()
            self.lock.withLock { self.machine.handleTimeouts(now: now) }
            self.runCycle()
        }
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
