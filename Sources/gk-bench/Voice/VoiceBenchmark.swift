import ArgumentParser
import Foundation
import GameKitVoiceEngine
import NIOCore
import NetworkImpairment

/// `gk-bench voice`: the voice engine against plain Opus with a fixed 80 ms buffer, on the same
/// speech and the same seeded impairments; the echo-cancellation harness for both cancellers;
/// mouth-to-ear latency of chirps through a real (private, headless) PulseAudio; CPU per
/// full-duplex stream.
struct VoiceBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "voice", abstract: "Voice quality, echo cancellation, latency and CPU.")

    @Flag(help: "Print one JSON line per row (the table goes to standard error).")
    var json = false

    @Option(help: "Reference speech, 16 kHz mono WAV (default: made by scripts/voice-reference --long).")
    var reference: String?

    @Option(help: "The Python with pesq and pystoi (default: .venv/bin/python).")
    var python = ".venv/bin/python"

    @Option(help: "First seed of the impairments.")
    var seed: UInt64 = 1

    @Option(help: "Seeds per quality row (from --seed on): each row is their median, with the lowest and highest.")
    var seeds = 5

    @Flag(help: "A short run that still makes every kind of row: the short reference, one seed, two conditions, the speex canceller only, group-2, no PulseAudio.")
    var quick = false

    @Option(help: "Chirps for the mouth-to-ear measurement.")
    var chirps = 20

    @Flag(help: "Skip the PulseAudio mouth-to-ear measurements.")
    var skipPulse = false

    @Option(help: "Quality conditions to run (repeatable; default: every one): \(QualityBenchmark.conditions.map(\.work).joined(separator: ", ")).")
    var condition: [String] = []

    @Option(help: "A directory to keep every scored pair in (<row>-<seed>-ref.wav and -deg.wav), to listen to or score again.")
    var keepAudio: String?

    @Option(help: "Real calls per condition (two gk-voice processes, kernel loss on the media; 0: none). --quick makes one, at 10 % loss.")
    var realCalls = 5

    /// The parts of the benchmark, in the order they run.
    enum Section: String, CaseIterable, ExpressibleByArgument {
        case quality, realCalls = "real-calls", echo, noise, doubleTalk = "double-talk", cpu, group
    }

    @Option(help: "Parts to run (repeatable; default: every one): \(Section.allCases.map(\.rawValue).joined(separator: ", ")).")
    var section: [Section] = []

    @Option(name: .customLong("group"), help: "Group call sizes to measure (rows group-N; group-2, a two-party call through the same pipeline, is the anchor).")
    var groupSizes: [Int] = [2, 4, 8]

    func validate() throws {
        guard (1...50).contains(seeds) else { throw ValidationError("--seeds takes 1 to 50") }
        guard (0...50).contains(realCalls) else { throw ValidationError("--real-calls takes 0 to 50") }
        let known = Set(QualityBenchmark.conditions.map(\.work))
        if let unknown = condition.first(where: { !known.contains($0) }) {
            throw ValidationError("--condition \(unknown): no such condition (\(known.sorted().joined(separator: ", ")))")
        }
        guard groupSizes.allSatisfy({ (2...GroupVoiceEngine.maximumParticipants + 1).contains($0) }) else {
            throw ValidationError("--group takes call sizes from 2 to \(GroupVoiceEngine.maximumParticipants + 1)")
        }
    }

    func run() throws {
        try NetworkSandbox.requireIsolation()
        let workspace = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-voice-bench-\(getpid())").path
        try FileManager.default.createDirectory(atPath: workspace, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let referencePath = try reference ?? Self.makeReference(in: workspace, name: "far.wav", long: !quick)
        let speech = try WAVFile.read(path: referencePath)
        if let keepAudio { try FileManager.default.createDirectory(atPath: keepAudio, withIntermediateDirectories: true) }
        let quality = SpeechQuality(python: python, workspace: keepAudio ?? workspace, keepsFiles: keepAudio != nil)
        var rows: [[String: Any]] = []

        defer { quality.pool.finish() }
        let sections = Set(section.isEmpty ? Section.allCases : section)

        let seedList = (0..<UInt64(quick ? 1 : seeds)).map { seed &+ $0 }
        if sections.contains(.quality) {
            var conditions = quick ? QualityBenchmark.conditions.filter { ["clean", "loss10"].contains($0.work) } : QualityBenchmark.conditions
            if !condition.isEmpty { conditions = conditions.filter { condition.contains($0.work) } }
            rows += try QualityBenchmark.rows(speech: speech, quality: quality, seeds: seedList, conditions: conditions)
        }

        // Real calls, on the short speech (each call lasts as long as it), beside the simulation.
        let calls = quick ? min(realCalls, 1) : realCalls
        if calls > 0 && sections.contains(.realCalls) {
            let short = try quick ? referencePath : Self.makeReference(in: workspace, name: "call.wav", long: false)
            rows += try RealCallBenchmark.rows(
                calls: calls, only: quick ? ["loss10"] : condition, speechPath: short, quality: quality, python: python,
                workspace: workspace, firstSeed: seed)
        }

        // Echo cancellation: far end = the reference speech, near end = a second talker.
        var cancellers: [(String, () throws -> EchoCanceller)] = WebRTCEchoCanceller.Suppression.allCases.map { level in
            ("webrtc-\(level)", { try WebRTCEchoCanceller(suppression: level) })
        }
        cancellers.append(("speex", { try SpeexEchoCanceller() }))
        // Kept on where the microphone hears no echo: what the bypass gains a near talker.
        cancellers.append(("speex-no-bypass", { try SpeexEchoCanceller(bypassesWithoutEcho: false) }))
        // Without the start-up suppressor: the library alone, for comparison.
        cancellers.append(("speex-alone", { try SpeexEchoCanceller(startupSuppression: nil) }))
        if quick { cancellers.removeAll { $0.0 != "speex" } }
        let near = try sections.isDisjoint(with: [.echo, .doubleTalk])
            ? [] : WAVFile.read(path: Self.makeReference(in: workspace, name: "near.wav", long: false, secondTalker: true))
        if sections.contains(.echo) {
            for (name, make) in cancellers {
                let result = try EchoMeasurement.run(canceller: try make(), far: speech, near: near)
                // The same double talk at 1 s, while the canceller is still converging.
                let early = try EchoMeasurement.run(canceller: try make(), far: speech, near: near, doubleTalkAt: 1)
                let scores = try quality.measure([
                    .init(reference: result.doubleTalkReference, degraded: result.doubleTalkOutput, name: "dt-\(name)"),
                    .init(reference: early.doubleTalkReference, degraded: early.doubleTalkOutput, name: "dt-early-\(name)"),
                ])
                rows.append([
                    "work": "echo", "impl": name, "erle_db_3s": result.erleFirst3sDecibels,
                    "erle_db_steady": result.erleSteadyDecibels, "dt_atten_db": result.doubleTalkAttenuationDecibels,
                    "dt_pesq_wb": scores[0].pesq, "cpu_pct": result.cpuSecondsPerSecond * 100,
                    "dt_atten_db_at_1s": early.doubleTalkAttenuationDecibels, "dt_pesq_wb_at_1s": scores[1].pesq,
                ])
            }
        }

        if sections.contains(.noise) {
            rows += try NoiseBenchmark.rows(speech: speech, quality: quality, seeds: seedList, workspace: workspace)
        }

        if sections.contains(.doubleTalk) {
            rows += try DoubleTalkBenchmark.rows(
                cancellers: cancellers, far: speech, near: near, quality: quality, seconds: quick ? [1] : DoubleTalkBenchmark.seconds)
        }

        if sections.contains(.cpu) {
            rows.append(try Self.fullDuplexCPU(speech: speech))
            rows.append(try Self.fullDuplexCPU(speech: speech, burstLoss: true))
        }
        if sections.contains(.group) {
            let pulse = !skipPulse && !quick
            let pairLatency = pulse ? try MouthToEar.measure(chirps: chirps, workspace: workspace) : nil
            rows += try GroupVoiceBenchmark.rows(
                sizes: quick ? [2] : groupSizes, speech: speech, quality: quality, seed: seed, chirps: pulse ? chirps : nil, workspace: workspace,
                pairLatency: pairLatency)
            if let pairLatency { rows.append(pairLatency) }
        }
        report(rows)
    }

    /// CPU of one full-duplex stream: two engines talk to each other in virtual time (each does
    /// echo cancellation, encoding, the jitter buffer and decoding); the process's CPU time is
    /// halved and divided by the audio's duration. `burstLoss`: runs of 3 packets in 30 are lost
    /// both ways, so each receiver asks for cover and each sender codes the copies too.
    static func fullDuplexCPU(speech: [Int16], burstLoss: Bool = false) throws -> [String: Any] {
        final class Wire: @unchecked Sendable { var packets: [[UInt8]] = [] }
        let toB = Wire(), toA = Wire()
        let a = try VoiceEngine { toB.packets.append($0) }
        let b = try VoiceEngine { toA.packets.append($0) }
        let samples = a.format.samplesPerFrame
        let frames = speech.count / samples
        let start = processCPUSeconds()
        for frame in 0..<frames {
            let now = Int64(frame * a.format.frameMilliseconds)
            let mic = Array(speech[frame * samples..<(frame + 1) * samples])
            _ = try a.process(microphone: mic, atMilliseconds: now)
            _ = try b.process(microphone: mic, atMilliseconds: now)
            let lost = burstLoss && frame % 30 < 3
            for packet in toB.packets where !lost { b.receive(packet, atMilliseconds: now) }
            for packet in toA.packets where !lost { a.receive(packet, atMilliseconds: now) }
            toB.packets.removeAll()
            toA.packets.removeAll()
        }
        let cpu = (processCPUSeconds() - start) / 2
        let audioSeconds = Double(frames * samples) / Double(VoiceFormat.sampleRate)
        return [
            "work": burstLoss ? "cpu-burst" : "cpu", "impl": "opengamekit", "cpu_pct": cpu / audioSeconds * 100,
            "echo_canceller": VoiceEngine.Configuration().echoCanceller.rawValue, "burst_cover": a.currentStatistics.burstCover,
        ]
    }

    /// Runs scripts/voice-reference.
    static func makeReference(in directory: String, name: String, long: Bool, secondTalker: Bool = false) throws -> String {
        let path = "\(directory)/\(name)"
        var arguments = [path]
        if long { arguments.append("--long") }
        if secondTalker { arguments.append("--second-talker") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "scripts/voice-reference")
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ValidationError("scripts/voice-reference failed (run from the repository root; needs espeak-ng and sox)") }
        return path
    }

    private func report(_ rows: [[String: Any]]) {
        func number(_ row: [String: Any], _ key: String, _ format: String = "%.2f") -> String {
            (row[key] as? Double).map { String(format: format, $0) } ?? "-"
        }
        var table = "work      impl              loss%   PESQ-WB  STOI   kbit/s | echo: ERLE 3s  steady  DT atten  DT PESQ  at 1 s | cpu%  m2e p50/p95 ms\n"
        for row in rows {
            guard !["double-talk", "noise"].contains(row["work"] as? String ?? ""), !QualityBenchmark.isQualityRow(row),
                ![RealCallBenchmark.impl, RealCallBenchmark.simulatedImpl].contains(row["impl"] as? String ?? "")
            else {
                if json { emitJSONLine(row) }
                continue
            }
            let work = (row["work"] as? String ?? "").padding(toLength: 9, withPad: " ", startingAt: 0)
            let impl = (row["impl"] as? String ?? "").padding(toLength: 17, withPad: " ", startingAt: 0)
            table += "\(work) \(impl) \(number(row, "loss_pct", "%5.1f"))   \(number(row, "pesq_wb"))     \(number(row, "stoi", "%.3f"))  \(number(row, "kbps", "%5.1f"))  |"
            table += "  \(number(row, "erle_db_3s", "%5.1f"))  \(number(row, "erle_db_steady", "%5.1f"))  \(number(row, "dt_atten_db", "%5.1f"))  \(number(row, "dt_pesq_wb"))  \(number(row, "dt_atten_db_at_1s", "%4.1f"))/\(number(row, "dt_pesq_wb_at_1s"))  |"
            table += " \(number(row, "cpu_pct"))  \(number(row, "mouth_to_ear_ms_p50", "%.0f"))/\(number(row, "mouth_to_ear_ms_p95", "%.0f"))\n"
            if json { emitJSONLine(row) }
        }
        table += DoubleTalkBenchmark.table(rows)
        table += NoiseBenchmark.table(rows)
        let (qualityTable, comparisons) = QualityBenchmark.table(rows)
        table = qualityTable + RealCallBenchmark.table(rows) + table
        if json { comparisons.forEach(emitJSONLine) }
        // Group calls: one participant's CPU against the 5 % target; quality and latency against
        // a two-party call through the same pipeline (group-2).
        let pair = rows.first { $0["work"] as? String == "group-2" }
        if let pair, let cost = pair["canceller_cost"] as? Double, let with = pair["pesq_wb"] as? Double,
            let without = pair["pesq_wb_without_canceller"] as? Double
        {
            let met = cost < GroupVoiceBenchmark.cancellerCostTarget
            table += "  -> group-2, clean speech: PESQ-WB \(String(format: "%.2f", with)) with the default echo canceller, "
            table += "\(String(format: "%.2f", without)) without (cost \(String(format: "%.2f", cost)); target below "
            table += "\(String(format: "%.2f", GroupVoiceBenchmark.cancellerCostTarget))): \(met ? "met" : "missed")\n"
            if json { emitJSONLine(["work": "group-2", "impl": "ratio", "canceller_cost": cost, "canceller_cost_target": met ? "met" : "missed"]) }
        }
        for row in rows where (row["work"] as? String)?.hasPrefix("group-") == true && row["work"] as? String != "group-2" {
            guard let work = row["work"] as? String, let cpu = row["cpu_pct"] as? Double else { continue }
            table += "  -> \(work): \(String(format: "%.2f", cpu)) % of a core per participant, all talking (×\(String(format: "%.2f", cpu / GroupVoiceBenchmark.cpuTargetPercent)) of the 5 % target)"
            var line: [String: Any] = ["work": work, "impl": "ratio", "cpu_ratio_vs_target": cpu / GroupVoiceBenchmark.cpuTargetPercent]
            if let pesq = row["pesq_wb"] as? Double, let two = pair?["pesq_wb"] as? Double {
                table += "; worst listener's PESQ-WB \(String(format: "%.2f", pesq)) vs \(String(format: "%.2f", two)) in two"
                line["pesq_wb_gain_vs_group_2"] = pesq - two
            }
            if let p95 = row["mouth_to_ear_ms_p95"] as? Double, let two = pair?["mouth_to_ear_ms_p95"] as? Double {
                table += "; mouth-to-ear p95 \(String(format: "%.0f", p95)) vs \(String(format: "%.0f", two)) ms"
                line["mouth_to_ear_p95_ratio_vs_group_2"] = p95 / two
            }
            table += "\n"
            if json { emitJSONLine(line) }
        }
        (json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(table.utf8))
    }
}
