import ArgumentParser
import Foundation
import GameKitTransport
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NetworkImpairment

/// One side of a transport benchmark run over OpenGameKit's transport, with the same work and
/// output as the anchor programs under benchmarks/ (see benchmarks/README.md).
///
/// The client drives its sends from the endpoint's event loop (sending until the buffer is full,
/// resuming on `sendBufferAvailable`), so the whole process does its work on one thread, as the
/// single-threaded anchors do.
struct TransportPeer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "transport-peer", abstract: "One side of a transport run (used by gk-bench itself).", shouldDisplay: false)

    @Argument var role: String
    @Option var host = "127.0.0.1"
    @Option var port: Int
    @Option var work: String
    @Option var count: Int
    @Option var size: Int
    @Option var timeout: Double = 120
    @Flag var noOffload = false

    func validate() throws {
        guard ["server", "client"].contains(self.role) else { throw ValidationError("role must be server or client") }
        guard ["stream", "pingpong-reliable", "pingpong-unreliable"].contains(self.work) else { throw ValidationError("unknown work '\(self.work)'") }
        guard self.size >= 8, self.count > 0 else { throw ValidationError("size must be >= 8 and count > 0") }
    }

    var configuration: TransportConfiguration {
        var configuration = TransportConfiguration()
        configuration.segmentationOffload = !self.noOffload
        configuration.disconnectTimeout = .seconds(Int64(self.timeout))
        return configuration
    }

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        if self.role == "server" {
            try await self.serve(group: group)
        } else {
            try await self.drive(group: group)
        }
        try? await group.shutdownGracefully()
    }

    // MARK: - Server

    private func serve(group: EventLoopGroup) async throws {
        let finished = StopSignal()
        let box = NIOLockedValueBox<TransportEndpoint?>(nil)
        let state = NIOLockedValueBox((delivered: 0, inOrder: 0, next: UInt64(0)))
        let (work, count) = (self.work, self.count)
        let endpoint = try await TransportEndpoint.bind(host: self.host, port: self.port, configuration: self.configuration, group: group) { event in
            guard let endpoint = box.withLockedValue({ $0 }) else { return }
            switch event {
            case .connectionRequest(let request):
                _ = try? endpoint.accept(request.id)
            case .received(let message, let link, let mode):
                if work == "stream" {
                    let done = state.withLockedValue { state -> Bool in
                        state.delivered += 1
                        if message.getInteger(at: message.readerIndex, as: UInt64.self) == state.next { state.inOrder += 1 }
                        state.next += 1
                        return state.delivered == count
                    }
                    if done {
                        let (delivered, inOrder) = state.withLockedValue { ($0.delivered, $0.inOrder) }
                        var reply = ByteBuffer()
                        reply.writeInteger(UInt64(delivered))
                        reply.writeInteger(UInt64(inOrder))
                        try? endpoint.send(reply, on: link, mode: .reliable)
                    }
                } else {
                    state.withLockedValue { $0.delivered += 1 }
                    try? endpoint.send(message, on: link, mode: mode)
                }
            case .linkClosed:
                finished.fire()
            default:
                break
            }
        }
        box.withLockedValue { $0 = endpoint }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        await finished.wait(seconds: self.timeout)
        let (delivered, inOrder) = state.withLockedValue { ($0.delivered, $0.inOrder) }
        printJSON(["role": "server", "impl": "opengamekit", "delivered": delivered, "in_order": inOrder])
        await endpoint.shutdown()
    }

    // MARK: - Client

    private func drive(group: EventLoopGroup) async throws {
        let target = try SocketAddress(ipAddress: self.host, port: self.port)
        let run = ClientRun(work: self.work, count: self.count, size: self.size)
        // Any local address of the target's family: the route picks the one that reaches it.
        let any = target.protocol == .inet6 ? "::" : "0.0.0.0"
        let endpoint = try await TransportEndpoint.bind(host: any, port: 0, configuration: self.configuration, group: group) { event in
            run.handle(event)
        }
        run.endpoint = endpoint
        let link = try await endpoint.openLink(to: target)
        run.link = link.id
        endpoint.eventLoop.execute { run.start() }
        await run.finished.wait(seconds: self.timeout)
        let line = try await endpoint.eventLoop.submit {
            try JSONSerialization.data(withJSONObject: run.result(), options: [.sortedKeys])
        }.get()
        FileHandle.standardOutput.write(line + Data("\n".utf8))
        try? endpoint.close(link.id)
        try? await Task.sleep(nanoseconds: 50_000_000)
        await endpoint.shutdown()
    }
}

/// The client's state; touched only on the endpoint's event loop.
private final class ClientRun: @unchecked Sendable {
    let work: String
    let count: Int
    let size: Int
    var endpoint: TransportEndpoint!
    var link: LinkID!
    let finished = StopSignal()

    private var nextToSend = 0
    private var startTime: ContinuousClock.Instant?
    private var end: ContinuousClock.Instant?
    private var delivered = 0
    private var inOrder = 0
    private var roundTrips: [Double] = []
    private var roundStart: ContinuousClock.Instant?
    private var lossTimer: Scheduled<Void>?
    private var message: ByteBuffer

