import Foundation

/// `gk-bench online`'s `punch` work: hole punching per NAT class, with real processes on the NAT
/// topology (scripts/nat-chat: two gk-session processes on private networks behind NAT routers,
/// gk-rendezvous between them). Each attempt is a fresh topology; it counts as direct when the
/// joiner's connection moved to a direct path, and `punch_ms` runs from the connection (through
/// the relay) to that move.
enum OnlinePunch {
    /// The classes: scripts/nat-topology's routers as they are (endpoint-independent mapping and
    /// filtering by address and port), and with `--random-fully` (a new port per destination,
    /// "symmetric").
    static let classes: [(name: String, flags: [String])] = [("endpoint-independent", []), ("symmetric", ["--random-fully"])]

    static func run(attempts: Int, root: URL, executables: URL) async -> [[String: Any]] {
        var lines: [[String: Any]] = []
        for (name, flags) in Self.classes {
            var direct = 0
            var completed = 0
            var punches: [Double] = []
            for attempt in 0..<attempts {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-punch-\(getpid())-\(attempt)")
                try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(at: directory) }
                let command = "cd '\(root.path)' && PATH='\(executables.path)':$PATH exec scripts/nat-chat \(flags.joined(separator: " ")) --messages 20 '\(directory.path)'"
                let chat = ChildProcess("/bin/bash", ["-c", command], name: "nat-chat", captureErrors: true)
                guard (try? chat.start()) != nil else { continue }
                if !chat.waitForExit(timeout: 90) { chat.terminate() }
                let bob = Self.objects(directory.appendingPathComponent("bob.jsonl"))
                guard let connected = bob.first(where: { $0["event"] as? String == "state" && $0["state"] as? String == "connected" }) else {
                    FileHandle.standardError.write(Data("punch \(name) attempt \(attempt): bob never connected\n".utf8))
                    continue
                }
                completed += 1
                if let moved = bob.first(where: { $0["event"] as? String == "path" && $0["path"] as? String == "direct" }),
                    let from = connected["mono_ns"] as? Int, let to = moved["mono_ns"] as? Int
                {
                    direct += 1
                    punches.append(Double(to - from) / 1e6)
                }
            }
            let (p50, p99) = OnlineBenchmark.figures(punches)
            lines.append([
                "work": "punch", "nat": name, "attempts": attempts, "connected": completed, "direct": direct,
                "success_rate": attempts > 0 ? (Double(direct) / Double(attempts) * 100).rounded() / 100 : 0,
                "p50_ms": p50 ?? NSNull(), "p99_ms": p99 ?? NSNull(),
            ])
        }
        return lines
    }

    static func objects(_ file: URL) -> [[String: Any]] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }
}
