import NIOCore
import NIOPosix

/// The event-loop-confined state and logic of ``UDPImpairmentRelay``.
///
/// Everything the relay does happens on one event loop: reading from the listen socket and
/// the upstream sockets, running both models, firing both delivery timers and writing. This
/// class is therefore not `Sendable`; ``UDPImpairmentRelay`` reaches it only through a
/// `NIOLoopBound`, and the channel handlers and timers that call it all run on `loop`.
final class RelayCore {
    // MARK: - Configuration

    let loop: any EventLoop
    let target: SocketAddress
    private let allocator = ByteBufferAllocator()

    /// Datagrams due for a client whose upstream socket is still being opened wait here; past
    /// this many, they are counted as send failures.
    static let maximumPendingPerUpstream = 4096

    // MARK: - State

    /// The socket clients send to; set by the channel initializer before it is bound.
    var listenChannel: (any Channel)?
    private var forward: ImpairmentModel<RelayedDatagram>
    private var backward: ImpairmentModel<RelayedDatagram>
    private var forwardTimer = DeliveryTimer()
    private var backwardTimer = DeliveryTimer()
    private var forwardSendFailures = 0
    private var backwardSendFailures = 0
    private var upstreams: [SocketAddress: UpstreamLink] = [:]
    private var isStopped = false

    init(
        loop: any EventLoop,
        target: SocketAddress,
        forward: ImpairmentProfile,
        backward: ImpairmentProfile,
        seed: UInt64
    ) {
        self.loop = loop
        self.target = target
        let seeds = UDPImpairmentRelay.directionSeeds(seed)
        self.forward = ImpairmentModel(profile: forward, seed: seeds.forward)
        self.backward = ImpairmentModel(profile: backward, seed: seeds.backward)
    }

    // MARK: - Client → target

    /// Called by the listen socket's handler for every datagram from a client. The model
    /// takes it at once; sending waits for ``pumpForward()`` at the end of the read burst,
    /// so that a burst leaves in one flush (one `sendmmsg`).
    func receivedFromClient(_ payload: ByteBuffer, from client: SocketAddress) {
        guard !self.isStopped else { return }
        if self.upstreams[client] == nil {
            self.openUpstream(for: client)
        }
        let datagram = RelayedDatagram(client: client, payload: payload, allocator: self.allocator)
        self.forward.submit(datagram, at: .now())
    }

    /// Sends every forward datagram that is due, then re-arms the forward timer. Runs when a
    /// read burst from clients ends and when the forward timer fires.
    func pumpForward() {
        guard !self.isStopped else { return }
        let now = NIODeadline.now()
        var written: [ObjectIdentifier: any Channel] = [:]
        while let datagram = self.forward.popDue(at: now) {
            guard let link = self.upstreams[datagram.client], !link.failed else {
                self.forwardSendFailures += 1
                continue
            }
            if let channel = link.channel {
                self.write(datagram.payload, on: channel, forward: true)
                written[ObjectIdentifier(channel)] = channel
            } else if link.pending.count < Self.maximumPendingPerUpstream {
                link.pending.append(datagram.payload)
            } else {
                self.forwardSendFailures += 1
            }
        }
        for channel in written.values {
            channel.flush()
        }
        self.forwardTimer.arm(at: self.forward.nextDeliveryTime, on: self.loop) {
            self.forwardTimer.fired()
            self.pumpForward()
        }
    }

    // MARK: - Target → client

    /// Called by an upstream socket's handler for every datagram the target sends back;
    /// sending waits for ``pumpBackward()`` at the end of the read burst.
    func receivedFromTarget(_ payload: ByteBuffer, for client: SocketAddress) {
        guard !self.isStopped else { return }
        let datagram = RelayedDatagram(client: client, payload: payload, allocator: self.allocator)
        self.backward.submit(datagram, at: .now())
    }

