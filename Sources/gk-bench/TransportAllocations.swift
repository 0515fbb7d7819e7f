import ArgumentParser
import Foundation
@_spi(Machine) import GameKitOnline
@_spi(Machine) import GameKitTransport
import MallocInterposerSwift
import NIOConcurrencyHelpers
import NIOCore
import NetworkImpairment

/// `gk-bench transport-allocations`: heap allocations per message in steady state, counted by
/// ordo-one's malloc interposer (a count, not a time: the same on every run of the same build).
///
/// Two endpoints in this process on the sandbox's loopback. After a warm-up, each measured round
/// sends a burst of `--burst` messages from one endpoint to the other and waits until the last
/// has been delivered; the counter runs from before the first send until the last delivery, so
/// it covers both sides: the send call, sealing, the socket write, the read, opening,
/// reassembly, the event to the application, and the acknowledgements flowing back. One line of
/// JSON: `allocations_per_message` (`reliable`, `unreliable`), and the bytes per message.
///
/// With `--rendezvous HOST:PORT` the two endpoints are an online session's sockets instead (the
/// online layer under each endpoint, PROTOCOL §18.8): they meet in a room of that rendezvous
/// (another process, so that its own allocations are not counted) and the link goes through its
/// relay, without direct paths: the figure is a relayed datagram's, `path` says which.
///
/// The counter only counts when the interposer is preloaded: `gk-bench transport` and the
/// allocation test start this command with `LD_PRELOAD` naming `libMallocInterposerSwift.so`
/// (built beside gk-bench); without it the command says so and exits 2.
struct TransportAllocations: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transport-allocations",
        abstract: "Heap allocations per message sent and received, in steady state (run with the malloc interposer preloaded).")

    @Option(help: "Message size in bytes.")
    var size = 1000

    @Option(help: "Messages per burst.")
    var burst = 100

    @Option(help: "Measured bursts per mode (after as many for warming up).")
    var bursts = 10

    @Option(help: "Measure through the relay of this rendezvous (HOST:PORT, e.g. a gk-rendezvous in the same sandbox) instead of on the LAN.")
    var rendezvous: String?

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        guard Self.interposerIsPreloaded else {
            FileHandle.standardError.write(Data("transport-allocations: run it with LD_PRELOAD=\(Self.interposerPath) so that allocations are counted\n".utf8))
            throw ExitCode(2)
        }
        let arrivals = Arrivals()
        let (receiver, sender, destination): (TransportEndpoint, TransportEndpoint, SocketAddress)
        if let rendezvous = self.rendezvous {
            (receiver, sender, destination) = try await Self.relayedPair(
                rendezvous: EndpointArgument.parse(rendezvous, option: "--rendezvous", allowPortZero: false), arrivals: arrivals)
        } else {
            receiver = try await TransportEndpoint.bind(host: "127.0.0.1", port: 0) { event in arrivals.handle(event) }
            sender = try await TransportEndpoint.bind(host: "127.0.0.1", port: 0) { _ in }
            destination = receiver.localAddress
        }
        arrivals.endpoint = receiver
        let link = try await sender.openLink(to: destination).id
        let message = ByteBuffer(repeating: 0x5A, count: self.size)
        var line: [String: Any] = [
            "work": "allocations", "size": self.size, "burst": self.burst, "bursts": self.bursts, "path": self.rendezvous == nil ? "lan" : "relayed",
        ]
        var perMessage: [String: Any] = [:]
        for mode in [SendMode.reliable, .unreliable] {
            // Warm-up: buffers, dictionaries and the congestion window reach their working sizes.
            for _ in 0..<self.bursts { _ = try await self.sendBurst(message, on: link, mode: mode, from: sender, to: arrivals) }
            MallocInterposerSwift.reset()
            MallocInterposerSwift.hook()
            var delivered = 0
            for _ in 0..<self.bursts {
                delivered += try await self.sendBurst(message, on: link, mode: mode, from: sender, to: arrivals)
            }
            MallocInterposerSwift.unhook()
            let statistics = MallocInterposerSwift.getStatistics()
            let name = mode == .reliable ? "reliable" : "unreliable"
            perMessage[name] = delivered > 0 ? Double(statistics.mallocCount) / Double(delivered) : NSNull()
            line["\(name)_bytes"] = delivered > 0 ? Double(statistics.mallocBytesCount) / Double(delivered) : NSNull()
            line["\(name)_delivered"] = delivered
        }
        line["allocations_per_message"] = perMessage
        try? sender.close(link)
        await sender.shutdown()
        await receiver.shutdown()
        emitJSONLine(line)
    }

    /// Two online sessions' endpoints in a room of `rendezvous`, each with its relay ready: the
    /// receiver, the sender, and the receiver's member address (where the sender's link goes).
    private static func relayedPair(rendezvous: SocketAddress, arrivals: Arrivals) async throws -> (TransportEndpoint, TransportEndpoint, SocketAddress) {
        func member(_ peer: UInt32, _ request: RoomRequest, onEvent: @escaping @Sendable (TransportEvent) -> Void) async throws
            -> (TransportEndpoint, AsyncStream<RoomEvent>)
        {
            let (events, sink) = AsyncStream.makeStream(of: RoomEvent.self)
            let online = OnlineMachine.make(
                rendezvous: [rendezvous], sessionKey: 0xA110_CA7E, request: request,
                record: MemberRecord(peerID: peer, displayName: "peer \(peer)"), directPaths: false, now: .now())
            let endpoint = try await TransportEndpoint.bind(
                to: SocketAddress(ipAddress: "127.0.0.1", port: 0), online: online, onEvent: onEvent, onRoomEvent: { sink.yield($0) })
            return (endpoint, events)
        }
        /// Waits for the room's code and the relay (and, when `peer` is given, that member).
        func ready(_ events: AsyncStream<RoomEvent>, member peer: UInt32? = nil) async throws -> RoomCode {
            var code: RoomCode?
            var relay = false
            var seen = peer == nil
            for await event in events {
                switch event {
                case .joined(let joined, _): code = joined
                case .relayReady: relay = true
                case .memberJoined(let record) where record.peerID == peer: seen = true
                case .failed(let error): throw ValidationError("--rendezvous: \(error)")
                default: break
                }
                if let code, relay, seen { return code }
            }
            throw ValidationError("--rendezvous: the room ended before the relay was ready")
        }
        let (receiver, receiverEvents) = try await member(1, .create) { arrivals.handle($0) }
        let code = try await ready(receiverEvents)
        let (sender, senderEvents) = try await member(2, .join(code)) { _ in }
        _ = try await ready(senderEvents, member: 1)
        return (receiver, sender, MemberAddress.of(1))
    }

    /// Sends one burst and waits for it to arrive (an unreliable message lost on loopback ends
    /// the wait after a second); returns how many arrived.
    private func sendBurst(_ message: ByteBuffer, on link: LinkID, mode: SendMode, from sender: TransportEndpoint, to arrivals: Arrivals) async throws -> Int {
        let target = arrivals.expect(self.burst)
        for _ in 0..<self.burst { try sender.send(message, on: link, mode: mode) }
        return await arrivals.wait(for: target, burst: self.burst, seconds: 1)
    }

    /// The interposer's shared library, beside this program.
    static var interposerPath: String {
        URL(fileURLWithPath: ProjectLayout.executable).deletingLastPathComponent().appendingPathComponent("libMallocInterposerSwift.so").path
    }

    static var interposerIsPreloaded: Bool {
        (ProcessInfo.processInfo.environment["LD_PRELOAD"] ?? "").contains("libMallocInterposerSwift")
    }
}

