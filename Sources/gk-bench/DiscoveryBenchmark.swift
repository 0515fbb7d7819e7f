import ArgumentParser
import Foundation
import NetworkImpairment

/// `gk-bench discovery`: how long a service takes to appear at a browser and to disappear from
/// it, for our discovery module (through `gk-mdns`) and python-zeroconf, in the four
/// registrar->browser combinations. Each pair runs in a fresh network namespace of its own
/// (`discovery-pair` under scripts/sandbox), with a service type of its own; see
/// `DiscoveryPairRunner` for what is timed.
struct DiscoveryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "discovery", abstract: "Service discovery latency (appear, disappear) against python-zeroconf.")

    /// Targets printed beside the figures (medians, opengamekit->opengamekit); not asserted.
    static let appearTargetMilliseconds = 900.0
    static let disappearTargetMilliseconds = 50.0

    @Flag(help: "Print one JSON line per pair and one with the ratios (the table goes to standard error).")
    var json = false

    @Flag(help: "Two rounds per pair (unless --rounds says otherwise): checks the harness quickly, not for figures.")
    var quick = false

    @Option(help: "Rounds (register, found, withdraw, lost) per pair; default 10, at least 5 without --quick.")
    var rounds: Int?

    @Option(help: "Only these pairs (comma-separated, e.g. zeroconf->opengamekit).")
    var only: String?

    @Option(help: "Seconds to wait for a found or a lost event before a round counts as failed.")
    var roundTimeout: Double = 10

    @Option(help: "The repo root (holding scripts/sandbox, .venv and Tests/Peers); default: found from this executable, else the current directory.")
    var repoRoot: String?

    var roundCount: Int { self.rounds ?? (self.quick ? 2 : 10) }

    func validate() throws {
        guard self.roundCount > 0 else { throw ValidationError("--rounds must be positive") }
        guard self.quick || self.roundCount >= 5 else { throw ValidationError("a run for figures needs at least 5 rounds; add --quick for fewer") }
        if let only = self.only {
            for name in only.split(separator: ",") { _ = try DiscoveryPair(String(name)) }
        }
    }

    func run() throws {
        try NetworkSandbox.requireIsolation()
        guard let root = self.repoRoot.map({ URL(fileURLWithPath: $0) }) ?? ProjectLayout.root else {
            throw ValidationError("cannot find the repo root (scripts/sandbox); pass --repo-root")
        }
        // Fails early, with the fix in the message, if gk-mdns or the venv is missing.
        _ = try DiscoveryPeer.Programs(repoRoot: root.path)
        let sandbox = root.appendingPathComponent("scripts/sandbox").path
        let selected = self.only.map { Set($0.split(separator: ",").map(String.init)) }
        var table = DiscoveryReportTable()
        var results: [String: [String: Any]] = [:]
        for (index, pair) in DiscoveryPair.all.enumerated() where selected?.contains(pair.description) ?? true {
            let arguments = [
                "--", ProjectLayout.executable, "discovery-pair", "--impl", pair.description, "--rounds", "\(self.roundCount)",
                "--type", "_bench\(index + 1)._udp", "--round-timeout", "\(self.roundTimeout)", "--repo-root", root.path,
            ]
            let child = ChildProcess(sandbox, arguments, name: pair.description)
            try child.start()
            // Each round waits at most three round timeouts plus 30 s of start and exit.
            if !child.waitForExit(timeout: Double(self.roundCount) * (3 * self.roundTimeout + 30) + 60) { child.terminate() }
            var line = child.lastJSONObject ?? ["errors": ["the pair produced no result"], "failed": self.roundCount]
            line["work"] = "discovery"
            line["impl"] = pair.description
            line["rounds"] = line["rounds"] ?? self.roundCount
            for key in Self.fields where line[key] == nil { line[key] = NSNull() }
            results[pair.description] = line
            table.add(line)
            if self.json { emitJSONLine(line) }
        }
        let ratios = Self.ratios(results)
        table.addRatios(ratios)
        if self.json { emitJSONLine(ratios) }
        let rendered = table.render()
        (self.json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(rendered.utf8))
    }

    /// The fields every pair's line has (null when not measured).
    static let fields = [
        "appear_ms_p50", "appear_ms_p90", "appear_after_registering_ms_p50", "appear_after_registering_ms_p90",
        "disappear_ms_p50", "disappear_ms_p90", "failed",
    ]

    /// Ours (opengamekit->opengamekit) over python-zeroconf's (zeroconf->zeroconf), medians
    /// (lower is better), and the targets.
    static func ratios(_ results: [String: [String: Any]]) -> [String: Any] {
        func value(_ impl: String, _ key: String) -> Double? { results[impl]?[key] as? Double }
        func ratio(_ key: String) -> Any {
            guard let ours = value("opengamekit->opengamekit", key), let theirs = value("zeroconf->zeroconf", key), theirs > 0 else { return NSNull() }
            return (ours / theirs * 1000).rounded() / 1000
        }
        func met(_ key: String, _ target: Double) -> Any {
            value("opengamekit->opengamekit", key).map { $0 <= target } ?? NSNull()
        }
        return [
            "work": "discovery", "kind": "latency",
            "appear_ratio_vs_zeroconf": ratio("appear_ms_p50"),
            "appear_after_registering_ratio_vs_zeroconf": ratio("appear_after_registering_ms_p50"),
            "disappear_ratio_vs_zeroconf": ratio("disappear_ms_p50"),
            "appear_target_ms": Self.appearTargetMilliseconds, "appear_target_met": met("appear_ms_p50", Self.appearTargetMilliseconds),
            "disappear_target_ms": Self.disappearTargetMilliseconds,
            "disappear_target_met": met("disappear_ms_p50", Self.disappearTargetMilliseconds),
        ]
    }
}

