import ArgumentParser
import Foundation
import GameKitVoiceEngine

/// PESQ-WB and STOI through Tests/Peers/voice_quality.py.
struct SpeechQuality {
    let python: String
    /// Where the pairs are written for the script.
    let workspace: String
    /// Whether the pairs stay there after scoring (`gk-bench voice --keep-audio`).
    var keepsFiles = false

    struct Score {
        /// PESQ-WB; 1.0, the scale's floor, when PESQ could not score the signal (it found no
        /// speech in it: a listener that heard nothing), so that such a listener counts as the
        /// worst, never vanishes.
        var pesq: Double
        /// Whether PESQ scored it (false: `pesq` is the floor).
        var pesqScored: Bool
        /// STOI with each utterance aligned on its own (a playout delay that moves is not lost
        /// intelligibility).
        var stoi: Double
        /// STOI under the one global alignment.
        var stoiGlobal: Double
        var delayMilliseconds: Double
        /// How far the utterances' own alignments spread, in ms.
        var delaySpreadMilliseconds: Double
    }

    /// One pair to score; `name` names its files.
    struct Pair {
        var reference: [Int16]
        var degraded: [Int16]
        var name: String
    }

    func measure(reference: [Int16], degraded: [Int16], name: String) throws -> Score {
        try self.measure([Pair(reference: reference, degraded: degraded, name: name)])[0]
    }

    /// Scores every pair in one run of the script (its start, with numpy and the two libraries,
    /// costs about as much as scoring a pair), in order.
    func measure(_ pairs: [Pair]) throws -> [Score] {
        guard !pairs.isEmpty else { return [] }
        var arguments = ["Tests/Peers/voice_quality.py"]
        for pair in pairs {
            let referencePath = "\(workspace)/\(pair.name)-ref.wav"
            let degradedPath = "\(workspace)/\(pair.name)-deg.wav"
            try WAVFile.write(pair.reference, path: referencePath)
            try WAVFile.write(pair.degraded, path: degradedPath)
            arguments += [referencePath, degradedPath]
        }
        defer {
            if !self.keepsFiles {
                for path in arguments.dropFirst() { try? FileManager.default.removeItem(atPath: path) }
            }
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = arguments
        let data = try process.runCollectingOutput()
        process.waitUntilExit()
        let names = pairs.map(\.name).joined(separator: ", ")
        guard process.terminationStatus == 0 else { throw ValidationError("voice_quality.py failed for \(names) (is \(python) the peers venv?)") }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        guard lines.count == pairs.count else {
            throw ValidationError("voice_quality.py scored \(lines.count) of \(pairs.count) pairs (\(names))")
        }
        return try zip(lines, pairs).map { line, pair in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let stoi = object["stoi"] as? Double
            else { throw ValidationError("voice_quality.py gave no STOI for \(pair.name): \(line)") }
            let pesq = object["pesq_wb"] as? Double
            return Score(
                pesq: pesq ?? 1, pesqScored: pesq != nil, stoi: stoi, stoiGlobal: object["stoi_global"] as? Double ?? stoi,
                delayMilliseconds: object["delay_ms"] as? Double ?? 0, delaySpreadMilliseconds: object["delay_spread_ms"] as? Double ?? 0)
        }
    }
}