    /// Sends every backward datagram that is due, then re-arms the backward timer. Runs when
    /// a read burst from an upstream socket ends and when the backward timer fires.
    func pumpBackward() {
        guard !self.isStopped else { return }
        let now = NIODeadline.now()
        guard let listenChannel = self.listenChannel else { return }
        var wroteAny = false
        while let datagram = self.backward.popDue(at: now) {
            let envelope = AddressedEnvelope(remoteAddress: datagram.client, data: datagram.payload)
            self.write(envelope, on: listenChannel, forward: false)
            wroteAny = true
        }
        if wroteAny {
            listenChannel.flush()
        }
        self.backwardTimer.arm(at: self.backward.nextDeliveryTime, on: self.loop) {
            self.backwardTimer.fired()
            self.pumpBackward()
        }
    }

    // MARK: - Writing

    /// Writes without flushing and counts a failed write against its direction.
    private func write<Payload: Sendable>(_ payload: Payload, on channel: any Channel, forward: Bool) {
        let promise = self.loop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenFailure { _ in
            if forward {
                self.forwardSendFailures += 1
            } else {
                self.backwardSendFailures += 1
            }
        }
        channel.write(payload, promise: promise)
    }

    // MARK: - Upstream sockets

    /// Opens the client's own socket toward the target (like a NAT mapping). Datagrams due
    /// before it is connected wait in the link.
    private func openUpstream(for client: SocketAddress) {
        let link = UpstreamLink()
        self.upstreams[client] = link
        let boundSelf = NIOLoopBound(self, eventLoop: self.loop)
        let opened = UDPImpairmentRelay.datagramBootstrap(group: self.loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        UpstreamHandler(client: client, core: boundSelf.value)
                    )
                }
            }
            .connect(to: self.target)
        link.opening = opened
        opened.assumeIsolated().whenComplete { result in
            self.upstreamOpened(link, for: client, result: result)
        }
    }

    private func upstreamOpened(_ link: UpstreamLink, for client: SocketAddress, result: Result<any Channel, any Error>) {
        link.opening = nil
        switch result {
        case .success(let channel):
            guard !self.isStopped else {
                channel.close(promise: nil)
                return
            }
            link.channel = channel
            for payload in link.pending {
                self.write(payload, on: channel, forward: true)
            }
            link.pending = []
            channel.flush()
        case .failure:
            link.failed = true
            self.forwardSendFailures += link.pending.count
            link.pending = []
        }
    }

    /// Called when an upstream socket closes (an unrecoverable socket error, or stop): the
    /// mapping is forgotten, so the client's next datagram opens a fresh one.
    func upstreamClosed(_ channel: any Channel, for client: SocketAddress) {
        guard !self.isStopped, let link = self.upstreams[client], link.channel === channel else { return }
        self.upstreams[client] = nil
    }

    // MARK: - Statistics and stopping

    /// Both directions' counters, including the relay's own send failures.
    func statistics() -> UDPImpairmentRelay.Statistics {
        var forward = self.forward.statistics
        forward.sendFailures = self.forwardSendFailures
        var backward = self.backward.statistics
        backward.sendFailures = self.backwardSendFailures
        return UDPImpairmentRelay.Statistics(forward: forward, backward: backward)
    }

    /// Cancels both timers, drops the datagrams still in flight and closes every socket.
    /// The future completes when all sockets are closed, with the final statistics.
    func stop() -> EventLoopFuture<UDPImpairmentRelay.Statistics> {
        let statistics = self.statistics()
        guard !self.isStopped else {
            return self.loop.makeSucceededFuture(statistics)
        }
        self.isStopped = true
        self.forwardTimer.cancel()
        self.backwardTimer.cancel()
        var closed: [EventLoopFuture<Void>] = []
        for link in self.upstreams.values {
            if let channel = link.channel {
                closed.append(channel.close())
            } else if let opening = link.opening {
                // `upstreamOpened` closes it once connected; wait for that.
                closed.append(opening.flatMap { $0.closeFuture })
            }
        }
        self.upstreams = [:]
        if let listenChannel = self.listenChannel {
            closed.append(listenChannel.close())
        }
        self.listenChannel = nil
        return EventLoopFuture.andAllComplete(closed, on: self.loop).map { statistics }
    }
}

// MARK: - Upstream link

/// One client's mapping: its upstream socket once connected, and what waits for it.
final class UpstreamLink {
    var channel: (any Channel)?
    var opening: EventLoopFuture<any Channel>?
    var pending: [ByteBuffer] = []
    var failed = false
}
