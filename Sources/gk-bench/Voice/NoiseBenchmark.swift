import ArgumentParser
import Foundation
import GameKitVoiceEngine
import NetworkImpairment

/// The noise rows of `gk-bench voice`: a talker in a noisy place, with the noise suppressor on
/// (the default canceller, whose suppressor runs while the microphone's noise floor is at or above
/// its gate) and off (`SpeexEchoCanceller(noiseSuppression: false)`).
///
/// The microphone is the reference speech plus noise at 10 and 0 dB SNR (the speech's power over
/// its active frames, above −50 dBFS, against the noise's over the whole signal):
/// - `stationary`: pink noise from sox (`synth pinknoise`, `-R`: the same samples every run),
///   each seed a stretch of it at another offset;
/// - `babble`: six talkers at once, each the reference speech from a seeded offset (circularly),
///   every other one reversed so that no word can be followed.
///
/// It goes through the canceller with a silent far end, then the engine's sender and receiver on
/// a clean path (`VoiceStreamSimulation`); scored against the clean speech. Median and spread over
/// the seeds, the same noise for both settings.
enum NoiseBenchmark {
    static let noises = ["stationary", "babble"]
    static let snrs = [10, 0]

    static func rows(speech: [Int16], quality: SpeechQuality, seeds: [UInt64], workspace: String) throws -> [[String: Any]] {
        let pink = try Self.pinkNoise(samples: speech.count * 2, workspace: workspace)
        var rows: [[String: Any]] = []
        for noise in noises {
            for snr in snrs {
                var pairs: [String: [SpeechQuality.Pair]] = ["on": [], "off": []]
                for seed in seeds {
                    let background = noise == "stationary"
                        ? Self.stretch(of: pink, count: speech.count, seed: seed) : Self.babble(from: speech, seed: seed)
                    let microphone = Self.mix(speech, background, snrDecibels: Double(snr))
                    for setting in ["on", "off"] {
                        let canceller = try SpeexEchoCanceller(noiseSuppression: setting == "on")
                        let sent = try Self.cancel(microphone, with: canceller)
                        let simulation = VoiceStreamSimulation(pipeline: .opengamekit, impairment: ImpairmentProfile(), seed: seed)
                        let played = try simulation.run(speech: sent).played
                        pairs[setting]!.append(.init(reference: speech, degraded: played, name: "noise-\(noise)-\(snr)dB-\(setting)-\(seed)"))
                    }
                }
                // Both settings' pairs in one batch, shared among the scoring servers.
                let scored = try quality.measure(pairs["on"]! + pairs["off"]!)
                for setting in ["on", "off"] {
                    let scores = setting == "on" ? Array(scored.prefix(seeds.count)) : Array(scored.suffix(seeds.count))
                    var row: [String: Any] = [
                        "work": "noise", "noise": noise, "snr_db": snr, "noise_suppressor": setting, "impl": "opengamekit",
                        "noise_seeds": seeds.count,
                    ]
                    QualityBenchmark.summarise(scores.map(\.pesq), as: "pesq_wb", into: &row)
                    QualityBenchmark.summarise(scores.map(\.stoi), as: "stoi", into: &row)
                    rows.append(row)
                }
            }
        }
        return rows
    }

    /// The microphone through the canceller, frame by frame, with a silent far end.
    static func cancel(_ microphone: [Int16], with canceller: SpeexEchoCanceller) throws -> [Int16] {
        let size = canceller.frameSize
        let silence = [Int16](repeating: 0, count: size)
        var out: [Int16] = []
        out.reserveCapacity(microphone.count)
        var start = 0
        while start < microphone.count {
            var frame = Array(microphone[start..<min(microphone.count, start + size)])
            frame += [Int16](repeating: 0, count: size - frame.count)
            out += try canceller.process(near: frame, far: silence)
            start += size
        }
        return Array(out.prefix(microphone.count))
    }

