import NIOConcurrencyHelpers
import NIOCore

/// Runs any ``DatagramMachine`` on an event loop over a ``DatagramSocket``: the one driver of
/// the package (the transport's endpoint, mDNS discovery, real-time connections).
///
/// The machine lives behind a lock. Application calls may come from any thread: ``perform(_:)``
/// acts on the machine at once (so "buffer full" is known synchronously) and asks the event
/// loop for a cycle. A cycle, always on the event loop:
/// 1. hands the machine every datagram read since the last cycle, under one lock;
/// 2. takes the machine's events under the lock and delivers them with the lock released (so a
///    handler may call back into the machine freely);
/// 3. takes every datagram due, including what the handlers just queued, and writes them as one
///    batch outside the lock;
/// 4. repeats while work remains (at most ``Limits/roundsPerCycle`` rounds before yielding to
///    reads), then re-arms the single timer at the machine's next deadline.
///
/// Reads hand datagrams to ``receive(_:from:)``; the end of a read batch (or
/// ``Limits/datagramsPerCycleStart`` datagrams within one) runs a cycle, so replies and
/// acknowledgements leave without waiting for the next event-loop tick.
@_spi(Machine) public final class DatagramDriver<Machine: DatagramMachine>: @unchecked Sendable {
    /// The driver's bounds.
    public struct Limits: Sendable {
        /// Datagrams written per round before yielding to reads (another cycle follows at once).
        public var datagramsPerRound = 512
        /// Datagrams read before a cycle runs in the middle of a read batch, so that
        /// acknowledgements go out while a large batch is still being processed.
        public var datagramsPerCycleStart = 32
        /// Rounds per cycle before yielding to other tasks.
        public var roundsPerCycle = 4

        public init() {}
    }

    public let eventLoop: EventLoop
    @usableFromInline let limits: Limits
    @usableFromInline let deliver: (Machine.Event) -> Void
    @usableFromInline let lock = NIOLock()

    // MARK: Guarded by `lock`
    @usableFromInline var machine: Machine
    @usableFromInline var cycleRequested = false
    @usableFromInline var inCycle = false
    @usableFromInline var closing = false
    @usableFromInline var shutDown = false

    // MARK: Event loop only
    @usableFromInline var socket: (any DatagramSocket<Machine.Destination>)?
    @usableFromInline var timer: Scheduled<Void>?
    @usableFromInline var timerDeadline: NIODeadline?
    @usableFromInline var inbox: [(datagram: ByteBuffer, source: Machine.Source)] = []
    @usableFromInline var pendingEvents: [Machine.Event] = []
    /// The datagram list of the last batch, kept for its capacity (no allocation per round).
    @usableFromInline var spareDatagrams: [TransmitBatch<Machine.Destination>.Datagram] = []
    /// While shutting down: the last write's completion, so that the socket closes after it.
    @usableFromInline var trackWrites = false
    @usableFromInline var lastWrite: EventLoopFuture<Void>?
    /// The most cycles a shutdown runs before it closes the socket anyway.
    static var shutdownCycles: Int { 10_000 }
    @usableFromInline var flushCycleCount = 0
    /// Cycles run while flushing (at shutdown, or in ``flush()``); for tests, on the event loop.
    public var flushCycles: Int { self.flushCycleCount }

    /// A driver for `machine` on `eventLoop`; `deliver` receives its events, on the event loop,
    /// one at a time, in order.
    public init(machine: Machine, eventLoop: EventLoop, limits: Limits = Limits(), deliver: @escaping (Machine.Event) -> Void) {
        self.machine = machine
        self.eventLoop = eventLoop
        self.limits = limits
        self.deliver = deliver
    }

    /// Starts writing to `socket` and runs a first cycle (event loop only).
    public func attach(_ socket: any DatagramSocket<Machine.Destination>) {
        self.eventLoop.preconditionInEventLoop()
        self.socket = socket
        self.runCycle()
    }

    // MARK: - Application side (any thread)

    /// Whether shutdown has begun (application calls fail from then on).
    public var isClosing: Bool {
        self.lock.withLock { self.closing }
    }

