import Foundation
import GameKitVoiceEngine
import NetworkImpairment

/// The speech-quality rows of `gk-bench voice`: each pipeline on each network condition, over
/// several seeds of the impairments (the median, with the lowest and highest beside it), with
/// the bit rate beside every score; and two comparisons at equal rate, since a pipeline that
/// sends more bits scores higher for that alone: the engine capped at the FEC reference's rate
/// (``OpusSettings/maximumBitrate``, everything included), and the reference at the engine's
/// rate (its median over the seeds, to the kbit/s).
enum QualityBenchmark {
    static let conditions: [(work: String, profile: ImpairmentProfile)] = [
        ("clean", ImpairmentProfile()),
        ("loss5", ImpairmentProfile(loss: 0.05)),
        ("loss10", ImpairmentProfile(loss: 0.10)),
        ("loss20", ImpairmentProfile(loss: 0.20)),
        ("burst10", ImpairmentProfile(burstLoss: BurstLoss(averageLoss: 0.10, meanBurstLength: 3))),
        ("jitter20", ImpairmentProfile(jitter: .milliseconds(20))),
    ]
    /// The conditions the like-for-like targets apply to.
    static let lossyConditions: Set<String> = ["loss5", "loss10", "loss20", "burst10"]
    /// The FEC reference's rate: plain Opus at 32 kbit/s.
    static let referenceRate = 32_000
    /// At the reference's rate, the engine's PESQ-WB must be at least the reference's plus this.
    static let targetGain = 0.2

    /// One pipeline at one rate.
    struct Variant {
        var impl: String
        var pipeline: VoiceStreamSimulation.Pipeline
        var rate: Int?
    }

    static let engine = "opengamekit"
    static let reference = "opus-fec-80ms"
    static let baseline = "plain-opus-80ms"
    /// The engine capped at the reference's rate.
    static let engineAtReferenceRate = "opengamekit@ref-rate"
    /// The reference at the engine's rate.
    static let referenceAtEngineRate = "opus-fec-80ms@engine-rate"

    static func rows(
        speech: [Int16], quality: SpeechQuality, seeds: [UInt64], conditions: [(work: String, profile: ImpairmentProfile)] = Self.conditions
    ) throws -> [[String: Any]] {
        var rows: [[String: Any]] = []
        for (work, profile) in conditions {
            let variants = [
                Variant(impl: engine, pipeline: .opengamekit),
                Variant(impl: reference, pipeline: .fecReference),
                Variant(impl: baseline, pipeline: .baseline),
                Variant(impl: engineAtReferenceRate, pipeline: .opengamekit, rate: referenceRate),
            ]
            var measured = try variants.map { try row(work: work, profile: profile, variant: $0, speech: speech, quality: quality, seeds: seeds) }
            let engineKilobits = measured[0]["kbps"] as? Double ?? 32
            let matched = Variant(impl: referenceAtEngineRate, pipeline: .fecReference, rate: Int(engineKilobits.rounded()) * 1000)
            measured.append(try row(work: work, profile: profile, variant: matched, speech: speech, quality: quality, seeds: seeds))
            rows += measured
        }
        return rows
    }

    /// One variant on one condition, once per seed.
    static func row(
        work: String, profile: ImpairmentProfile, variant: Variant, speech: [Int16], quality: SpeechQuality, seeds: [UInt64]
    ) throws -> [String: Any] {
        var pairs: [SpeechQuality.Pair] = []
        var losses: [Double] = []
        var kilobits: [Double] = []
        var receiver: [String: [Double]] = [:]
        for seed in seeds {
            let simulation = VoiceStreamSimulation(pipeline: variant.pipeline, impairment: profile, seed: seed, rate: variant.rate)
            let outcome = try simulation.run(speech: speech)
            pairs.append(.init(reference: speech, degraded: outcome.played, name: "\(work)-\(variant.impl)-\(seed)"))
            losses.append(outcome.lossPercent)
            kilobits.append(outcome.kilobitsPerSecond)
            for (key, value) in outcome.receiver { receiver[key, default: []].append(value) }
        }
        let scores = try quality.measure(pairs)
        var row: [String: Any] = ["work": work, "impl": variant.impl, "seeds": seeds.count]
        if let rate = variant.rate { row["rate_kbps"] = Double(rate) / 1000 }
        Self.summarise(scores.map(\.pesq), as: "pesq_wb", into: &row)
        Self.summarise(scores.map(\.stoi), as: "stoi", into: &row)
        // Under one global alignment only (a playout delay that moved costs STOI there).
        row["stoi_global"] = Percentiles(scores.map(\.stoiGlobal)).value(at: 0.5)
        row["delay_spread_ms"] = Percentiles(scores.map(\.delaySpreadMilliseconds)).value(at: 0.5)
        Self.summarise(kilobits, as: "kbps", into: &row)
        row["loss_pct"] = Percentiles(losses).value(at: 0.5)
        row["delay_ms"] = Percentiles(scores.map(\.delayMilliseconds)).value(at: 0.5)
        row["pesq_unscored"] = scores.filter { !$0.pesqScored }.count
        for (key, values) in receiver { row[key] = Percentiles(values).value(at: 0.5) }
        return row
    }

