import ArgumentParser
import Foundation
import GameKitVoiceEngine
import NetworkImpairment

/// The real-call rows of `gk-bench voice`: calls as users make them, set beside the simulated
/// engine on the same speech.
///
/// Each call is two `gk-voice call` processes in this sandbox (a signalling server,
/// Tests/Peers/rendezvous.py, between them), over real UDP sockets on loopback: alice says the
/// speech from a WAV file, bob is silent and writes what he hears to one. The kernel drops each
/// arriving media datagram (first byte 0x90, PROTOCOL §17.5: both directions, audio and
/// receiver reports alike) with the condition's probability (`u32` and `statistic` rules on
/// INPUT, iptables and ip6tables; nothing else is touched: signalling, STUN checks and consent
/// go through).
/// Every process has its own devices, clocks and threads: what the simulation leaves out.
///
/// A call that does not go direct (its checks outlasted the path timeout on a starved machine,
/// and its media went through the signalling server's TCP channel, where no loss is applied) or
/// does not start is not scored: `calls_failed` counts it and `error` says why.
///
/// Rows (`impl` ``impl``): PESQ-WB and STOI of what bob heard, median and spread over the calls,
/// beside alice's voice-packet rate (`gk-voice call`'s `bytes_sent` over `sending_seconds`) and
/// the loss the rule made (`loss_pct`: datagrams dropped ÷ media datagrams seen). Beside each,
/// the simulated engine (``simulatedImpl``: `VoiceStreamSimulation`, the quality rows' pipeline)
/// on the same speech and condition over as many seeds, and the difference against the target
/// (``targetDifference``).
enum RealCallBenchmark {
    static let impl = "opengamekit-real-call"
    static let simulatedImpl = "opengamekit-simulated"
    /// A real call's median PESQ-WB must be within this of the simulated one.
    static let targetDifference = 0.1
    static let conditions: [(work: String, loss: Double)] = [("clean", 0), ("loss5", 0.05), ("loss10", 0.10), ("loss20", 0.20)]

    /// The two families' firewalls, with where a UDP payload's first byte is for `u32`: after
    /// the IPv4 header's own length, or after IPv6's fixed 40 bytes. Both are needed: the call's
    /// sockets are dual-stack and its loopback candidates are 127.0.0.1 and ::1, and which pair
    /// wins the checks varies (a first version ruled IPv4 only, and calls that chose ::1 met no
    /// loss at all).
    static let families: [(tool: String, firstByte: String)] = [
        ("iptables", "0>>22&0x3C@8>>24=0x90"), ("ip6tables", "48>>24=0x90"),
    ]

    /// The rule that drops media, without its `-I`/`-D` and chain.
    static func dropRule(probability: Double, firstByte: String) -> [String] {
        ["-p", "udp", "-m", "u32", "--u32", firstByte, "-m", "statistic", "--mode", "random",
         "--probability", String(format: "%.4f", probability), "-j", "DROP"]
    }

    /// The rule that counts media datagrams (matched first, no target).
    static func countRule(firstByte: String) -> [String] { ["-p", "udp", "-m", "u32", "--u32", firstByte] }

    /// `calls` calls per condition (`only`: those conditions), and the simulated rows beside them.
    static func rows(
        calls: Int, only: [String], speechPath: String, quality: SpeechQuality, python: String, workspace: String, firstSeed: UInt64
    ) throws -> [[String: Any]] {
        let speech = try WAVFile.read(path: speechPath)
        let silence = "\(workspace)/silence.wav"
        try WAVFile.write([Int16](repeating: 0, count: VoiceFormat.sampleRate), path: silence)
        let seconds = Double(speech.count) / Double(VoiceFormat.sampleRate) + 3
        // One datagram per segment on loopback, so the rule sees each datagram (scripts/sandbox --loss).
        _ = Self.run("/usr/bin/env", ["ip", "link", "set", "dev", "lo", "gso_max_segs", "1"])
        var rows: [[String: Any]] = []
        for condition in conditions where only.isEmpty || only.contains(condition.work) {
            var pairs: [SpeechQuality.Pair] = []
            var losses: [Double] = [], kilobits: [Double] = [], failures: [String] = []
            var receiver: [String: [Double]] = [:]
            for call in 0..<calls {
                let directory = "\(workspace)/call-\(condition.work)-\(call)"
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                do {
                    let result = try Self.call(
                        loss: condition.loss, speech: speechPath, silence: silence, seconds: seconds, directory: directory, python: python)
                    pairs.append(.init(reference: speech, degraded: result.heard, name: "call-\(condition.work)-real-\(call)"))
                    losses.append(result.lossPercent)
                    kilobits.append(result.kilobitsPerSecond)
                    for (key, value) in result.receiver { receiver[key, default: []].append(value) }
                } catch {
                    failures.append("\(error)")
                }
            }
            var row: [String: Any] = ["work": condition.work, "impl": impl, "calls": calls, "calls_failed": failures.count]
            if let failure = failures.first { row["error"] = failure }
            let scores = try quality.measure(pairs)
            QualityBenchmark.summarise(scores.map(\.pesq), as: "pesq_wb", into: &row)
            QualityBenchmark.summarise(scores.map(\.stoi), as: "stoi", into: &row)
            QualityBenchmark.summarise(kilobits, as: "kbps", into: &row)
            row["loss_pct"] = Percentiles(losses).value(at: 0.5) ?? NSNull()
            row["pesq_unscored"] = scores.filter { !$0.pesqScored }.count
            row["delay_spread_ms"] = Percentiles(scores.map(\.delaySpreadMilliseconds)).value(at: 0.5) ?? NSNull()
            for (key, values) in receiver { row[key] = Percentiles(values).value(at: 0.5) }
            let seeds = (0..<UInt64(max(1, calls))).map { firstSeed &+ $0 }
            var simulated = try QualityBenchmark.row(
                work: "call-\(condition.work)", profile: ImpairmentProfile(loss: condition.loss),
                variant: .init(impl: simulatedImpl, pipeline: .opengamekit), speech: speech, quality: quality, seeds: seeds)
            simulated["work"] = condition.work
            simulated["seeds"] = nil  // not a row of the quality table: the real calls' table shows it
            simulated["simulation_seeds"] = seeds.count
            if let real = row["pesq_wb"] as? Double, let sim = simulated["pesq_wb"] as? Double {
                row["pesq_wb_vs_simulated"] = real - sim
                row["target"] = abs(real - sim) <= targetDifference && failures.isEmpty ? "met" : "missed"
            }
            rows += [row, simulated]
        }
        return rows
    }

