import Foundation
import NetworkImpairment
import Testing

/// `gk-bench voice --quick`: every kind of row the voice benchmark makes comes out, parses, and
/// carries every field its kind has, with values in their scales. Figures are not judged (no
/// timing or quality threshold in a test); that every listener counts is (an unscored one is
/// the floor, 1.0, never missing).
@Suite("Voice benchmark harness")
struct VoiceBenchmarkHarnessTests {
    static let qualityFields = [
        "work", "impl", "seeds", "pesq_wb", "pesq_wb_min", "pesq_wb_max", "stoi", "stoi_min", "stoi_max", "kbps", "kbps_min", "kbps_max",
        "loss_pct", "delay_ms", "pesq_unscored", "stoi_global", "delay_spread_ms",
    ]
    static let comparisonFields = [
        "pesq_wb_ratio_vs_baseline", "pesq_wb_gain_vs_baseline", "pesq_wb_gain_vs_fec_reference", "pesq_wb_gain_at_reference_rate",
        "pesq_wb_gain_at_engine_rate", "stoi_gain_at_reference_rate", "stoi_gain_at_engine_rate", "stoi_gain_vs_fec_reference",
    ]
    static let echoFields = [
        "erle_db_3s", "erle_db_steady", "dt_atten_db", "dt_pesq_wb", "cpu_pct", "dt_atten_db_at_1s", "dt_pesq_wb_at_1s",
    ]
    static let groupFields = [
        "participants", "pesq_wb", "pesq_wb_mean", "listeners", "listeners_unscored", "cpu_pct", "cpu_pct_one_talker", "ratio_vs_target",
        "kbps", "mouth_to_ear_ms_p50", "mouth_to_ear_ms_p95",
    ]
    static let realCallFields = [
        "calls", "calls_failed", "pesq_wb", "pesq_wb_min", "pesq_wb_max", "stoi", "stoi_min", "stoi_max", "kbps", "kbps_min", "kbps_max",
        "loss_pct", "pesq_unscored", "pesq_wb_vs_simulated", "target",
    ]

    static func isPESQ(_ value: Any?) -> Bool { (value as? Double).map { (1.0...4.65).contains($0) } ?? false }
    static func isSTOI(_ value: Any?) -> Bool { (value as? Double).map { (0.0...1.0).contains($0) } ?? false }

    /// Runs `gk-bench voice --quick --json` with these sections (none: every one), keeping the
    /// scored pairs in `kept`; its rows, after checking that it ended well and printed only JSON.
    static func quickRun(sections: [String], kept: String) async throws -> [[String: Any]] {
        let parts = sections.map { "--section \($0) " }.joined()
        let result = try await SandboxScript.run(
            "gk-bench voice --quick --json \(parts)--keep-audio \(kept) 2>/dev/null; echo \"X {\\\"exit\\\":$?}\"", timeout: 900)
        #expect(result.objects(tagged: "X").first?["exit"] as? Int == 0, "\(result.lines.suffix(5))")
        // Every line of standard output is a JSON object (the table goes to standard error).
        let output = result.lines.filter { !$0.hasPrefix("X ") && !$0.isEmpty }
        #expect(output.count == result.objects.count, "lines that are not JSON: \(output.filter { !$0.hasPrefix("{") })")
        return result.objects
    }

    // The quick run in two halves, which run at once (each half is one thread; the real call in
    // the first mostly waits for its audio's pace).

