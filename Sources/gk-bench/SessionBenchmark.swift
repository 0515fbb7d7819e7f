import ArgumentParser
import Foundation
import GameKitTransport
import NIOConcurrencyHelpers
import NIOCore
import NetworkImpairment
import OpenGameKit

#if canImport(Glibc)
import Glibc
#endif

/// `gk-bench session`: what a `GKSession` costs on top of the transport, in one process on the
/// sandbox's loopback.
///
/// - `connect`: a client already seeing the server calls `connect(toPeer:withTimeout:)`; timed
///   until both delegates have heard `.stateConnected` (the server's delegate accepts at once).
///   Then it disconnects, sees the server again, and the next round starts. Side by side: the
///   transport's own handshake (`openLink`) between two endpoints, the floor under it, and the
///   ratio.
/// - `fanout-64`: a server sends a 1000-byte reliable message to its 63 clients 60 times a
///   second; each message carries its send time, and each client's data handler notes the
///   delay. CPU is the whole process's (server and clients share it), as a share of one core.
/// - `pingpong-unreliable-64`, `pingpong-reliable-64`: round trips through two sessions'
///   `send` and data handlers, beside the kernel's UDP ping-pong (SessionPingPong.swift).
struct SessionBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "session", abstract: "GKSession connect latency and 64-peer fan-out.")

    /// Printed beside the figure; not asserted.
    static let connectTargetMilliseconds = 5.0

    @Flag(help: "Print one JSON line per work (the table goes to standard error).")
    var json = false

    @Flag(help: "A short run that checks the harness, not for figures.")
    var quick = false

    @Option(help: "Connect rounds (default 200; 5 with --quick).")
    var rounds: Int?

    @Option(help: "Fan-out duration in seconds (default 30; 2 with --quick).")
    var seconds: Double?

    @Option(help: "Clients in the fan-out (default 63).")
    var clients: Int = 63

    @Option(help: "Ping-pong round trips (default 5000; 50 with --quick).")
    var pings: Int?

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        let rounds = self.rounds ?? (self.quick ? 5 : 200)
        let seconds = self.seconds ?? (self.quick ? 2 : 30)
        var lines: [[String: Any]] = []
        lines.append(try await Self.connect(rounds: rounds))
        lines.append(try await Self.fanout(clients: self.clients, seconds: seconds))
        let pings = self.pings ?? (self.quick ? 50 : 5000)
        lines.append(try await Self.pingPong(mode: .unreliable, count: pings, size: 64))
        lines.append(try await Self.pingPong(mode: .reliable, count: pings, size: 64))
        var table = "work                      p50 ms    p99 ms    cpu %   delivered/expected   anchor\n"
        for line in lines {
            func number(_ key: String) -> String { (line[key] as? Double).map { String(format: "%8.3f", $0) } ?? "       -" }
            let anchor = line["anchor"].map { "\($0) p50 \(line["anchor_p50_ms"].map { String(format: "%.3f", $0 as? Double ?? 0) } ?? "-") ms, ratio \(line["ratio_vs_anchor"] ?? "-")" } ?? ""
            table += "\((line["work"] as? String ?? "").padding(toLength: 24, withPad: " ", startingAt: 0))\(number("p50_ms"))  \(number("p99_ms"))  \(number("cpu_pct"))   \(line["delivered"] ?? "-")/\(line["expected"] ?? "-")   \(anchor)\n"
            if self.json { emitJSONLine(line) }
        }
        table += "  -> connect target ≤ \(Self.connectTargetMilliseconds) ms plus delegate time (p50): \((lines[0]["p50_ms"] as? Double).map { $0 <= Self.connectTargetMilliseconds ? "met" : "missed" } ?? "n/a")\n"
        (self.json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(table.utf8))
    }

    // MARK: - connect

    static func connect(rounds: Int) async throws -> [String: Any] {
        let id = "bench-connect-\(UInt32.random(in: 0...UInt32.max))"
        let server: GKSession = GKSession(sessionID: id, displayName: "Server", sessionMode: .server)
        let client: GKSession = GKSession(sessionID: id, displayName: "Client", sessionMode: .client)
        let serverWatch = Watcher(server, accept: true)
        let clientWatch = Watcher(client, accept: false)
        server.isAvailable = true
        client.isAvailable = true
        var samples: [Double] = []
        var failures = 0
        for _ in 0..<rounds {
            guard await clientWatch.wait(until: { client.peers(with: .stateAvailable)?.contains(server.peerID) == true }) else {
                failures += 1
                continue
            }
            serverWatch.reset()
            clientWatch.reset()
            let start = NIODeadline.now()
            client.connect(toPeer: server.peerID, withTimeout: 10)
            let both = await clientWatch.wait { clientWatch.connectedAt != nil && serverWatch.connectedAt != nil }
            if both, let a = clientWatch.connectedAt, let b = serverWatch.connectedAt {
                samples.append(Double(max(a, b).uptimeNanoseconds - start.uptimeNanoseconds) / 1e6)
            } else {
                failures += 1
            }
            client.disconnectFromAllPeers()
            // `peers(with:)` answers an empty list (never nil) once nobody is connected.
            if !(await serverWatch.wait { server.peers(with: .stateConnected)?.isEmpty != false }) {
                failures += 1
            }
        }
        await client.close()
        await server.close()

        // The floor: the transport's handshake alone.
        let responder = try await TransportEndpoint.bind(host: "::1", port: 0) { _ in }
        let responderBox = NIOLockedValueBox<TransportEndpoint?>(responder)
        let acceptor = try await TransportEndpoint.bind(host: "::1", port: 0) { event in
            if case .connectionRequest(let request) = event { _ = try? responderBox.withLockedValue { $0 }?.accept(request.id) }
        }
        responderBox.withLockedValue { $0 = acceptor }
        var floor: [Double] = []
        for _ in 0..<rounds {
            let start = NIODeadline.now()
            let link = try await responder.openLink(to: acceptor.localAddress, payload: ByteBuffer(repeating: 0, count: 300))
            floor.append(Double(NIODeadline.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6)
            try? responder.close(link.id)
        }
        await responder.shutdown()
        await acceptor.shutdown()

        let ours = Percentiles(samples)
        let anchor = Percentiles(floor)
        var line: [String: Any] = [
            "work": "connect", "rounds": rounds, "failed": failures,
            "p50_ms": ours.value(at: 0.5) ?? NSNull(), "p99_ms": ours.value(at: 0.99) ?? NSNull(),
            "cpu_pct": NSNull(), "delivered": samples.count, "expected": rounds,
            "anchor": "transport-handshake", "anchor_p50_ms": anchor.value(at: 0.5) ?? NSNull(), "anchor_p99_ms": anchor.value(at: 0.99) ?? NSNull(),
            "target_ms": Self.connectTargetMilliseconds,
        ]
        if let a = ours.value(at: 0.5), let b = anchor.value(at: 0.5), b > 0 { line["ratio_vs_anchor"] = (a / b * 100).rounded() / 100 }
        return line
    }

    // MARK: - fan-out

    static func fanout(clients count: Int, seconds: Double) async throws -> [String: Any] {
        let id = "bench-fanout-\(UInt32.random(in: 0...UInt32.max))"
        let server: GKSession = GKSession(sessionID: id, displayName: "Server", sessionMode: .server)
        let serverWatch = Watcher(server, accept: true)
        server.isAvailable = true
        let latencies = NIOLockedValueBox<[Double]>([])
        var clients: [(GKSession, Watcher)] = []
        for index in 0..<count {
            let client: GKSession = GKSession(sessionID: id, displayName: "Client \(index)", sessionMode: .client)
            let watch = Watcher(client, accept: false)
            client.setDataReceiveHandler { data, _, _ in
                guard data.count >= 8 else { return }
                let sent = data.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                let now = NIODeadline.now().uptimeNanoseconds
                latencies.withLockedValue { $0.append(Double(now &- sent) / 1e6) }
            }
            client.isAvailable = true
            clients.append((client, watch))
        }
        for (client, watch) in clients {
            _ = await watch.wait(seconds: 30) { client.peers(with: .stateAvailable)?.contains(server.peerID) == true }
            client.connect(toPeer: server.peerID, withTimeout: 20)
        }
        _ = await serverWatch.wait(seconds: 60) { (server.peers(with: .stateConnected)?.count ?? 0) == count }
        let connected = server.peers(with: .stateConnected)?.count ?? 0

        let ticks = Int(seconds * 60)
        let cpuBefore = Self.cpuSeconds()
        let wallBefore = NIODeadline.now()
        var sent = 0
        for tick in 0..<ticks {
            let due = wallBefore + .nanoseconds(Int64(Double(tick) * 1e9 / 60))
            let wait = due.uptimeNanoseconds > NIODeadline.now().uptimeNanoseconds ? due.uptimeNanoseconds - NIODeadline.now().uptimeNanoseconds : 0
            if wait > 0 { try? await Task.sleep(nanoseconds: wait) }
            var message = Data(count: 1000)
            let now = NIODeadline.now().uptimeNanoseconds
            for byte in 0..<8 { message[byte] = UInt8(truncatingIfNeeded: now >> (56 - 8 * UInt64(byte))) }
            if (try? await server.write(toAllPeers: message, with: .reliable)) != nil { sent += 1 }
        }
        // Let the last messages land (bounded).
        let expected = sent * connected
        for _ in 0..<200 where latencies.withLockedValue({ $0.count }) < expected {
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        let wall = Double(NIODeadline.now().uptimeNanoseconds - wallBefore.uptimeNanoseconds) / 1e9
        let cpu = Self.cpuSeconds() - cpuBefore
        for (client, _) in clients { await client.close() }
        await server.close()
        let samples = latencies.withLockedValue { $0 }
        let percentiles = Percentiles(samples)
        return [
            "work": "fanout-64", "clients": count, "connected": connected, "seconds": seconds,
            "p50_ms": percentiles.value(at: 0.5) ?? NSNull(), "p99_ms": percentiles.value(at: 0.99) ?? NSNull(),
            "cpu_pct": (cpu / wall * 1000).rounded() / 10, "delivered": samples.count, "expected": expected,
            "connect_failures": clients.flatMap { $0.1.failures } + serverWatch.failures,
        ]
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}

/// Notes when its session's peer connected; accepts requests when asked to.
final class Watcher: GKSessionDelegate, @unchecked Sendable {
    private let state = NIOLockedValueBox<NIODeadline?>(nil)
    private let accept: Bool
    let queue = DispatchQueue(label: "bench watcher")

    init(_ session: GKSession, accept: Bool) {
        self.accept = accept
        session.delegateQueue = self.queue
        session.delegate = self
    }

    var connectedAt: NIODeadline? { self.state.withLockedValue { $0 } }

    func reset() { self.state.withLockedValue { $0 = nil } }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        if state == .stateConnected { self.state.withLockedValue { $0 = $0 ?? .now() } }
    }

    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        guard self.accept else { return }
        do {
            try session.acceptConnection(fromPeer: peerID)
        } catch {
            self.failureCodes.withLockedValue { $0.append(-((error as? GKSessionError)?.code.rawValue ?? 1)) }
        }
    }

    private let failureCodes = NIOLockedValueBox<[Int]>([])

    /// The codes of failed connection attempts so far.
    var failures: [Int] { self.failureCodes.withLockedValue { $0 } }

    func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) {
        self.failureCodes.withLockedValue { $0.append((error as? GKSessionError)?.code.rawValue ?? -1) }
    }

    /// Polls `condition` every 200 µs for at most `seconds`.
    func wait(seconds: Double = 10, until condition: () -> Bool) async -> Bool {
        await waitUntil(seconds: seconds, every: .microseconds(200), condition)
    }
}

