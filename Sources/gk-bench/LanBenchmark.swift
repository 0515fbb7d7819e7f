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

/// `gk-bench lan`: how truthfully a session's list of available peers follows peers that vanish
/// or leave, and what watching them costs (PROTOCOL §6.6, §14.7, §14.8).
///
/// In the sandbox's one namespace, a watcher `GKSession` (in this process) sees N other sessions
/// (`gk-session` processes, not connected to it). For each N:
/// - `probe_packets_per_s`: the watcher's liveness probes per second per visible peer, over a
///   window with all N visible;
/// - `sigkill`: one of them is killed with SIGKILL (no goodbye); `gone_ms` is the time from the
///   kill to the watcher's delegate hearing `.stateUnavailable` for it;
/// - `sigterm`, `sighup`: the same with SIGTERM and SIGHUP, which gk-session answers with a
///   goodbye; `goodbye_ms`.
/// Each round's victim is replaced by a fresh process; the next round starts 2 s after the
/// watcher sees it (measuring a steady LAN, not one in the middle of a newcomer's start-up).
struct LanBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lan", abstract: "How fast killed and departing peers leave a watcher's list, and what liveness probing costs.")

    /// Printed beside the figures; not asserted.
    static let goneTargetMilliseconds = 5_000.0
    static let goodbyeTargetMilliseconds = 100.0
    static let probeTarget = 1.0

    @Flag(help: "Print one JSON line per work and size (the table goes to standard error).")
    var json = false

    @Flag(help: "A short run that checks the harness, not for figures.")
    var quick = false

    @Option(help: "Numbers of other sessions, comma separated (default 1,8,32; 1,3 with --quick).")
    var sizes: String?

    @Option(help: "Rounds per signal and size (default 10; 2 with --quick).")
    var rounds: Int?

    @Option(help: "Seconds over which probing is counted (default 10; 3 with --quick).")
    var probeSeconds: Double?

    @Option(help: "Seconds to wait for the watcher to see a change before a round counts as failed.")
    var roundTimeout: Double = 15

    enum Way: String, CaseIterable {
        case sigkill, sigterm, sighup

        var signal: Int32 {
            switch self {
            case .sigkill: SIGKILL
            case .sigterm: SIGTERM
            case .sighup: SIGHUP
            }
        }

        /// The field name of the figure: a kill leaves no goodbye.
        var field: String { self == .sigkill ? "gone_ms" : "goodbye_ms" }
        var target: Double { self == .sigkill ? LanBenchmark.goneTargetMilliseconds : LanBenchmark.goodbyeTargetMilliseconds }
    }

    func validate() throws {
        let sizes = try self.sizeList()
        guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 && $0 <= 64 }) else { throw ValidationError("--sizes: numbers from 1 to 64") }
        guard (self.rounds ?? 1) > 0 else { throw ValidationError("--rounds must be positive") }
    }

    func sizeList() throws -> [Int] {
        let text = self.sizes ?? (self.quick ? "1,3" : "1,8,32")
        return try text.split(separator: ",").map { part in
            guard let value = Int(part.trimmingCharacters(in: .whitespaces)) else { throw ValidationError("--sizes: \(part) is not a number") }
            return value
        }
    }

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        let program = URL(fileURLWithPath: ProjectLayout.executable).deletingLastPathComponent().appendingPathComponent("gk-session").path
        guard FileManager.default.isExecutableFile(atPath: program) else {
            throw ValidationError("gk-session is not built beside gk-bench (\(program)); scripts/bench builds it")
        }
        let rounds = self.rounds ?? (self.quick ? 2 : 10)
        let window = self.probeSeconds ?? (self.quick ? 3 : 10)
        var lines: [[String: Any]] = []
        for size in try self.sizeList() {
            lines += try await LanRun(program: program, size: size, roundTimeout: self.roundTimeout).measure(rounds: rounds, probeWindow: window)
        }
        var table = "work      peers  p50 ms     max ms     failed  probes/s/peer  target\n"
        for line in lines {
            let way = Way(rawValue: line["work"] as? String ?? "") ?? .sigkill
            func number(_ key: String) -> String { (line[key] as? Double).map { String(format: "%9.1f", $0) } ?? "        -" }
            let met = (line["\(way.field)_max"] as? Double).map { $0 <= way.target ? "met" : "missed" } ?? "n/a"
            table += "\(way.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0))  \(String(format: "%5d", line["peers"] as? Int ?? 0))  "
                + "\(number("\(way.field)_p50"))  \(number("\(way.field)_max"))  \(String(format: "%6d", line["failed"] as? Int ?? 0))  "
                + "\(String(format: "%13.2f", line["probe_packets_per_s"] as? Double ?? .nan))  ≤ \(Int(way.target)) ms max: \(met)\n"
            if self.json { emitJSONLine(line) }
        }
        table += "  -> probing target ≤ \(Self.probeTarget) packet/s per visible peer: "
            + (lines.allSatisfy { ($0["probe_packets_per_s"] as? Double ?? .infinity) <= Self.probeTarget } ? "met" : "missed") + "\n"
        (self.json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(table.utf8))
    }
}