    init(work: String, count: Int, size: Int) {
        self.work = work
        self.count = count
        self.size = size
        self.message = ByteBuffer(repeating: 0x5A, count: size)
        self.roundTrips.reserveCapacity(count)
    }

    private var mode: SendMode { self.work == "pingpong-unreliable" ? .unreliable : .reliable }

    func start() {
        self.startTime = .now
        if self.work == "stream" { self.pump() } else { self.sendRound() }
    }

    func handle(_ event: TransportEvent) {
        switch event {
        case .sendBufferAvailable:
            self.pump()
        case .received(let reply, _, _):
            if self.work == "stream" {
                self.delivered = Int(reply.getInteger(at: reply.readerIndex, as: UInt64.self) ?? 0)
                self.inOrder = Int(reply.getInteger(at: reply.readerIndex + 8, as: UInt64.self) ?? 0)
                self.end = .now
                self.finished.fire()
            } else if reply.getInteger(at: reply.readerIndex, as: UInt64.self) == UInt64(self.nextToSend - 1) {
                self.lossTimer?.cancel()
                let elapsed = ContinuousClock.now - self.roundStart!
                self.roundTrips.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
                self.delivered += 1
                self.inOrder += 1
                self.sendRound()
            }
        case .linkClosed:
            self.end = self.end ?? .now
            self.finished.fire()
        default:
            break
        }
    }

    /// Sends stream messages until the buffer is full or all are queued.
    private func pump() {
        while self.nextToSend < self.count {
            self.message.setInteger(UInt64(self.nextToSend), at: self.message.readerIndex)
            do {
                try self.endpoint.send(self.message, on: self.link, mode: .reliable)
            } catch {
                return
            }
            self.nextToSend += 1
        }
    }

    private func sendRound() {
        guard self.nextToSend < self.count else {
            self.end = .now
            self.finished.fire()
            return
        }
        self.message.setInteger(UInt64(self.nextToSend), at: self.message.readerIndex)
        self.nextToSend += 1
        self.roundStart = .now
        try? self.endpoint.send(self.message, on: self.link, mode: self.mode)
        if self.mode == .unreliable {
            // A lost datagram ends its round after 100 ms.
            self.lossTimer = self.endpoint.eventLoop.scheduleTask(in: .milliseconds(100)) { self.sendRound() }
        }
    }

    func result() -> [String: Any] {
        let end = self.end ?? .now
        let elapsed = end - (self.startTime ?? end)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let percentiles = Percentiles(self.roundTrips)
        let work = self.work == "stream" ? "stream" : self.work
        var link: [String: Any] = [:]
        if let statistics = self.endpoint.statistics(for: self.link) {
            // What the sender's loss detection and congestion control did (for diagnosis).
            link = [
                "packets_sent": statistics.packetsSent, "packets_lost": statistics.packetsLost,
                "spurious_losses": statistics.spuriousLosses, "congestive_losses": statistics.congestiveLosses,
                "random_losses": statistics.randomLosses, "reductions_undone": statistics.reductionsUndone, "loss_reductions": statistics.lossReductions,
                "retransmission_timeouts": statistics.retransmissionTimeouts, "tail_loss_probes": statistics.tailLossProbes,
                "reordering_seen": statistics.reorderingSeen, "slow_start_ended_by_delay": statistics.slowStartEndedByDelay, "congestion_window": statistics.congestionWindow,
                "smoothed_rtt_us": (statistics.smoothedRTT?.nanoseconds ?? 0) / 1000, "minimum_rtt_us": (statistics.minimumRTT?.nanoseconds ?? 0) / 1000,
                "cipher": "\(statistics.dataCipher)", "cipher_backend": TransportEndpoint.packetCipherBackend,
            ]
        }
        return [
            "link": link,
            "impl": "opengamekit", "work": work, "count": self.count, "size": self.size,
            "delivered": self.delivered, "expected": self.count, "in_order": self.inOrder,
            "seconds": seconds,
            "msgs_per_s": seconds > 0 ? Double(self.delivered) / seconds : 0,
            "mb_per_s": seconds > 0 ? Double(self.delivered * self.size) / seconds / 1e6 : 0,
            "p50_us": percentiles.value(at: 0.5) ?? NSNull(),
            "p99_us": percentiles.value(at: 0.99) ?? NSNull(),
        ]
    }
}

/// Resumes a waiting task once, when fired or after a deadline.
final class StopSignal: @unchecked Sendable {
    private let lock = NIOLock()
    private var fired = false
    private var continuation: CheckedContinuation<Void, Never>?

    func fire() {
        let continuation = self.lock.withLock { () -> CheckedContinuation<Void, Never>? in
            self.fired = true
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume()
    }

    func wait(seconds: Double) async {
        let timer = Task {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            self.fire()
        }
        defer { timer.cancel() }
        await withCheckedContinuation { continuation in
            let resumeNow = self.lock.withLock { () -> Bool in
                if self.fired { return true }
                self.continuation = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}

private func printJSON(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}