    /// `key` (the median), `key_min` and `key_max`.
    static func summarise(_ values: [Double], as key: String, into row: inout [String: Any]) {
        row[key] = Percentiles(values).value(at: 0.5)
        row["\(key)_min"] = values.min()
        row["\(key)_max"] = values.max()
    }

    static func isQualityRow(_ row: [String: Any]) -> Bool { row["seeds"] != nil }

    /// The table of quality rows, then each condition's comparisons: against the baseline, and
    /// against the FEC reference at equal rate both ways, with the targets' verdicts; the
    /// comparisons are returned as rows too (impl "ratio").
    static func table(_ rows: [[String: Any]]) -> (text: String, comparisons: [[String: Any]]) {
        func number(_ row: [String: Any]?, _ key: String, _ format: String = "%.2f") -> String {
            (row?[key] as? Double).map { String(format: format, $0) } ?? "-"
        }
        func spread(_ row: [String: Any], _ key: String, _ format: String) -> String {
            "\(number(row, key, format)) [\(number(row, "\(key)_min", format))–\(number(row, "\(key)_max", format))]"
        }
        let seeds = rows.first { isQualityRow($0) }?["seeds"] as? Int ?? 0
        var text = "speech quality, median [lowest–highest] over \(seeds) seeds of the impairments\n"
        text += "work      impl                        loss%   PESQ-WB             STOI                   kbit/s\n"
        for row in rows where isQualityRow(row) {
            let work = (row["work"] as? String ?? "").padding(toLength: 9, withPad: " ", startingAt: 0)
            let impl = (row["impl"] as? String ?? "").padding(toLength: 27, withPad: " ", startingAt: 0)
            text += "\(work) \(impl) \(number(row, "loss_pct", "%5.1f"))   \(spread(row, "pesq_wb", "%.2f"))  \(spread(row, "stoi", "%.3f"))  \(spread(row, "kbps", "%.1f"))\n"
        }
        var comparisons: [[String: Any]] = []
        for (work, _) in conditions {
            func find(_ impl: String) -> [String: Any]? { rows.first { $0["work"] as? String == work && $0["impl"] as? String == impl } }
            guard let ours = find(engine), let base = find(baseline), let ref = find(reference),
                let capped = find(engineAtReferenceRate), let matched = find(referenceAtEngineRate),
                let a = ours["pesq_wb"] as? Double, let b = base["pesq_wb"] as? Double, let r = ref["pesq_wb"] as? Double,
                let c = capped["pesq_wb"] as? Double, let m = matched["pesq_wb"] as? Double,
                let stoiOurs = ours["stoi"] as? Double, let stoiRef = ref["stoi"] as? Double, let stoiCapped = capped["stoi"] as? Double,
                let stoiMatched = matched["stoi"] as? Double
            else { continue }
            var line: [String: Any] = [
                "work": work, "impl": "ratio", "pesq_wb_ratio_vs_baseline": a / b, "pesq_wb_gain_vs_baseline": a - b,
                "pesq_wb_gain_vs_fec_reference": a - r,
                "pesq_wb_gain_at_reference_rate": c - r, "pesq_wb_gain_at_engine_rate": a - m,
                "stoi_gain_at_reference_rate": stoiCapped - stoiRef, "stoi_gain_at_engine_rate": stoiOurs - stoiMatched,
                "stoi_gain_vs_fec_reference": stoiOurs - stoiRef,
            ]
            text += "  -> \(work): PESQ-WB \(number(ours, "pesq_wb")) at \(number(ours, "kbps", "%.1f")) kbit/s vs the baseline "
            text += "\(number(base, "pesq_wb")) at \(number(base, "kbps", "%.1f")) (×\(String(format: "%.2f", a / b)))\n"
            text += "     at the reference's rate: \(number(capped, "pesq_wb")) at \(number(capped, "kbps", "%.1f")) kbit/s vs "
            text += "\(number(ref, "pesq_wb")) at \(number(ref, "kbps", "%.1f")) (\(String(format: "%+.2f", c - r))); "
            text += "at the engine's rate: \(number(ours, "pesq_wb")) vs \(number(matched, "pesq_wb")) at \(number(matched, "kbps", "%.1f")) "
            text += "(\(String(format: "%+.2f", a - m))); STOI \(number(capped, "stoi", "%.3f")) vs \(number(ref, "stoi", "%.3f")), "
            text += "\(number(ours, "stoi", "%.3f")) vs \(number(matched, "stoi", "%.3f"))"
            if lossyConditions.contains(work) {
                let pesqMet = c - r >= targetGain
                // STOI never below the reference's: at its rate, at the engine's, and as each runs.
                let stoiMet = stoiCapped >= stoiRef && stoiOurs >= stoiMatched && stoiOurs >= stoiRef
                line["pesq_target"] = pesqMet ? "met" : "missed"
                line["stoi_target"] = stoiMet ? "met" : "missed"
                text += "\n     targets: PESQ-WB at the reference's rate ≥ reference \(String(format: "%+.1f", targetGain)): "
                text += "\(pesqMet ? "met" : "missed"); STOI never below the reference's: \(stoiMet ? "met" : "missed")"
            }
            text += "\n"
            comparisons.append(line)
        }
        return (text, comparisons)
    }
}
