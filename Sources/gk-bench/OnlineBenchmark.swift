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
/// - `first-message` per path: from the joiner's start until the host's data handler has the
///   joiner's first message (connect, accept, send), and `after_join_ms` from the moment the
///   joiner is in the room. `relayed`: direct paths off; `direct`: on, with `upgrade_ms`, from the
///   connection until `path(forPeer:)` says `.direct`; `tcp`: UDP to the rendezvous dropped, so
///   both members reach it and its relay over TCP (after the session's 2 s fallback).
/// - `relay-throughput`: 1000-byte reliable messages for a few seconds through the relay, beside
///   the same over the direct path, and the ratio. The relay's per-member rate cap is lifted, and
///   it runs in this process, sharing its cores with both members.
/// - `punch` per NAT class: gk-session processes across the NAT topology (``OnlinePunch``).
/// - `scale`: two gk-rendezvous processes on one PostgreSQL and many rooms of room clients
///   (``OnlineScale``).
/// - `abuse`: `join` at a gk-rendezvous process with its defaults, quiet and then under attack
///   (idle TCP connections and a flood of wrong codes, ``OnlineAbuse``).
/// Every figure is measured in this run; nothing is asserted.
struct OnlineBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "online", abstract: "Online rooms: join, first message per path, upgrade to direct, relay throughput, hole punching per NAT class, scale.")

    @Flag(help: "Print one JSON line per work (the table goes to standard error).")
    var json = false

    @Flag(help: "A short run that checks the harness, not for figures.")
    var quick = false

    @Option(help: "Join rounds (default 30; 3 with --quick).")
    var rounds: Int?

    @Option(help: "Seconds of each throughput run (default 5; 1 with --quick).")
    var seconds: Double?

    @Option(help: "Rooms of the scale work (default 1000; 10 with --quick; 0 skips it).")
    var scaleRooms: Int?

    @Option(help: "Members of the scale work started a second.")
    var scaleRate: Double = 400

    @Option(help: "Hole-punching attempts per NAT class (default 5; 1 with --quick; 0 skips it).")
    var punchAttempts: Int?

    @Option(help: "Idle TCP connections of the abuse work's attacker (default 10000; 500 with --quick; 0 skips it).")
    var abuseConnections: Int?

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
        for path in [Path.relayed, .direct, .tcp] {
            lines.append(try await Self.firstMessage(path: path, rounds: max(1, rounds / 3), rendezvous: address))
        }
        lines.append(try await Self.throughput(seconds: seconds, rendezvous: address))
        let statistics = rendezvous.statistics
        lines[0]["rendezvous_dropped"] = statistics.droppedRateLimited + statistics.droppedMalformed + statistics.droppedUnauthenticated
        await rendezvous.stop()
        guard let root = ProjectLayout.root else { throw ValidationError("cannot find the project root (scripts/sandbox)") }
        let executables = URL(fileURLWithPath: ProjectLayout.executable).deletingLastPathComponent()
        let abuseConnections = self.abuseConnections ?? (self.quick ? 500 : 10_000)
        if abuseConnections > 0 {
            lines.append(try await OnlineAbuse.run(connections: abuseConnections, rounds: rounds, executables: executables))
        }
        let punchAttempts = self.punchAttempts ?? (self.quick ? 1 : 5)
        if punchAttempts > 0 {
            lines += await OnlinePunch.run(attempts: punchAttempts, root: root, executables: executables)
        }
        let scaleRooms = self.scaleRooms ?? (self.quick ? 10 : 1000)
        if scaleRooms > 0 {
            lines.append(
                try await OnlineScale.run(rooms: scaleRooms, peersPerRoom: 4, membersPerSecond: self.scaleRate, root: root, executables: executables))
        }
        var table = "work                          p50 ms    p99 ms   other\n"
        for line in lines {
            func number(_ key: String) -> String { (line[key] as? Double).map { String(format: "%8.1f", $0) } ?? "       -" }
            let work = "\(line["work"] ?? "")\((line["path"] ?? line["nat"]).map { " \($0)" } ?? "")"
            let rest = line.keys.filter { !["work", "path", "nat", "p50_ms", "p99_ms"].contains($0) }.sorted().map { "\($0)=\(line[$0]!)" }.joined(separator: " ")
            table += "\(work.padding(toLength: 28, withPad: " ", startingAt: 0))\(number("p50_ms"))  \(number("p99_ms"))   \(rest)\n"
            if self.json { emitJSONLine(line) }
        }
        table += "  -> targets: join p50 ≤ 500 ms, first message ≤ 300 ms after the join, upgrade ≤ 3 s, relay ≥ 0.5× direct;\n"
        table += "     scale: every member joined, join p99 ≤ 1 s\n"
        (self.json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(table.utf8))
    }

    static func session(
        _ name: String, room: GKSession.Configuration.Online.Room, rendezvous: String, direct: Bool = false, bindAddress: String? = nil
    ) -> GKSession {
        var configuration = GKSession.Configuration(bindAddress: bindAddress)
        configuration.online = .init(rendezvous: rendezvous, room: room, alsoNearby: false, directPaths: direct)
        return GKSession(sessionID: "bench-online", displayName: name, sessionMode: .peer, configuration: configuration)
    }

    /// Polls `condition` every millisecond for up to `seconds`.
    static func until(seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
        await waitUntil(seconds: seconds, every: .milliseconds(1), condition)
    }

    static func milliseconds(since start: NIODeadline) -> Double { Double((NIODeadline.now() - start).nanoseconds) / 1e6 }

    static func figures(_ samples: [Double]) -> (Double?, Double?) {
        let percentiles = Percentiles(samples)
        return (percentiles.value(at: 0.5), percentiles.value(at: 0.99))
    }

    // MARK: - join

    static func join(rounds: Int, rendezvous: String) async throws -> [String: Any] {
        let samples = try await Self.joinTimes(rounds: rounds, rendezvous: rendezvous)
        let (p50, p99) = Self.figures(samples)
        return ["work": "join", "p50_ms": p50 ?? NSNull(), "p99_ms": p99 ?? NSNull(), "joined": samples.count, "expected": rounds]
    }

    /// The join time of each round that joined, in milliseconds.
    /// With `ownAddresses`, each member binds a loopback address of its own (127.4.x.y for hosts,
    /// 127.5.x.y for joiners), as members on different hosts would be; otherwise all come from
    /// 127.0.0.1. A round whose host gets no room (`throwing` false) counts as not joined.
    static func joinTimes(rounds: Int, rendezvous: String, first: Int = 0, ownAddresses: Bool = false, throwing: Bool = true) async throws -> [Double] {
        var samples: [Double] = []
        for round in first..<(first + rounds) {
            func address(_ net: Int) -> String? { ownAddresses ? "127.\(net).\(round / 250 % 250).\(round % 250 + 1)" : nil }
            let host = Self.session("host \(round)", room: .create, rendezvous: rendezvous, bindAddress: address(4))
            host.isAvailable = true
            let code: String
            do {
                code = try await host.waitForRoomCode()
            } catch {
                await host.close()
                if throwing { throw error }
                continue
            }
            let joiner = Self.session("joiner \(round)", room: .join(code: code), rendezvous: rendezvous, bindAddress: address(5))
            let start = NIODeadline.now()
            joiner.isAvailable = true
            if await Self.until({ host.peers(with: .stateAvailable).contains(joiner.peerID) }) {
                samples.append(Self.milliseconds(since: start))
            }
            await joiner.close()
            await host.close()
        }
        return samples
    }

    // MARK: - first message

    final class Inbox: @unchecked Sendable {
        let first = NIOLockedValueBox<NIODeadline?>(nil)
        let count = NIOLockedValueBox(0)
    }

    /// How the first-message work's members reach each other.
    enum Path: String {
        /// Through the relay, direct paths off.
        case relayed
        /// Through the relay first, then a direct path.
        case direct
        /// Through the relay over TCP: UDP to the rendezvous is dropped (an iptables rule in
        /// this sandbox), so both members fall back to streams; direct paths off.
        case tcp
    }

    static func firstMessage(path: Path, rounds: Int, rendezvous: String) async throws -> [String: Any] {
        var samples: [Double] = []
        var afterJoin: [Double] = []
        var upgrades: [Double] = []
        let port = rendezvous.split(separator: ":").last.map(String.init) ?? ""
        let rule = ["INPUT", "-p", "udp", "--dport", port, "-j", "DROP"]
        if path == .tcp, !Self.iptables(["-I"] + rule) { return ["work": "first-message", "path": path.rawValue, "error": "iptables failed"] }
        defer { if path == .tcp { _ = Self.iptables(["-D"] + rule) } }
        let direct = path == .direct
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
            _ = try? await joiner.waitForRoomCode()
            let joined = NIODeadline.now()
            if await Self.until({ joiner.peers(with: .stateAvailable).contains(host.peerID) }) {
                let attempt = NIODeadline.now()
                do {
                    try await joiner.connect(to: host.peerID, timeout: 10)
                    try joiner.send(Data("first".utf8), toPeers: [host.peerID!], with: .reliable)
                } catch {
                    // What each side's transport saw, for a failure that is rare.
                    func figures(_ session: GKSession) -> String {
                        guard let s = session.transportStatistics else { return "-" }
                        return "sent \(s.datagramsSent) received \(s.datagramsReceived) requests \(s.connectionRequestsReceived) opened \(s.linksOpened) unroutable \(s.droppedUnroutable) unknown-link \(s.droppedUnknownLink) stray-handshake \(s.droppedStrayHandshake) overload \(s.droppedOverload)"
                    }
                    FileHandle.standardError.write(Data("""
                        first-message \(path) round \(round): \(error.localizedDescription) after \(Int(Self.milliseconds(since: attempt))) ms
                          joiner: \(figures(joiner))
                          host: \(figures(host))

                        """.utf8))
                }
                let connected = NIODeadline.now()
                if await Self.until({ inbox.first.withLockedValue { $0 } != nil }), let at = inbox.first.withLockedValue({ $0 }) {
                    samples.append(Double((at - start).nanoseconds) / 1e6)
                    afterJoin.append(Double((at - joined).nanoseconds) / 1e6)
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
            "work": "first-message", "path": path.rawValue, "p50_ms": p50 ?? NSNull(), "p99_ms": p99 ?? NSNull(),
            "first_message_ms": p50.map { ($0 * 10).rounded() / 10 } ?? NSNull(),
            "after_join_ms": Self.figures(afterJoin).0.map { ($0 * 10).rounded() / 10 } ?? NSNull(), "delivered": samples.count,
            "expected": rounds,
        ]
        if direct { line["upgrade_ms"] = Self.figures(upgrades).0.map { ($0 * 10).rounded() / 10 } ?? NSNull() }
        return line
    }

    /// Runs iptables (or `tool`: ip6tables) in this sandbox's namespace; whether it succeeded.
    static func iptables(_ arguments: [String], tool: String = "iptables") -> Bool {
        let process = ChildProcess("/usr/bin/env", [tool, "-w"] + arguments, name: tool)
        guard (try? process.start()) != nil, process.waitForExit(timeout: 10) else { return false }
        return process.exitStatus == 0
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
            do {
                try await sender.connect(to: host.peerID, timeout: 10)
            } catch {
                FileHandle.standardError.write(Data("relay-throughput (\(direct ? "direct" : "relayed")): \(error.localizedDescription)\n".utf8))
            }
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
