import ArgumentParser
import Foundation
import NetworkImpairment

/// `gk-bench transport`: the transport against ENet, the kernel's TCP and the kernel's UDP, each
/// pair in a fresh network namespace of its own (so that the loss item's kernel drop applies to
/// that pair only), the same work for every implementation. ENet busy-polls; the kernel anchors
/// block like plain programs, and `udp-epoll` waits in epoll_wait like an event loop.
struct TransportBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "transport", abstract: "Transport throughput and latency against ENet, TCP and UDP.")

    struct WorkItem {
        var name: String
        var work: String
        var count: Int
        var size: Int
        var loss: Double
        var implementations: [String]
        /// gk-impair's options: the pair talks through that relay (same seed for everyone).
        var relay: String? = nil
        /// A run of this many seconds: what arrived in that time counts, not the whole count.
        var seconds: Double? = nil

        var isPingPong: Bool { self.work.hasPrefix("pingpong") }
        /// Unreliable work may lose messages (a starved receiver's socket buffer overflows):
        /// its latencies count what arrived.
        var isUnreliable: Bool { self.work.hasSuffix("unreliable") }
    }

    static let workItems = [
        WorkItem(name: "reliable-1000", work: "stream", count: 200_000, size: 1000, loss: 0, implementations: ["opengamekit", "enet", "tcp"]),
        WorkItem(name: "reliable-64k", work: "stream", count: 2_000, size: 65_536, loss: 0, implementations: ["opengamekit", "enet", "tcp"]),
        WorkItem(name: "pingpong-reliable-1000", work: "pingpong-reliable", count: 10_000, size: 1000, loss: 0, implementations: ["opengamekit", "enet", "tcp", "udp", "udp-epoll"]),
        WorkItem(name: "pingpong-unreliable-64", work: "pingpong-unreliable", count: 10_000, size: 64, loss: 0, implementations: ["opengamekit", "enet", "udp", "udp-epoll"]),
        WorkItem(name: "reliable-1000-loss5", work: "stream", count: 200_000, size: 1000, loss: 0.05, implementations: ["opengamekit", "enet", "tcp"]),
        // Paths that look like a real network, through the impairment relay (both directions,
        // seed 1): what each delivers of a million 500-byte messages in 15 s.
        WorkItem(name: "reliable-500-relay", work: "stream", count: 1_000_000, size: 500, loss: 0, implementations: ["opengamekit", "enet"],
                 relay: "--loss 0", seconds: 15),
        WorkItem(name: "reliable-500-delay5", work: "stream", count: 1_000_000, size: 500, loss: 0, implementations: ["opengamekit", "enet"],
                 relay: "--delay-ms 5", seconds: 15),
        WorkItem(name: "reliable-500-delay5-loss5", work: "stream", count: 1_000_000, size: 500, loss: 0, implementations: ["opengamekit", "enet"],
                 relay: "--delay-ms 5 --loss 0.05", seconds: 15),
        WorkItem(name: "reliable-500-jitter2", work: "stream", count: 1_000_000, size: 500, loss: 0, implementations: ["opengamekit", "enet"],
                 relay: "--delay-ms 3 --jitter-ms 4", seconds: 15),
        WorkItem(name: "reliable-500-delay20-loss2", work: "stream", count: 1_000_000, size: 500, loss: 0, implementations: ["opengamekit", "enet"],
                 relay: "--delay-ms 20 --loss 0.02", seconds: 15),
    ]

    @Flag(help: "Print one JSON line per work item and implementation, and one with the ratios per work item (the table goes to standard error).")
    var json = false

    @Flag(help: "A twentieth of the work: checks the harness quickly, not for figures.")
    var quick = false

    @Option(help: "Only these work items (comma-separated; `allocations` and `fairness`, run after the others, are items too).")
    var only: String?

    @Option(help: "Seconds allowed for one pair.")
    var timeout: Double = 180

    func run() throws {
        try NetworkSandbox.requireIsolation()
        guard let root = ProjectLayout.root else { throw ValidationError("cannot find the project root (scripts/sandbox)") }
        let sandbox = root.appendingPathComponent("scripts/sandbox").path
        let selected = self.only.map { Set($0.split(separator: ",").map(String.init)) }
        var table = ReportTable()
        for item in Self.workItems where selected?.contains(item.name) ?? true {
            var results: [String: [String: Any]] = [:]
            for implementation in item.implementations {
                let count = self.quick ? max(item.count / 20, 10) : item.count
                var arguments = item.loss > 0 ? ["--loss", "\(item.loss)", "--"] : ["--"]
                let timeout = item.seconds.map { self.quick ? $0 / 5 : $0 } ?? self.timeout
                arguments += [
                    ProjectLayout.executable, "transport-pair", "--impl", implementation, "--work", item.work,
                    "--count", "\(count)", "--size", "\(item.size)", "--timeout", "\(Int(timeout))",
                ]
                if let relay = item.relay { arguments.append("--relay=\(relay)") }
                let pair = ChildProcess(sandbox, arguments, name: implementation)
                try pair.start()
                if !pair.waitForExit(timeout: timeout + 30) { pair.terminate() }
                var line = pair.lastJSONObject ?? ["error": "no result", "delivered": 0, "expected": count]
                line["work"] = item.name
                line["impl"] = implementation
                line["expected"] = line["expected"] ?? count
                if item.seconds != nil { Self.countArrivals(&line, seconds: timeout, size: item.size) }
                for key in ["msgs_per_s", "mb_per_s", "p50_us", "p99_us"] where line[key] == nil {
                    line[key] = NSNull()
                }
                results[implementation] = line
                table.add(line)
                if self.json { Self.emit(Self.project(line)) }
            }
            let ratios = Self.ratios(item: item, results: results)
            table.addRatios(ratios)
            if self.json { Self.emit(ratios) }
        }
        var rendered = table.render()
        if selected?.contains("allocations") ?? true {
            let line = Self.countAllocations(sandbox: sandbox, bursts: self.quick ? 3 : 10)
            if self.json { Self.emit(line) }
            let perMessage = line["allocations_per_message"] as? [String: Any] ?? [:]
            func figure(_ key: String) -> String { (perMessage[key] as? Double).map { String(format: "%.1f", $0) } ?? "-" }
            rendered += "allocations per 1000-byte message, both sides: reliable \(figure("reliable")), unreliable \(figure("unreliable"))\n"
        }
        if selected?.contains("fairness") ?? true {
            // Through a real bottleneck, in the same run as the rows above (issue "Trust on the
            // internet": fairness must not be bought with the random-loss rows, nor these with it).
            let child = ChildProcess(sandbox, ["--", ProjectLayout.executable, "fairness", "--json"] + (self.quick ? ["--quick"] : []), name: "fairness")
            if (try? child.start()) != nil {
                if !child.waitForExit(timeout: 1200) { child.terminate() }
                for line in child.lines.compactMap({ try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }) {
                    if self.json { Self.emit(line) }
                    rendered += FairnessBenchmark.describe(line) + "\n"
                }
            }
        }
        if self.json {
            FileHandle.standardError.write(Data(rendered.utf8))
        } else {
            FileHandle.standardOutput.write(Data(rendered.utf8))
        }
    }

    /// `transport-allocations` in a namespace of its own, with the malloc interposer preloaded
    /// (into gk-bench only: `env` sets it for the program it runs).
    static func countAllocations(sandbox: String, bursts: Int) -> [String: Any] {
        let child = ChildProcess(
            sandbox,
            ["--", "/usr/bin/env", "LD_PRELOAD=\(TransportAllocations.interposerPath)", ProjectLayout.executable, "transport-allocations", "--bursts", "\(bursts)"],
            name: "allocations")
        guard (try? child.start()) != nil else { return ["work": "allocations", "error": "could not start"] }
        if !child.waitForExit(timeout: 120) { child.terminate() }
        return child.lastJSONObject ?? ["work": "allocations", "error": "no result"]
    }

    /// A timed run: what the server received counts (the client hears the total only when all
    /// arrived), at the rate over the run's length unless everything arrived sooner.
    static func countArrivals(_ line: inout [String: Any], seconds: Double, size: Int) {
        let expected = line["expected"] as? Int ?? 0
        let received = line["server_delivered"] as? Int ?? line["delivered"] as? Int ?? 0
        guard received < expected || (line["delivered"] as? Int ?? 0) < expected else { return }
        line["delivered"] = received
        line["msgs_per_s"] = Double(received) / seconds
        line["mb_per_s"] = Double(received * size) / seconds / 1e6
        line["timed_out"] = true
    }

    /// The named fields of an implementation's line.
    static func project(_ line: [String: Any]) -> [String: Any] {
        var projected: [String: Any] = [:]
        for key in ["work", "impl", "msgs_per_s", "mb_per_s", "p50_us", "p99_us", "delivered", "expected"] {
            projected[key] = line[key] ?? NSNull()
        }
        if let error = line["error"] { projected["error"] = error }
        // Which cipher our link used, and what sealed it (swift-crypto, or OpenSSL with the trait).
        if let link = line["link"] as? [String: Any] {
            for key in ["cipher", "cipher_backend"] { projected[key] = link[key] }
        }
        return projected
    }

    /// Throughput ratios for streams; latency ratios (lower is better) for ping-pongs.
    static func ratios(item: WorkItem, results: [String: [String: Any]]) -> [String: Any] {
        func value(_ impl: String, _ key: String) -> Double? {
            guard let result = results[impl], let delivered = result["delivered"] as? Int, let expected = result["expected"] as? Int,
                delivered == expected || ((item.isUnreliable || item.seconds != nil) && delivered > 0)
            else { return nil }
            return result[key] as? Double
        }
        func ratio(_ numerator: Double?, _ denominator: Double?) -> Any {
            guard let numerator, let denominator, denominator > 0 else { return NSNull() }
            return (numerator / denominator * 1000).rounded() / 1000
        }
        var line: [String: Any] = ["work": item.name, "kind": item.isPingPong ? "latency" : "throughput"]
        if item.isPingPong {
            line["ratio_vs_enet"] = ratio(value("opengamekit", "p50_us"), value("enet", "p50_us"))
            line["p50_ratio_vs_enet"] = line["ratio_vs_enet"]
            line["p99_ratio_vs_enet"] = ratio(value("opengamekit", "p99_us"), value("enet", "p99_us"))
            line["ratio_vs_tcp"] = ratio(value("opengamekit", "p50_us"), value("tcp", "p50_us"))
            line["p50_ratio_vs_udp"] = ratio(value("opengamekit", "p50_us"), value("udp", "p50_us"))
            line["p99_ratio_vs_udp"] = ratio(value("opengamekit", "p99_us"), value("udp", "p99_us"))
            line["p50_ratio_vs_udp_epoll"] = ratio(value("opengamekit", "p50_us"), value("udp-epoll", "p50_us"))
            line["p99_ratio_vs_udp_epoll"] = ratio(value("opengamekit", "p99_us"), value("udp-epoll", "p99_us"))
        } else {
            line["ratio_vs_enet"] = ratio(value("opengamekit", "msgs_per_s"), value("enet", "msgs_per_s"))
            line["ratio_vs_tcp"] = ratio(value("opengamekit", "msgs_per_s"), value("tcp", "msgs_per_s"))
        }
        return line
    }

    static func emit(_ object: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

/// The human-readable table.
struct ReportTable {
    private var rows: [[String]] = [["work", "impl", "msgs/s", "MB/s", "p50 µs", "p99 µs", "delivered"]]

    mutating func add(_ line: [String: Any]) {
        func number(_ key: String, _ digits: Int) -> String {
            guard let value = line[key] as? Double else { return "-" }
            return String(format: "%.\(digits)f", value)
        }
        let delivered = "\(line["delivered"] ?? 0)/\(line["expected"] ?? 0)" + ((line["error"] as? String).map { " (\($0))" } ?? "")
        self.rows.append([
            line["work"] as? String ?? "", line["impl"] as? String ?? "",
            number("msgs_per_s", 0), number("mb_per_s", 1), number("p50_us", 1), number("p99_us", 1), delivered,
        ])
    }

    mutating func addRatios(_ line: [String: Any]) {
        let text = ["ratio_vs_enet", "ratio_vs_tcp", "p50_ratio_vs_udp", "p99_ratio_vs_udp", "p50_ratio_vs_udp_epoll"].compactMap { key -> String? in
            guard let value = line[key] else { return nil }
            return "\(key)=\((value as? Double).map { String(format: "%.3f", $0) } ?? "n/a")"
        }.joined(separator: "  ")
        self.rows.append(["", "ratios", text, "", "", "", ""])
    }

    func render() -> String {
        let widths = (0..<7).map { column in self.rows.filter { $0[1] != "ratios" }.map { $0[column].count }.max() ?? 0 }
        return self.rows.map { row in
            if row[1] == "ratios" { return "  -> " + row[2] }
            return row.enumerated().map { index, cell in
                index < 2 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: max(0, widths[index] - cell.count)) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}