    @Test func theQuickRunsQualityRowsAndRealCallCarryEveryField() async throws {
        let kept = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-kept-\(getpid())-quality").path
        defer { try? FileManager.default.removeItem(atPath: kept) }
        let rows = try await Self.quickRun(sections: ["quality", "real-calls"], kept: kept)

        // Quality: each variant on each condition, medians and spread, the rate beside the scores.
        let quality = rows.filter { $0["seeds"] != nil }
        let impls: Set<String> = ["opengamekit", "opus-fec-80ms", "plain-opus-80ms", "opengamekit@ref-rate", "opus-fec-80ms@engine-rate"]
        for work in ["clean", "loss10"] {
            #expect(Set(quality.filter { $0["work"] as? String == work }.compactMap { $0["impl"] as? String }) == impls, "\(work)")
        }
        for row in quality {
            for field in Self.qualityFields { #expect(row[field] != nil, "\(row["work"] ?? "?")/\(row["impl"] ?? "?") lacks \(field)") }
            #expect(Self.isPESQ(row["pesq_wb"]) && Self.isPESQ(row["pesq_wb_min"]) && Self.isPESQ(row["pesq_wb_max"]), "\(row)")
            #expect(Self.isSTOI(row["stoi"]), "\(row)")
            #expect((row["kbps"] as? Double ?? 0) > 0, "\(row)")
            #expect(row["seeds"] as? Int == 1)
            if (row["impl"] as? String)?.contains("@") == true { #expect((row["rate_kbps"] as? Double ?? 0) > 0, "\(row)") }
        }
        // The comparisons at equal rate, both ways, with a computed verdict where targets apply.
        let comparisons = rows.filter { $0["impl"] as? String == "ratio" && ["clean", "loss10"].contains($0["work"] as? String ?? "") }
        #expect(comparisons.count == 2, "\(comparisons)")
        for row in comparisons {
            for field in Self.comparisonFields { #expect(row[field] is Double, "\(row["work"] ?? "?") lacks \(field)") }
        }
        let lossy = try #require(comparisons.first { $0["work"] as? String == "loss10" })
        #expect(["met", "missed"].contains(lossy["pesq_target"] as? String ?? ""), "\(lossy)")
        #expect(["met", "missed"].contains(lossy["stoi_target"] as? String ?? ""), "\(lossy)")

        // A real call at 10 % loss (two gk-voice processes, the kernel dropping media) beside the
        // simulated engine on the same speech; the rule dropped some of what it counted.
        // A call that did not go direct (on a starved machine its checks may outlast the path
        // timeout, and its media then takes the signalling server's TCP channel) is not scored,
        // and the row says why; a scored one met the kernel's loss.
        let call = try #require(rows.first { $0["impl"] as? String == "opengamekit-real-call" }, "\(rows)")
        #expect(call["work"] as? String == "loss10" && call["calls"] as? Int == 1, "\(call)")
        if call["calls_failed"] as? Int == 0 {
            for field in Self.realCallFields { #expect(call[field] != nil, "the real call lacks \(field): \(call)") }
            #expect(Self.isPESQ(call["pesq_wb"]) && Self.isSTOI(call["stoi"]) && (call["kbps"] as? Double ?? 0) > 0, "\(call)")
            #expect((call["loss_pct"] as? Double).map { $0 > 0 && $0 < 30 } == true, "\(call)")
            #expect(["met", "missed"].contains(call["target"] as? String ?? ""), "\(call)")
        } else {
            #expect(call["calls_failed"] as? Int == 1 && (call["error"] as? String)?.contains("not direct") == true, "\(call)")
        }
        let simulated = try #require(rows.first { $0["impl"] as? String == "opengamekit-simulated" }, "\(rows)")
        #expect(simulated["work"] as? String == "loss10" && Self.isPESQ(simulated["pesq_wb"]) && simulated["simulation_seeds"] as? Int == 1, "\(simulated)")
        // Only the sections asked for.
        #expect(!rows.contains { ["noise", "echo", "double-talk", "cpu", "group-2"].contains($0["work"] as? String ?? "") }, "\(rows)")

        // --keep-audio kept every scored pair: both quick conditions' five variants, each a
        // reference and what was played.
        let files = try FileManager.default.contentsOfDirectory(atPath: kept)
        for work in ["clean", "loss10"] {
            #expect(files.filter { $0.hasPrefix("\(work)-") && $0.hasSuffix("-deg.wav") }.count == 5, "\(work): \(files.sorted())")
            #expect(files.filter { $0.hasPrefix("\(work)-") && $0.hasSuffix("-ref.wav") }.count == 5, "\(work): \(files.sorted())")
        }
    }

    @Test func theQuickRunsEchoNoiseCPUAndGroupRowsCarryEveryField() async throws {
        let kept = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-kept-\(getpid())-echo").path
        defer { try? FileManager.default.removeItem(atPath: kept) }
        let rows = try await Self.quickRun(sections: ["echo", "noise", "double-talk", "cpu", "group"], kept: kept)
        #expect(!rows.contains { $0["seeds"] != nil || $0["calls"] != nil }, "\(rows)")

        // Noise: stationary and babble at 10 and 0 dB SNR, the noise suppressor on and off.
        let noise = rows.filter { $0["work"] as? String == "noise" }
        var settings: Set<String> = []
        for row in noise {
            settings.insert("\(row["noise"] ?? "?") \(row["snr_db"] ?? "?") \(row["noise_suppressor"] ?? "?")")
            #expect(Self.isPESQ(row["pesq_wb"]) && Self.isPESQ(row["pesq_wb_min"]) && Self.isSTOI(row["stoi"]) && Self.isSTOI(row["stoi_max"]), "\(row)")
        }
        #expect(settings == Set(["stationary", "babble"].flatMap { kind in [10, 0].flatMap { snr in ["on", "off"].map { "\(kind) \(snr) \($0)" } } }))
        #expect(noise.count == 8)

        // Echo cancellation and double talk (the speex canceller), with and without an echo path.
        let echo = try #require(rows.first { $0["work"] as? String == "echo" && $0["impl"] as? String == "speex" }, "\(rows)")
        for field in Self.echoFields { #expect(echo[field] is Double, "echo lacks \(field)") }
        let doubleTalk = rows.filter { $0["work"] as? String == "double-talk" }
        #expect(Set(doubleTalk.compactMap { $0["echo"] as? String }) == ["room", "none"])
        for row in doubleTalk {
            #expect(Self.isPESQ(row["pesq_wb_at_1s"]) && Self.isPESQ(row["pesq_wb_worst"]), "\(row)")
            #expect(Self.isSTOI(row["stoi_at_1s"]) && row["atten_db_at_1s"] is Double, "\(row)")
        }

        // CPU of a full-duplex stream, with and without bursts.
        for work in ["cpu", "cpu-burst"] {
            let row = try #require(rows.first { $0["work"] as? String == work }, "\(work)")
            #expect((row["cpu_pct"] as? Double ?? 0) > 0 && row["echo_canceller"] is String && row["burst_cover"] is Int, "\(row)")
        }

        // A two-party call through the group pipeline: every listener counted, none unscored.
        let group = try #require(rows.first { $0["work"] as? String == "group-2" }, "\(rows)")
        for field in Self.groupFields { #expect(group[field] != nil, "group-2 lacks \(field)") }
        // One talks, the others listen.
        #expect(group["participants"] as? Int == 2 && group["listeners"] as? Int == 1 && group["listeners_unscored"] as? Int == 0, "\(group)")
        #expect(Self.isPESQ(group["pesq_wb"]), "\(group)")
        // Beside it, the same call without an echo canceller: what the default one costs.
        #expect(Self.isPESQ(group["pesq_wb_without_canceller"]) && group["canceller_cost"] is Double, "\(group)")
        let cost = try #require(rows.first { $0["work"] as? String == "group-2" && $0["impl"] as? String == "ratio" }, "\(rows)")
        #expect(["met", "missed"].contains(cost["canceller_cost_target"] as? String ?? ""), "\(cost)")
    }

    @Test func anUnknownConditionIsRefusedByName() async throws {
        let result = try await SandboxScript.run("gk-bench voice --quick --condition loss99 2>&1; echo \"X {\\\"exit\\\":$?}\"", timeout: 60)
        #expect(result.objects(tagged: "X").first?["exit"] as? Int != 0)
        #expect(result.lines.contains { $0.contains("--condition loss99: no such condition") }, "\(result.lines)")
    }

    @Test func anUnknownSectionIsRefusedWithTheKnownOnes() async throws {
        let result = try await SandboxScript.run("gk-bench voice --quick --section echos 2>&1; echo \"X {\\\"exit\\\":$?}\"", timeout: 60)
        #expect(result.objects(tagged: "X").first?["exit"] as? Int != 0)
        #expect(result.lines.contains { $0.contains("'echos' is invalid") }, "\(result.lines)")
        #expect(result.lines.contains { $0.contains("double-talk") }, "\(result.lines)")
    }
}
