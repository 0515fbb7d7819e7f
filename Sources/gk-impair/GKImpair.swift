import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import NetworkImpairment

/// `gk-impair`: a UDP relay that makes the path between two programs as bad as asked.
///
/// This machine's kernel has no `netem`, so benchmarks and demos that run two real processes
/// put this relay between them instead. It prints `listening HOST PORT` once bound (scripts
/// wait for that line), relays until SIGINT, SIGTERM or `--duration`, then prints one JSON
/// line of statistics per direction and exits 0.
@main
struct GKImpair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-impair",
        abstract: "Relay UDP between clients and a target through a seeded model of a bad network.",
        discussion: """
            Clients send to --listen; each client gets its own upstream socket toward --target, \
            and replies come back the same way. Both directions use the same impairments unless \
            --backward-perfect or --back-* options say otherwise. Only runs inside scripts/sandbox.

            Output: one line 'listening HOST PORT' once bound, then, at the end, one JSON line \
            {"forward":{...},"backward":{...}} with the counters submitted, dropped, duplicated, \
            corrupted, reordered, delivered and sendFailures.
            """
    )

    // MARK: - Options

    @Option(help: "Address to receive client datagrams on, HOST:PORT or [IPV6]:PORT (port 0: any free port).")
    var listen: String

    @Option(help: "Address to relay client datagrams to, HOST:PORT or [IPV6]:PORT.")
    var target: String

    @OptionGroup(title: "Impairments (client → target, and target → client unless overridden)")
    var forward: ProfileOptions

    @OptionGroup(title: "Target → client overrides")
    var backward: BackwardProfileOptions

    @Option(help: "Seed of every random decision; the same seed replays the same impairments.")
    var seed: UInt64 = 1

    @Option(help: "Stop after this many seconds (default: run until SIGINT or SIGTERM).")
    var duration: Double?

    // MARK: - Validation

    /// Everything the run needs, checked before any socket is opened.
    struct Plan {
        var listen: SocketAddress
        var target: SocketAddress
        var forward: ImpairmentProfile
        var backward: ImpairmentProfile
    }

    func plan() throws -> Plan {
        if let duration = self.duration, !(duration.isFinite && duration > 0) {
            throw ValidationError("--duration must be a positive number of seconds")
        }
        let forward = try self.forward.overrides.applied(to: .perfect)
        let backwardBase = self.backward.perfect ? ImpairmentProfile.perfect : forward
        return Plan(
            listen: try EndpointArgument.parse(self.listen, option: "--listen", allowPortZero: true),
            target: try EndpointArgument.parse(self.target, option: "--target", allowPortZero: false),
            forward: forward,
            backward: try self.backward.overrides.applied(to: backwardBase)
        )
    }

    func validate() throws {
        _ = try self.plan()
    }

    // MARK: - Running

    func run() async throws {
        let plan = try self.plan()
        try NetworkSandbox.requireIsolation()
        let stopTrigger = StopTrigger(seconds: self.duration)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let relay = try await UDPImpairmentRelay.start(
                listen: plan.listen,
                target: plan.target,
                forward: plan.forward,
                backward: plan.backward,
                seed: self.seed,
                group: group
            )
            let bound = relay.localAddress
            Self.printLine("listening \(bound.ipAddress ?? "?") \(bound.port ?? 0)")
            await stopTrigger.wait()
            try await relay.stop()
            let statistics = await relay.statistics()
            Self.printLine(try Self.json(forward: statistics.forward, backward: statistics.backward))
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    // MARK: - Output

    /// Writes one line to standard output immediately (no buffering), so that a script
    /// reading the pipe sees it at once.
    static func printLine(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// `{"forward":{...},"backward":{...}}` with sorted, stable field names.
    static func json(forward: ImpairmentStatistics, backward: ImpairmentStatistics) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let forward = String(decoding: try encoder.encode(forward), as: UTF8.self)
        let backward = String(decoding: try encoder.encode(backward), as: UTF8.self)
        return #"{"forward":\#(forward),"backward":\#(backward)}"#
    }
}