    /// Runs `body` on the machine under the lock and schedules a cycle to send what it queued.
    /// Returns nil, without running `body`, once shutdown has begun.
    @inlinable
    public func perform<Result, Failure: Error>(_ body: (inout Machine, NIODeadline) throws(Failure) -> Result) throws(Failure) -> Result? {
        self.lock.lock()
        guard !self.closing else {
            self.lock.unlock()
            return nil
        }
        let result: Result
        do {
            result = try body(&self.machine, self.eventLoop.now)
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
    @inlinable
    public func read<Result>(_ body: (Machine) -> Result) -> Result {
        self.lock.withLock { body(self.machine) }
    }

    /// Changes the machine under the lock without scheduling a cycle, even after shutdown (to
    /// collect what the owner must release).
    @inlinable
    public func withLockedMachine<Result>(_ body: (inout Machine) -> Result) -> Result {
        self.lock.withLock { body(&self.machine) }
    }

    // MARK: - Event loop side

    /// Queues a received datagram for the next cycle, which runs at the end of the read batch or
    /// after ``Limits/datagramsPerCycleStart`` datagrams.
    @inlinable
    public func receive(_ datagram: ByteBuffer, from source: Machine.Source) {
        self.inbox.append((datagram, source))
        if self.inbox.count >= self.limits.datagramsPerCycleStart {
            self.runCycle()
        }
    }

    /// One cycle (see the type's description). Returns whether work remained, in which case a
    /// further cycle has been scheduled.
    @inlinable
    @discardableResult
    public func runCycle() -> Bool {
        self.eventLoop.preconditionInEventLoop()
        if self.trackWrites { self.flushCycleCount += 1 }
        var rounds = 0
        var again = true
        while again, rounds < self.limits.roundsPerCycle {
            rounds += 1
            // 1 and 2: datagrams in, events out, under one lock; delivered with it released.
            self.lock.withLock {
                self.inCycle = true
                self.drainInboxLocked()
                while let event = self.machine.pollEvent() { self.pendingEvents.append(event) }
            }
            for event in self.pendingEvents { self.deliver(event) }
            self.pendingEvents.removeAll(keepingCapacity: true)
            // 3: everything due until now, including what the handlers queued.
            let (batch, more) = self.lock.withLock { () -> (TransmitBatch<Machine.Destination>?, Bool) in
                self.cycleRequested = false
                let (batch, more) = self.collectTransmitsLocked()
                // Polling may itself produce events (a link that closed while sending).
                while let event = self.machine.pollEvent() { self.pendingEvents.append(event) }
                self.inCycle = false
                return (batch, more || !self.pendingEvents.isEmpty || !self.inbox.isEmpty || self.cycleRequested)
            }
            again = more
            if var batch, let socket = self.socket {
                let promise = self.trackWrites ? self.eventLoop.makePromise(of: Void.self) : nil
                if let promise { self.lastWrite = promise.futureResult }
                let unroutable = socket.write(batch, written: promise)
                batch.datagrams.removeAll(keepingCapacity: true)
                swap(&batch.datagrams, &self.spareDatagrams)
                if !unroutable.isEmpty {
                    let now = self.eventLoop.now
                    self.lock.withLock {
                        for destination in unroutable {
                            self.machine.handleUnroutable(destination, now: now) { socket.isRoutable($0) }
                        }
                    }
                    // The machine may have moved elsewhere: its datagrams go in the next round.
                    again = true
                }
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

    // MARK: - Shutdown

    /// Shuts down: `finalize` runs on the machine under the lock (to close links, send goodbyes),
    /// the application's calls fail from then on, what the machine then sends is written (while
    /// the socket cannot take more, waiting up to `flushLimit`, and then waiting within the same
    /// bound for the last datagram to leave, since closing a channel discards queued writes),
    /// and the socket closes. Returns false when shutdown had already begun.
    @discardableResult
    public func shutdown(flushLimit: TimeAmount, _ finalize: (inout Machine, NIODeadline) -> Void) async -> Bool {
        let first = self.lock.withLock { () -> Bool in
            guard !self.closing else { return false }
            self.closing = true
            finalize(&self.machine, self.eventLoop.now)
            return true
        }
        guard first else { return false }
        let flushed = self.eventLoop.makePromise(of: Void.self)
        let deadline = self.eventLoop.now + flushLimit
        self.eventLoop.execute { self.flushForShutdown(until: deadline, flushed) }
        try? await flushed.futureResult.get()
        try? await self.eventLoop.flatSubmit { self.socket?.close() ?? self.eventLoop.makeSucceededVoidFuture() }.get()
        return true
    }

    private func flushForShutdown(until deadline: NIODeadline, _ done: EventLoopPromise<Void>) {
        self.trackWrites = true
        // Cycles while work remains, bounded: a machine has only so much to say once it is
        // closing. (A `for … where self.runCycle()` here ran all 10,000 cycles at every shutdown,
        // 50 ms to 1.4 s of the event loop each in a debug build, stalling every other channel
        // of the loop meanwhile.)
        var cycles = 0
        while cycles < Self.shutdownCycles, self.runCycle() { cycles += 1 }
        if let socket = self.socket, !socket.isWritable, self.eventLoop.now < deadline {
            self.eventLoop.scheduleTask(in: .milliseconds(2)) { self.flushForShutdown(until: deadline, done) }
            return
        }
        self.lock.withLock { self.shutDown = true }
        self.timer?.cancel()
        self.timer = nil
        self.timerDeadline = nil
        guard let lastWrite = self.lastWrite else {
            done.succeed()
            return
        }
        let timeout = self.eventLoop.scheduleTask(deadline: deadline) { done.succeed() }
        lastWrite.whenComplete { _ in
            timeout.cancel()
            done.succeed()  // a second completion, after the timeout, is ignored by NIO
        }
    }

    /// Runs a cycle and completes once what it wrote has left.
    public func flush() -> EventLoopFuture<Void> {
        self.eventLoop.flatSubmit {
            self.trackWrites = true
            self.lastWrite = nil
            self.runCycle()
            self.trackWrites = false
            defer { self.lastWrite = nil }
            return self.lastWrite ?? self.eventLoop.makeSucceededVoidFuture()
        }
    }

    // MARK: - Private

    /// Returns true when the caller must schedule a cycle (lock held).
    @inlinable
    func requestCycleLocked() -> Bool {
        guard !self.cycleRequested else { return false }
        self.cycleRequested = true
        return !self.inCycle
    }

    @inlinable
    func scheduleCycle() {
        self.eventLoop.execute { self.runCycle() }
    }

    /// Hands the datagrams read so far to the machine (lock held).
    @inlinable
    func drainInboxLocked() {
        guard !self.inbox.isEmpty else { return }
        if !self.shutDown {
            let now = self.eventLoop.now
            for (datagram, source) in self.inbox {
                self.machine.handle(datagram: datagram, from: source, now: now)
            }
        }
        self.inbox.removeAll(keepingCapacity: true)
    }

    /// Polls datagrams into one buffer, up to ``Limits/datagramsPerRound`` (lock held); returns
    /// them and whether more may be due.
    @inlinable
    func collectTransmitsLocked() -> (TransmitBatch<Machine.Destination>?, Bool) {
        guard let socket = self.socket, socket.isWritable, !self.shutDown else { return (nil, false) }
        let now = self.eventLoop.now
        var batch = TransmitBatch<Machine.Destination>(buffer: socket.allocator.buffer(capacity: 2048))
        swap(&batch.datagrams, &self.spareDatagrams)
        while batch.datagrams.count < self.limits.datagramsPerRound {
            let start = batch.buffer.writerIndex
            guard let destination = self.machine.pollTransmit(now: now, into: &batch.buffer) else {
                if batch.datagrams.isEmpty {
                    swap(&batch.datagrams, &self.spareDatagrams)
                    return (nil, false)
                }
                return (batch, false)
            }
            if batch.datagrams.isEmpty {
                // More may follow: make room for a whole batch at once.
                batch.buffer.reserveCapacity(64 * 1024)
            }
            batch.datagrams.append(.init(destination: destination, start: start, length: batch.buffer.writerIndex - start))
        }
        return (batch, true)
    }

    @inlinable
    func rearmTimer() {
        guard var next = self.lock.withLock({ self.shutDown ? nil : self.machine.nextDeadline }) else {
            self.timer?.cancel()
            self.timer = nil
            self.timerDeadline = nil
            return
        }
        if let socket = self.socket, !socket.isWritable {
            // Nothing can be sent until the socket drains (which runs a cycle), so a due deadline
            // (an acknowledgement, say) would stay due: do not fire again at once.
            next = max(next, self.eventLoop.now + .milliseconds(1))
        }
        if let current = self.timerDeadline, current <= next, self.timer != nil { return }
        self.timer?.cancel()
        self.timerDeadline = next
        self.timer = self.eventLoop.scheduleTask(deadline: next) {
            self.timer = nil
            self.timerDeadline = nil
            let now = self.eventLoop.now
            self.lock.withLock {
                if !self.shutDown { self.machine.handleTimeout(now: now) }
            }
            self.runCycle()
        }
    }
}