/// The human-readable table of `gk-bench discovery`.
struct DiscoveryReportTable {
    private var rows: [[String]] = [
        ["impl", "rounds", "appear p50 ms", "appear p90 ms", "reg→found p50 ms", "disappear p50 ms", "disappear p90 ms", "failed"],
    ]
    private var notes: [String] = []

    mutating func add(_ line: [String: Any]) {
        func number(_ key: String) -> String {
            guard let value = line[key] as? Double else { return "-" }
            return String(format: "%.1f", value)
        }
        self.rows.append([
            line["impl"] as? String ?? "", "\(line["rounds"] ?? "-")",
            number("appear_ms_p50"), number("appear_ms_p90"), number("appear_after_registering_ms_p50"),
            number("disappear_ms_p50"), number("disappear_ms_p90"), "\(line["failed"] ?? "-")",
        ])
        for error in line["errors"] as? [String] ?? [] {
            self.notes.append("  ! \(line["impl"] as? String ?? ""): \(error)")
        }
    }

    mutating func addRatios(_ line: [String: Any]) {
        func ratio(_ key: String) -> String { (line[key] as? Double).map { String(format: "%.3f", $0) } ?? "n/a" }
        func met(_ key: String) -> String { (line[key] as? Bool).map { $0 ? "met" : "missed" } ?? "n/a" }
        self.notes.append(
            "  -> appear_ratio_vs_zeroconf=\(ratio("appear_ratio_vs_zeroconf"))"
                + "  appear_after_registering_ratio_vs_zeroconf=\(ratio("appear_after_registering_ratio_vs_zeroconf"))"
                + "  disappear_ratio_vs_zeroconf=\(ratio("disappear_ratio_vs_zeroconf"))"
        )
        self.notes.append(
            "  -> targets (opengamekit->opengamekit medians): appear ≤ \(Int(DiscoveryBenchmark.appearTargetMilliseconds)) ms \(met("appear_target_met")),"
                + " disappear ≤ \(Int(DiscoveryBenchmark.disappearTargetMilliseconds)) ms \(met("disappear_target_met"))"
        )
    }

    func render() -> String {
        let widths = (0..<self.rows[0].count).map { column in self.rows.map { $0[column].count }.max() ?? 0 }
        let table = self.rows.map { row in
            row.enumerated().map { index, cell in
                index == 0 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: max(0, widths[index] - cell.count)) + cell
            }.joined(separator: "  ")
        }
        return (table + self.notes).joined(separator: "\n") + "\n"
    }
}

func emitJSONLine(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}