    struct CallResult {
        var heard: [Int16]
        var lossPercent: Double
        var kilobitsPerSecond: Double
        /// What bob's jitter buffer did, in % of the frames it played (and its target delay).
        var receiver: [String: Double]
    }

    /// One call: the rules in, the signalling server, bob, alice; the rules out.
    static func call(loss: Double, speech: String, silence: String, seconds: Double, directory: String, python: String) throws -> CallResult {
        // Counted first, then dropped: -I puts each at the top, so the drop rule goes in first.
        var installed: [(tool: String, rule: [String])] = []
        defer { for (tool, rule) in installed.reversed() { _ = OnlineBenchmark.iptables(["-D"] + rule, tool: tool) } }
        for (tool, firstByte) in Self.families {
            var rules = [["INPUT"] + Self.countRule(firstByte: firstByte)]
            if loss > 0 { rules.insert(["INPUT"] + Self.dropRule(probability: loss, firstByte: firstByte), at: 0) }
            for rule in rules {
                guard OnlineBenchmark.iptables(["-I"] + rule, tool: tool) else { throw ValidationError("\(tool) (u32, statistic) failed") }
                installed.append((tool, rule))
            }
        }

        let port = "7000"
        let server = ChildProcess(python, ["Tests/Peers/rendezvous.py", "--host", "127.0.0.1", "--port", port, "--seconds", String(Int(seconds) + 15)], name: "rendezvous")
        try server.start()
        defer { server.terminate() }
        Thread.sleep(forTimeInterval: 0.5)
        let tool = URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("gk-voice").path
        let heard = "\(directory)/bob.wav"
        let bob = ChildProcess(tool, [
            "call", "--name", "bob", "--rendezvous", "127.0.0.1:\(port)", "--input", silence, "--output", heard,
            "--seconds", String(format: "%.1f", seconds + 1),
        ], name: "bob", captureErrors: true)
        try bob.start()
        defer { bob.terminate() }
        Thread.sleep(forTimeInterval: 0.3)
        let alice = ChildProcess(tool, [
            "call", "--name", "alice", "--call", "bob", "--rendezvous", "127.0.0.1:\(port)", "--input", speech,
            "--output", "\(directory)/alice.wav", "--seconds", String(format: "%.1f", seconds),
        ], name: "alice", captureErrors: true)
        try alice.start()
        defer { alice.terminate() }
        guard alice.waitForExit(timeout: seconds + 20), bob.waitForExit(timeout: 10) else {
            throw ValidationError("a call did not end (alice: \(alice.errorTail ?? "-"), bob: \(bob.errorTail ?? "-"))")
        }
        guard let summary = alice.objects.last(where: { $0["event"] as? String == "summary" }),
            (summary["packets_sent"] as? Int ?? 0) > 0, FileManager.default.fileExists(atPath: heard)
        else { throw ValidationError("a call did not start (alice: \(alice.errorTail ?? "-"), bob: \(bob.errorTail ?? "-"))") }
        // Only media on the direct UDP path meets the kernel's loss: a call whose checks took
        // longer than the path timeout (a starved machine) goes through the signalling server's
        // TCP channel instead, and measures something else.
        let path = summary["path"] as? String ?? "none"
        guard path == "direct" else { throw ValidationError("a call went \(path), not direct: no kernel loss on its media") }
        let bytes = Double(summary["bytes_sent"] as? Int ?? 0)
        let sending = summary["sending_seconds"] as? Double ?? 0
        let counts = Self.ruleCounts()
        guard counts.seen > 0 else { throw ValidationError("the rules saw none of the call's media datagrams") }
        let heardSummary = bob.objects.last { $0["event"] as? String == "summary" } ?? [:]
        let played = Double(max(1, heardSummary["frames_played"] as? Int ?? 0))
        func share(_ key: String) -> Double { Double(heardSummary[key] as? Int ?? 0) * 100 / played }
        return CallResult(
            heard: try WAVFile.read(path: heard),
            lossPercent: Double(counts.dropped) * 100 / Double(counts.seen),
            kilobitsPerSecond: sending > 0 ? bytes * 8 / sending / 1000 : 0,
            receiver: [
                "concealed_pct": share("frames_concealed"), "late_pct": share("packets_late"), "fec_pct": share("recovered_by_fec"),
                "copies_pct": share("recovered_by_copy"), "stretched_pct": share("accelerated") + share("expanded"),
                "target_delay_ms": Double(heardSummary["target_delay_ms"] as? Int ?? 0),
            ])
    }