/// One size: the watcher and its N peers.
private final class LanRun: @unchecked Sendable {
    let program: String
    let size: Int
    let roundTimeout: Double
    let sessionID = "lan-\(UInt32.random(in: 0...UInt32.max))"
    /// Seconds between a replacement being seen and the next round.
    static let settle = 2.0
    private var peers: [(process: ChildProcess, peerID: String)] = []
    private var spawned = 0

    init(program: String, size: Int, roundTimeout: Double) {
        (self.program, self.size, self.roundTimeout) = (program, size, roundTimeout)
    }

    func measure(rounds: Int, probeWindow: Double) async throws -> [[String: Any]] {
        let watcher: GKSession = GKSession(sessionID: self.sessionID, displayName: "Watcher", sessionMode: .peer)
        let log = LanWatcherLog(watcher)
        watcher.isAvailable = true
        defer { for peer in self.peers { peer.process.terminate() } }
        for _ in 0..<self.size { self.peers.append(try self.spawn()) }
        let all = Set(self.peers.map(\.peerID))
        guard await log.wait(seconds: 60, until: { all.isSubset(of: Set(watcher.peers(with: .stateAvailable) ?? [])) }) else {
            throw ValidationError("the watcher did not see all \(self.size) sessions within 60 s")
        }

        // Probing with all N visible (after one interval, so that every watch has started).
        try await Task.sleep(nanoseconds: UInt64(max(1, Double(self.size) / 50) * 1e9))
        let before = watcher.transportStatistics?.livenessProbesSent ?? 0
        let start = NIODeadline.now()
        try await Task.sleep(nanoseconds: UInt64(probeWindow * 1e9))
        let sent = (watcher.transportStatistics?.livenessProbesSent ?? 0) - before
        let elapsed = Double((NIODeadline.now() - start).nanoseconds) / 1e9
        let visible = watcher.peers(with: .stateAvailable)?.count ?? 0
        let perPeer = visible > 0 ? Double(sent) / elapsed / Double(visible) : Double.nan

        var lines: [[String: Any]] = []
        for way in LanBenchmark.Way.allCases {
            var samples: [Double] = []
            var failed = 0
            for round in 0..<rounds {
                let index = round % self.peers.count
                let victim = self.peers[index]
                let killedAt = NIODeadline.now()
                victim.process.send(way.signal)
                if let gone = await log.unavailable(victim.peerID, after: killedAt, seconds: self.roundTimeout) {
                    samples.append(Double((gone - killedAt).nanoseconds) / 1e6)
                } else {
                    failed += 1
                }
                victim.process.terminate()
                let fresh = try self.spawn()
                self.peers[index] = fresh
                if !(await log.wait(seconds: 30, until: { watcher.peers(with: .stateAvailable)?.contains(fresh.peerID) == true })) {
                    failed += 1
                }
                // Let the newcomer's start-up settle (its probes and announcements, every other
                // session's first probes of it) before the next signal.
                try await Task.sleep(nanoseconds: UInt64(LanRun.settle * 1e9))
            }
            let percentiles = Percentiles(samples)
            var line: [String: Any] = [
                "work": way.rawValue, "peers": self.size, "rounds": rounds, "failed": failed,
                "probe_packets_per_s": (perPeer * 100).rounded() / 100, "probe_window_s": elapsed, "target_ms": way.target,
            ]
            line["\(way.field)_p50"] = percentiles.value(at: 0.5).map { ($0 * 10).rounded() / 10 } ?? NSNull()
            line["\(way.field)_max"] = samples.max().map { ($0 * 10).rounded() / 10 } ?? NSNull()
            lines.append(line)
        }
        await watcher.close()
        return lines
    }

    /// Starts one gk-session and returns it with its peer ID.
    private func spawn() throws -> (process: ChildProcess, peerID: String) {
        self.spawned += 1
        let process = ChildProcess(
            self.program, ["--session-id", self.sessionID, "--name", "Peer \(self.spawned)", "--answer", "none", "--seconds", "900"],
            name: "peer \(self.spawned)", input: true)
        try process.start()
        guard let started = process.waitForObject(timeout: 30, where: { $0["event"] as? String == "started" }), let peerID = started["peer"] as? String else {
            process.terminate()
            throw ValidationError("gk-session did not start")
        }
        return (process, peerID)
    }
}

/// When the watcher's delegate heard each peer become unavailable.
private final class LanWatcherLog: GKSessionDelegate, @unchecked Sendable {
    private let unavailableAt = NIOLockedValueBox<[String: [NIODeadline]]>([:])
    private let queue = DispatchQueue(label: "lan watcher")

    init(_ session: GKSession) {
        session.delegateQueue = self.queue
        session.delegate = self
    }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        guard state == .stateUnavailable else { return }
        let now = NIODeadline.now()
        self.unavailableAt.withLockedValue { $0[peerID, default: []].append(now) }
    }

    /// When `peerID` was first reported unavailable after `time`; nil if not within `seconds`.
    func unavailable(_ peerID: String, after time: NIODeadline, seconds: Double) async -> NIODeadline? {
        var found: NIODeadline?
        _ = await self.wait(seconds: seconds) {
            found = self.unavailableAt.withLockedValue { $0[peerID]?.first { $0 >= time } }
            return found != nil
        }
        return found
    }

    /// Polls `condition` every millisecond for at most `seconds`.
    func wait(seconds: Double, until condition: () -> Bool) async -> Bool {
        await waitUntil(seconds: seconds, every: .milliseconds(1), condition)
    }
}