/// Counts messages arriving at the receiving endpoint and wakes the waiting task at a target.
private final class Arrivals: @unchecked Sendable {
    var endpoint: TransportEndpoint?
    private let lock = NIOLock()
    private var count = 0
    private var target = Int.max
    private var waiter: CheckedContinuation<Void, Never>?
    /// Set when the current burst's wait has timed out (cleared by ``expect(_:)``).
    private var expired = false

    func handle(_ event: TransportEvent) {
        switch event {
        case .connectionRequest(let request):
            _ = try? self.endpoint?.accept(request.id)
        case .received:
            let waiter = self.lock.withLock { () -> CheckedContinuation<Void, Never>? in
                self.count += 1
                guard self.count >= self.target else { return nil }
                defer { self.waiter = nil }
                return self.waiter
            }
            waiter?.resume()
        default:
            break
        }
    }

    /// The count at which `n` more messages will have arrived.
    func expect(_ n: Int) -> Int {
        self.lock.withLock {
            self.target = self.count + n
            self.expired = false
            return self.target
        }
    }

    /// Waits until the count reaches `target` (set by ``expect(_:)`` for a burst of `burst`) or
    /// `seconds` pass; returns how many of the burst arrived.
    func wait(for target: Int, burst: Int, seconds: Double) async -> Int {
        let start = target - burst
        let timer = Task {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            let waiter = self.lock.withLock { () -> CheckedContinuation<Void, Never>? in
                self.expired = true
                defer { self.waiter = nil }
                return self.waiter
            }
            waiter?.resume()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = self.lock.withLock { () -> Bool in
                if self.count >= target || self.expired { return true }
                self.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
        timer.cancel()
        return self.lock.withLock { min(self.count, target) } - start
    }
}