    /// `speech` plus `noise` scaled to `snrDecibels` below the speech's active power.
    static func mix(_ speech: [Int16], _ noise: [Int16], snrDecibels: Double) -> [Int16] {
        let frame = VoiceFormat.standard.samplesPerFrame
        var active = 0.0, activeCount = 0
        for start in stride(from: 0, to: speech.count - frame + 1, by: frame) {
            let samples = Array(speech[start..<start + frame])
            guard LevelMeter.level(of: samples) > -50 else { continue }
            active += samples.reduce(0.0) { $0 + Double($1) * Double($1) }
            activeCount += frame
        }
        let speechPower = active / Double(max(1, activeCount))
        let noisePower = noise.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, noise.count))
        let gain = noisePower > 0 ? (speechPower / pow(10, snrDecibels / 10) / noisePower).squareRoot() : 0
        return speech.indices.map { Int16(clamping: Int((Double(speech[$0]) + gain * Double(noise[$0 % noise.count])).rounded())) }
    }

    /// `count` samples of `noise` from an offset `seed` chooses.
    static func stretch(of noise: [Int16], count: Int, seed: UInt64) -> [Int16] {
        var random = SeededRandom(seed: seed)
        let offset = Int.random(in: 0..<max(1, noise.count - count), using: &random)
        return Array(noise[offset..<offset + count])
    }

    /// Six talkers: the speech from six seeded offsets, every other one reversed.
    static func babble(from speech: [Int16], seed: UInt64, talkers: Int = 6) -> [Int16] {
        var random = SeededRandom(seed: seed &+ 0x0BAB_B1E)
        var sum = [Double](repeating: 0, count: speech.count)
        for talker in 0..<talkers {
            let offset = Int.random(in: 0..<speech.count, using: &random)
            for index in speech.indices {
                let source = (index + offset) % speech.count
                sum[index] += Double(talker % 2 == 0 ? speech[source] : speech[speech.count - 1 - source])
            }
        }
        return sum.map { Int16(clamping: Int(($0 / Double(talkers)).rounded())) }
    }

    /// Pink noise from sox, the same every run (`-R`), at a tenth of full scale.
    static func pinkNoise(samples: Int, workspace: String) throws -> [Int16] {
        let path = "\(workspace)/pink.wav"
        let seconds = String(format: "%.3f", Double(samples) / Double(VoiceFormat.sampleRate))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sox", "-R", "-q", "-n", "-r", "16000", "-c", "1", "-b", "16", path, "synth", seconds, "pinknoise", "vol", "0.1"]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ValidationError("sox could not make pink noise") }
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try WAVFile.read(path: path)
    }

    /// The rows as a table, with each setting's difference (on − off).
    static func table(_ rows: [[String: Any]]) -> String {
        let noise = rows.filter { $0["work"] as? String == "noise" }
        guard let first = noise.first else { return "" }
        func number(_ row: [String: Any]?, _ key: String, _ format: String) -> String {
            (row?[key] as? Double).map { String(format: format, $0) } ?? "-"
        }
        var text = "noise (speech + noise at the SNR, the default canceller with its noise suppressor on or off, a clean path),\n"
        text += "median [lowest–highest] over \(first["noise_seeds"] as? Int ?? 0) seeds\n"
        text += "noise        SNR dB  suppressor  PESQ-WB             STOI\n"
        for row in noise {
            text += (row["noise"] as? String ?? "").padding(toLength: 12, withPad: " ", startingAt: 0)
            text += " \(String(format: "%6d", row["snr_db"] as? Int ?? 0))  "
            text += (row["noise_suppressor"] as? String ?? "").padding(toLength: 10, withPad: " ", startingAt: 0)
            text += "  \(number(row, "pesq_wb", "%.2f")) [\(number(row, "pesq_wb_min", "%.2f"))–\(number(row, "pesq_wb_max", "%.2f"))]"
            text += "  \(number(row, "stoi", "%.3f")) [\(number(row, "stoi_min", "%.3f"))–\(number(row, "stoi_max", "%.3f"))]\n"
        }
        for kind in noises {
            for snr in snrs {
                let pair = noise.filter { $0["noise"] as? String == kind && $0["snr_db"] as? Int == snr }
                guard let on = pair.first(where: { $0["noise_suppressor"] as? String == "on" }),
                    let off = pair.first(where: { $0["noise_suppressor"] as? String == "off" }),
                    let pesqOn = on["pesq_wb"] as? Double, let pesqOff = off["pesq_wb"] as? Double,
                    let stoiOn = on["stoi"] as? Double, let stoiOff = off["stoi"] as? Double
                else { continue }
                text += "  -> \(kind) at \(snr) dB: the suppressor gives PESQ-WB \(String(format: "%+.2f", pesqOn - pesqOff)), "
                text += "STOI \(String(format: "%+.3f", stoiOn - stoiOff))\n"
            }
        }
        return text
    }
}
