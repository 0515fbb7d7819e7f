import ArgumentParser
import Crypto
import Foundation
@_spi(Machine) import GameKitOnline
import NIOConcurrencyHelpers
import NIOCore
import NetworkImpairment
import OpenGameKit

/// `gk-bench online`: online rooms in one process on the sandbox's loopback, against an
/// in-process rendezvous (PROTOCOL §18).
///
/// - `join`: a member joins a room by its code; timed from `isAvailable = true` until the room's
///   host lists it as `.stateAvailable` (registration, roster push, record fetch).
/// - `first-message` per path: from the join until the host's data handler has the joiner's first
///   message (connect, accept, send). `relayed`: direct paths off; `direct`: on, with
///   `upgrade_ms`, from the connection until `path(forPeer:)` says `.direct`.
/// - `relay-throughput`: 1000-byte reliable messages for a few seconds through the relay, beside
///   the same over the direct path, and the ratio. The relay's per-member rate cap is lifted, and
///   it runs in this process, sharing its cores with both members.
/// Every figure is measured in this run; nothing is asserted.
struct OnlineBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "online", abstract: "Online rooms: join, first message, upgrade to direct, relay throughput.")

    @Flag(help: "Print one JSON line per work (the table goes to standard error).")
    var json = false

    @Flag(help: "A short run that checks the harness, not for figures.")
    var quick = false

    @Option(help: "Join rounds (default 30; 3 with --quick).")
    var rounds: Int?

    @Option(help: "Seconds of each throughput run (default 5; 1 with --quick).")
    var seconds: Double?

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        ToolLogging.bootstrap()
        let rounds = self.rounds ?? (self.quick ? 3 : 30)
        let seconds = self.seconds ?? (self.quick ? 1 : 5)
        // The relay's per-member rate (8 MB/s by default, a deployment's fairness cap) is lifted:
        // the throughput work measures the relay's own cost.
        // Every member here comes from 127.0.0.1, so the per-source request budget (meant for one
        // host) is lifted too.
        var configuration = RendezvousConfiguration()
        configuration.relayBytesPerSecond = 1e10
        configuration.requestsPerSecondPerSource = 1e6
        let rendezvous = try await RendezvousService.start(
            at: try SocketAddress(ipAddress: "127.0.0.1", port: 0), configuration: configuration,
            signingKey: Curve25519.Signing.PrivateKey())
        let address = "127.0.0.1:\(rendezvous.localAddress.port!)"
        var lines: [[String: Any]] = []
        lines.append(try await Self.join(rounds: rounds, rendezvous: address))
        lines.append(try await Self.firstMessage(direct: false, rounds: max(1, rounds / 3), rendezvous: address))
        lines.append(try await Self.firstMessage(direct: true, rounds: max(1, rounds / 3), rendezvous: address))
        lines.append(try await Self.throughput(seconds: seconds, rendezvous: address))
        let statistics = rendezvous.statistics
        lines[0]["rendezvous_dropped"] = statistics.droppedRateLimited + statistics.droppedMalformed + statistics.droppedUnauthenticated
        await rendezvous.stop()
        var table = "work                          p50 ms    p99 ms   other\n"
        for line in lines {
            func number(_ key: String) -> String { (line[key] as? Double).map { String(format: "%8.1f", $0) } ?? "       -" }
            let work = "\(line["work"] ?? "")\(line["path"].map { " \($0)" } ?? "")"
            let rest = line.keys.filter { !["work", "path", "p50_ms", "p99_ms"].contains($0) }.sorted().map { "\($0)=\(line[$0]!)" }.joined(separator: " ")
            table += "\(work.padding(toLength: 28, withPad: " ", startingAt: 0))\(number("p50_ms"))  \(number("p99_ms"))   \(rest)\n"
            if self.json { emitJSONLine(line) }
        }
        table += "  -> targets: join p50 ≤ 500 ms, first message ≤ 300 ms after the join, upgrade ≤ 3 s, relay ≥ 0.5× direct\n"
        (self.json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(table.utf8))
    }

    static func session(_ name: String, room: GKSession.Configuration.Online.Room, rendezvous: String, direct: Bool = false) -> GKSession {
        var configuration = GKSession.Configuration()
        configuration.online = .init(rendezvous: rendezvous, room: room, alsoNearby: false, directPaths: direct)
        return GKSession(sessionID: "bench-online", displayName: name, sessionMode: .peer, configuration: configuration)
    }

    /// Polls `condition` every millisecond for up to `seconds`.
    static func until(seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
        let end = NIODeadline.now() + .nanoseconds(Int64(seconds * 1e9))
        while NIODeadline.now() < end {
            if condition() { return true }
            try? await Task.sleep(nanoseconds: 1_000_000)
        }
        return condition()
    }

    static func milliseconds(since start: NIODeadline) -> Double { Double((NIODeadline.now() - start).nanoseconds) / 1e6 }

    static func figures(_ samples: [Double]) -> (Double?, Double?) {
        let percentiles = Percentiles(samples)
        return (percentiles.value(at: 0.5), percentiles.value(at: 0.99))
    }

    // MARK: - join

    static func join(rounds: Int, rendezvous: String) async throws -> [String: Any] {
        var samples: [Double] = []
        for round in 0..<rounds {
            let host = Self.session("host \(round)", room: .create, rendezvous: rendezvous)
            host.isAvailable = true
            let code = try await host.waitForRoomCode()
            let joiner = Self.session("joiner \(round)", room: .join(code: code), rendezvous: rendezvous)
            let start = NIODeadline.now()
            joiner.isAvailable = true
            if await Self.until({ host.peers(with: .stateAvailable).contains(joiner.peerID) }) {
                samples.append(Self.milliseconds(since: start))
            }
            await joiner.close()
            await host.close()
        }
        let (p50, p99) = Self.figures(samples)
        return ["work": "join", "p50_ms": p50 ?? NSNull(), "p99_ms": p99 ?? NSNull(), "joined": samples.count, "expected": rounds]
    }

    // MARK: - first message

    final class Inbox: @unchecked Sendable {
        let first = NIOLockedValueBox<NIODeadline?>(nil)
        let count = NIOLockedValueBox(0)
    }

    static func firstMessage(direct: Bool, rounds: Int, rendezvous: String) async throws -> [String: Any] {
        var samples: [Double] = []
        var upgrades: [Double] = []
        for round in 0..<rounds {
            let host = Self.session("host \(round)", room: .create, rendezvous: rendezvous, direct: direct)
            let inbox = Inbox()
            host.setDataReceiveHandler { _, _, _ in inbox.first.withLockedValue { $0 = $0 ?? .now() } }
            let requests = host.connectionRequests
            let accepting = Task { for await request in requests { try? host.acceptConnection(fromPeer: request.peerID) } }
            host.isAvailable = true
            let code = try await host.waitForRoomCode()
            let joiner = Self.session("joiner \(round)", room: .join(code: code), rendezvous: rendezvous, direct: direct)
            let start = NIODeadline.now()
            joiner.isAvailable = true
            if await Self.until({ joiner.peers(with: .stateAvailable).contains(host.peerID) }) {
                do {
                    try await joiner.connect(to: host.peerID, timeout: 10)
                    try joiner.send(Data("first".utf8), toPeers: [host.peerID!], with: .reliable)
                } catch {
                    FileHandle.standardError.write(Data("first-message round \(round): \(error.localizedDescription)\n".utf8))
                }
                let connected = NIODeadline.now()
                if await Self.until({ inbox.first.withLockedValue { $0 } != nil }), let at = inbox.first.withLockedValue({ $0 }) {
                    samples.append(Double((at - start).nanoseconds) / 1e6)
                }
                if direct, await Self.until({ joiner.path(forPeer: host.peerID) == .direct }) {
                    upgrades.append(Self.milliseconds(since: connected))
                }
            }
            accepting.cancel()
            await joiner.close()
            await host.close()
        }
        let (p50, p99) = Self.figures(samples)
        var line: [String: Any] = [
            "work": "first-message", "path": direct ? "direct" : "relayed", "p50_ms": p50 ?? NSNull(), "p99_ms": p99 ?? NSNull(),
            "first_message_ms": p50.map { ($0 * 10).rounded() / 10 } ?? NSNull(), "delivered": samples.count, "expected": rounds,
        ]
        if direct { line["upgrade_ms"] = Self.figures(upgrades).0.map { ($0 * 10).rounded() / 10 } ?? NSNull() }
        return line
    }

    // MARK: - relay throughput

    /// Reliable 1000-byte messages a second from one member to another, as fast as the session
    /// takes them, over the relay and over a direct path.
    static func throughput(seconds: Double, rendezvous: String) async throws -> [String: Any] {
        var rates: [Bool: Double] = [:]
        for direct in [false, true] {
            let host = Self.session("host", room: .create, rendezvous: rendezvous, direct: direct)
            let inbox = Inbox()
            host.setDataReceiveHandler { _, _, _ in inbox.count.withLockedValue { $0 += 1 } }
            let requests = host.connectionRequests
            let accepting = Task { for await request in requests { try? host.acceptConnection(fromPeer: request.peerID) } }
            host.isAvailable = true
            let code = try await host.waitForRoomCode()
            let sender = Self.session("sender", room: .join(code: code), rendezvous: rendezvous, direct: direct)
            sender.isAvailable = true
            _ = await Self.until { sender.peers(with: .stateAvailable).contains(host.peerID) }
            try? await sender.connect(to: host.peerID, timeout: 10)
            if direct { _ = await Self.until { sender.path(forPeer: host.peerID) == .direct } }
            let message = Data(repeating: 7, count: 1000)
            let start = NIODeadline.now()
            let end = start + .nanoseconds(Int64(seconds * 1e9))
            let before = inbox.count.withLockedValue { $0 }
            while NIODeadline.now() < end {
                try? await sender.write(message, toPeers: [host.peerID], with: .reliable)
            }
            let received = inbox.count.withLockedValue { $0 } - before
            rates[direct] = Double(received) / (Self.milliseconds(since: start) / 1000)
            accepting.cancel()
            await sender.close()
            await host.close()
        }
        let relayed = rates[false] ?? 0, direct = rates[true] ?? 0
        return [
            "work": "relay-throughput", "msgs_per_s": relayed.rounded(), "direct_msgs_per_s": direct.rounded(),
            "ratio_vs_direct": direct > 0 ? (relayed / direct * 100).rounded() / 100 : 0,
        ]
    }
}
