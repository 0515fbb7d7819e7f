import NIOConcurrencyHelpers
import NIOCore

/// One NIO datagram channel as a ``DatagramSocket``: consecutive datagrams to one destination
/// merged into segmentation offload sends where the kernel supports it, destinations without a
/// route dropped before NIO sees them (``RouteCheck``), and, when the owner gives a way to
/// bind again, a channel closed underneath replaced by a fresh one at the same address.
///
/// Why the last two: NIO closes a datagram channel on most send errors (`ENETUNREACH` when an
/// interface has just gone away), which would end every link on the socket.
package final class UDPChannelSocket: DatagramSocket, @unchecked Sendable {
    package typealias Destination = SocketAddress

    /// How many times a socket closed underneath is bound again before giving up.
    package static let reopenAttempts = 100

    package let eventLoop: EventLoop
    private let reopen: (@Sendable () async throws -> Channel)?
    private let counters = NIOLockedValueBox((unroutable: UInt64(0), reopened: UInt64(0)))

    // MARK: Event loop only
    private var channel: Channel?
    private var batcher: DatagramBatcher
    private var routes: RouteCheck
    private let makeRoutes: () -> RouteCheck
    /// Asked before binding again: false once the owner is shutting down.
    private var shouldReopen: @Sendable () -> Bool = { true }
    /// Told when a fresh channel has replaced a closed one.
    private var replaced: @Sendable () -> Void = {}

    /// A socket over `channel`. `reopen` binds another at the same address (nil: a closed channel
    /// stays closed).
    package init(
        channel: Channel, segmentationOffload: Bool,
        routes: @escaping () -> RouteCheck = { RouteCheck() },
        reopen: (@Sendable () async throws -> Channel)? = nil
    ) {
        self.channel = channel
        self.eventLoop = channel.eventLoop
        self.batcher = DatagramBatcher(segmentationOffload: segmentationOffload)
        self.makeRoutes = routes
        self.routes = routes()
        self.reopen = reopen
    }

    /// What to ask before binding again and whom to tell after (the driver, when attached).
    package func onReplacement(shouldReopen: @escaping @Sendable () -> Bool, replaced: @escaping @Sendable () -> Void) {
        self.eventLoop.preconditionInEventLoop()
        self.shouldReopen = shouldReopen
        self.replaced = replaced
    }

    /// Datagrams dropped for want of a route.
    package var unroutableDatagrams: UInt64 { self.counters.withLockedValue { $0.unroutable } }
    /// Channels bound again after one closed underneath.
    package var socketsReopened: UInt64 { self.counters.withLockedValue { $0.reopened } }

    /// The channel now (it may be replaced, or nil while being replaced). Event loop only.
    package var currentChannel: Channel? {
        self.eventLoop.preconditionInEventLoop()
        return self.channel
    }

    // MARK: - DatagramSocket

    package var isWritable: Bool { self.channel?.isWritable ?? false }

    package var allocator: ByteBufferAllocator { self.channel?.allocator ?? ByteBufferAllocator() }

    package func isRoutable(_ destination: SocketAddress) -> Bool {
        self.routes.isRoutable(destination, now: self.eventLoop.now)
    }

    package func write(_ batch: TransmitBatch<SocketAddress>, written: EventLoopPromise<Void>?) -> [SocketAddress] {
        guard let channel = self.channel else {
            written?.succeed()
            return []
        }
        let now = self.eventLoop.now
        var unroutable: [SocketAddress] = []
        var dropped: UInt64 = 0
        for datagram in batch.datagrams {
            if self.routes.isRoutable(datagram.destination, now: now) {
                self.batcher.add(address: datagram.destination, start: datagram.start, length: datagram.length)
            } else {
                dropped += 1
                if !unroutable.contains(datagram.destination) { unroutable.append(datagram.destination) }
            }
        }
        if dropped > 0 { self.counters.withLockedValue { $0.unroutable += dropped } }
        let envelopes = self.batcher.takeEnvelopes(from: batch.buffer)
        guard let last = envelopes.last else {
            written?.succeed()
            return unroutable
        }
        for envelope in envelopes.dropLast() { channel.write(envelope, promise: nil) }
        channel.write(last, promise: written)
        channel.flush()
        return unroutable
    }

    package func close() -> EventLoopFuture<Void> {
        self.eventLoop.flatSubmit {
            guard let channel = self.channel else { return self.eventLoop.makeSucceededVoidFuture() }
            return channel.close().recover { _ in }
        }
    }

    /// Closes the channel as a send error would (tests of the replacement).
    package func closeUnderneath() -> EventLoopFuture<Void> {
        self.close()
    }

    // MARK: - Replacement

    /// The channel went inactive. If it was not closed on purpose, bind another at the same
    /// address and carry on: what the machine had in flight is recovered by its own
    /// retransmissions. Retries back off up to a second, at most ``reopenAttempts`` times.
    package func channelInactive(_ closed: Channel) {
        self.eventLoop.preconditionInEventLoop()
        guard let current = self.channel, current === closed, let reopen = self.reopen, self.shouldReopen() else { return }
        self.channel = nil
        let shouldReopen = self.shouldReopen
        Task {
            for attempt in 0..<Self.reopenAttempts {
                guard shouldReopen() else { return }
                if let fresh = try? await reopen() {
                    let kept = try? await self.eventLoop.submit { () -> Bool in
                        guard shouldReopen() else { return false }
                        self.channel = fresh
                        // What closed the socket was most likely a send to an address whose route
                        // had just gone (an interface went down): ask the kernel afresh.
                        self.routes = self.makeRoutes()
                        self.counters.withLockedValue { $0.reopened += 1 }
                        self.replaced()
                        return true
                    }.get()
                    if kept != true { try? await fresh.close() }
                    return
                }
                try? await Task.sleep(nanoseconds: UInt64(min(attempt + 1, 10)) * 100_000_000)
            }
        }
    }
}
