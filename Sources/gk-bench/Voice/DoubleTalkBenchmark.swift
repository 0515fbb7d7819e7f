import Foundation
import GameKitVoiceEngine

/// Double talk at several points of a call: a second talker starts over the far end 0 (both from
/// the first word), 1, 10 and 60 s in, for 5 s, with the benchmark's room as the echo path and
/// with none (a headset, WAV files); scored is what the far end hears of the near talker
/// meanwhile (PESQ-WB against the near talker alone), for each canceller.
enum DoubleTalkBenchmark {
    /// When the double talk starts, in seconds into the call.
    static let seconds = [0, 1, 10, 60]
    /// Issue 29's target: each side hears the other at least this well while both talk.
    static let targetPESQ = 3.0

    /// One row per canceller and echo path: `pesq_wb_at_<s>s`, `stoi_at_<s>s` and
    /// `atten_db_at_<s>s` for each start (a stretch PESQ could not score counts as 1.0, the floor).
    static func rows(
        cancellers: [(String, () throws -> EchoCanceller)], far: [Int16], near: [Int16], quality: SpeechQuality, seconds: [Int] = Self.seconds
    ) throws -> [[String: Any]] {
        var rows: [[String: Any]] = []
        for (name, make) in cancellers {
            for (pathName, path) in [("room", EchoMeasurement.EchoPath()), ("none", EchoMeasurement.EchoPath.none)] {
                var row: [String: Any] = ["work": "double-talk", "impl": name, "echo": pathName]
                var worst = Double.infinity
                let results = try seconds.map { second in
                    try EchoMeasurement.run(canceller: try make(), far: far, near: near, path: path, doubleTalkAt: second)
                }
                let scores = try quality.measure(
                    zip(seconds, results).map { second, result in
                        .init(reference: result.doubleTalkReference, degraded: result.doubleTalkOutput, name: "dt-\(name)-\(pathName)-\(second)")
                    })
                for (second, (result, score)) in zip(seconds, zip(results, scores)) {
                    worst = min(worst, score.pesq)
                    row["pesq_wb_at_\(second)s"] = score.pesq
                    row["stoi_at_\(second)s"] = score.stoi
                    row["atten_db_at_\(second)s"] = result.doubleTalkAttenuationDecibels
                }
                row["pesq_wb_worst"] = worst
                rows.append(row)
            }
        }
        return rows
    }

    /// The rows as a table, each with its verdict against ``targetPESQ`` computed from the row.
    static func table(_ rows: [[String: Any]]) -> String {
        var text = "double talk (5 s, what the far end hears of the near talker): PESQ-WB / attenuation dB at "
        text += seconds.map { "\($0) s" }.joined(separator: ", ") + "\n"
        for row in rows where row["work"] as? String == "double-talk" {
            let impl = (row["impl"] as? String ?? "").padding(toLength: 17, withPad: " ", startingAt: 0)
            let echo = (row["echo"] as? String ?? "").padding(toLength: 5, withPad: " ", startingAt: 0)
            text += "  \(impl) echo \(echo)"
            for second in seconds where row["pesq_wb_at_\(second)s"] != nil {
                let pesq = row["pesq_wb_at_\(second)s"] as? Double ?? 1
                let attenuation = row["atten_db_at_\(second)s"] as? Double ?? .nan
                text += "  \(String(format: "%.2f", pesq)) / \(String(format: "%5.1f", attenuation))"
            }
            let worst = row["pesq_wb_worst"] as? Double ?? 1
            text += "  -> worst \(String(format: "%.2f", worst)): \(worst >= targetPESQ ? "met" : "missed") (target \(targetPESQ))\n"
        }
        return text
    }
}