    /// The media datagrams the count rules saw and the drop rules dropped (INPUT's counters, both
    /// families).
    static func ruleCounts() -> (seen: Int, dropped: Int) {
        var seen = 0, dropped = 0
        for (tool, _) in Self.families {
            let listing = Self.run("/usr/bin/env", [tool, "-w", "-L", "INPUT", "-v", "-x", "-n"]) ?? ""
            for line in listing.split(separator: "\n") where line.contains("u32") {
                guard let packets = line.split(separator: " ").first.flatMap({ Int($0) }) else { continue }
                if line.contains("DROP") { dropped += packets } else { seen += packets }
            }
        }
        return (seen, dropped)
    }

    /// Runs a program to its end; its output, or nil when it failed.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) -> String? {
        let process = ChildProcess(executable, arguments, name: arguments.first ?? executable)
        guard (try? process.start()) != nil, process.waitForExit(timeout: 10), process.exitStatus == 0 else { return nil }
        return process.lines.joined(separator: "\n")
    }

    /// The real calls' table: each condition's calls beside the simulation, with the verdict.
    static func table(_ rows: [[String: Any]]) -> String {
        let real = rows.filter { $0["impl"] as? String == impl }
        guard !real.isEmpty else { return "" }
        func number(_ row: [String: Any]?, _ key: String, _ format: String = "%.2f") -> String {
            (row?[key] as? Double).map { String(format: format, $0) } ?? "-"
        }
        func spread(_ row: [String: Any]?, _ key: String, _ format: String) -> String {
            "\(number(row, key, format)) [\(number(row, "\(key)_min", format))–\(number(row, "\(key)_max", format))]"
        }
        var text = "real calls (two gk-voice processes, real UDP, kernel loss on media), median [lowest–highest] over \(real[0]["calls"] as? Int ?? 0) calls;\n"
        text += "the simulated engine on the same speech over as many seeds\n"
        text += "work      impl                        loss%   PESQ-WB             STOI                   kbit/s\n"
        for row in rows where [impl, simulatedImpl].contains(row["impl"] as? String ?? "") {
            let work = (row["work"] as? String ?? "").padding(toLength: 9, withPad: " ", startingAt: 0)
            let name = (row["impl"] as? String ?? "").padding(toLength: 27, withPad: " ", startingAt: 0)
            text += "\(work) \(name) \(number(row, "loss_pct", "%5.1f"))   \(spread(row, "pesq_wb", "%.2f"))  \(spread(row, "stoi", "%.3f"))  \(spread(row, "kbps", "%.1f"))\n"
            if row["impl"] as? String == simulatedImpl, let work = row["work"] as? String,
                let call = real.first(where: { $0["work"] as? String == work })
            {
                text += "  -> \(work): real \(number(call, "pesq_wb")) vs simulated \(number(row, "pesq_wb")) "
                text += "(\(number(call, "pesq_wb_vs_simulated", "%+.2f"))), target within ±\(String(format: "%.1f", targetDifference)): "
                text += "\(call["target"] as? String ?? "missed")"
                if let failed = call["calls_failed"] as? Int, failed > 0 { text += "; \(failed) calls failed: \(call["error"] as? String ?? "")" }
                text += "\n"
                // Where the difference comes from: what each receiver did, in % of frames played.
                for (name, source) in [("real", call), ("simulated", row)] {
                    text += "     \(name.padding(toLength: 9, withPad: " ", startingAt: 0)) concealed \(number(source, "concealed_pct", "%.1f")) %, "
                    text += "late \(number(source, "late_pct", "%.1f")) %, FEC \(number(source, "fec_pct", "%.1f")) %, "
                    text += "copies \(number(source, "copies_pct", "%.1f")) %, stretched \(number(source, "stretched_pct", "%.1f")) %, "
                    text += "target delay \(number(source, "target_delay_ms", "%.0f")) ms, delay spread \(number(source, "delay_spread_ms", "%.0f")) ms\n"
                }
            }
        }
        return text
    }
}
