import Foundation
import GameKitVoiceEngine
import NetworkImpairment

/// Signals and measurements the voice tests (engine and chat service) share.
public enum VoiceTestSupport {
    public static let rate = VoiceFormat.sampleRate

    /// The repository root (tests run from it under `swift test`).
    public static var root: String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }

    /// A sine of `frequency` Hz whose peaks are at `dBFS` (AES17: its meter reading).
    public static func sine(frequency: Double, dBFS: Double, seconds: Double, phase: Double = 0) -> [Int16] {
        let amplitude = 32767 * pow(10, dBFS / 20)
        return (0..<Int(seconds * Double(rate))).map {
            Int16((amplitude * sin(2 * .pi * frequency * Double($0) / Double(rate) + phase)).rounded())
        }
    }

    /// The reference speech (scripts/voice-reference), made once per test process.
    public static let speechPath: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-test-speech-\(getpid()).wav").path
        run("\(root)/scripts/voice-reference", [path])
        return path
    }()

    public static func speech() throws -> [Int16] { try WAVFile.read(path: speechPath) }

    /// Runs a program to completion and returns its standard output.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String]) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        guard let data = try? process.runCollectingOutput() else { return "" }
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    public struct Quality {
        public var pesq: Double?
        /// STOI with each utterance aligned on its own.
        public var stoi: Double
        /// STOI under one global alignment.
        public var stoiGlobal: Double
        public var delayMilliseconds: Double
        /// How far the utterances' alignments spread, in ms.
        public var delaySpreadMilliseconds: Double
    }

    /// PESQ-WB and STOI of `degraded` against `reference` (Tests/Peers/voice_quality.py in the
    /// peers' venv, which scripts/test sets up).
    public static func quality(reference: [Int16], degraded: [Int16]) throws -> Quality {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-q-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try WAVFile.write(reference, path: "\(directory)/ref.wav")
        try WAVFile.write(degraded, path: "\(directory)/deg.wav")
        let output = run("\(root)/.venv/bin/python", ["\(root)/Tests/Peers/voice_quality.py", "\(directory)/ref.wav", "\(directory)/deg.wav"])
        guard let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            let stoi = object["stoi"] as? Double
        else { throw VoiceEngineError.device("voice_quality.py gave \(output)") }
        return Quality(
            pesq: object["pesq_wb"] as? Double, stoi: stoi, stoiGlobal: object["stoi_global"] as? Double ?? stoi,
            delayMilliseconds: object["delay_ms"] as? Double ?? 0, delaySpreadMilliseconds: object["delay_spread_ms"] as? Double ?? 0)
    }

    /// Level in dB of a signal (mean square relative to a full-scale sine, as the meter).
    public static func level(_ samples: ArraySlice<Int16>) -> Double {
        let meanSquare = samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, samples.count)) / (32768.0 * 32768.0)
        return 10 * log10(max(2 * meanSquare, 1e-12))
    }

    /// Level in dB (as ``level(_:)``) of the `frequency` Hz component of a signal (Goertzel).
    public static func toneLevel(_ samples: ArraySlice<Int16>, frequency: Double) -> Double {
        let coefficient = 2 * cos(2 * .pi * frequency / Double(rate))
        var (previous, beforePrevious) = (0.0, 0.0)
        for sample in samples {
            let current = Double(sample) / 32768 + coefficient * previous - beforePrevious
            (beforePrevious, previous) = (previous, current)
        }
        let power = previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious
        // A sine of amplitude A gives power (A·N/2)²; its meter reading is 20·log10(A).
        let amplitude = 2 * power.squareRoot() / Double(max(1, samples.count))
        return 20 * log10(max(amplitude, 1e-6))
    }

    /// Frames of `samples` (the last padded with silence).
    public static func frames(_ samples: [Int16], size: Int = VoiceFormat.standard.samplesPerFrame) -> [[Int16]] {
        stride(from: 0, to: samples.count, by: size).map {
            var frame = Array(samples[$0..<min(samples.count, $0 + size)])
            frame.append(contentsOf: repeatElement(0, count: size - frame.count))
            return frame
        }
    }

    /// Plays the reference speech into `sink` of `server` while recording `monitor`, and returns
    /// the recording (one more second after the speech ends).
    public static func playSpeechAndRecord(server: PrivatePulseAudioServer, into sink: String, recording monitor: String) throws -> [Int16] {
        let recording = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-rec-\(UUID().uuidString.prefix(8)).raw").path
        defer { try? FileManager.default.removeItem(atPath: recording) }
        let recorder = try server.launch("parecord", [
            "--device=\(monitor)", "--rate=16000", "--channels=1", "--format=s16le", "--latency-msec=20", "--raw", recording,
        ])
        let player = try server.launch("paplay", ["--device=\(sink)", "--latency-msec=20", speechPath])
        let played = player.wait(seconds: 60)
        Thread.sleep(forTimeInterval: 1)
        recorder.signal(SIGINT)
        recorder.wait(seconds: 5)
        guard played, let bytes = FileManager.default.contents(atPath: recording) else {
            throw VoiceEngineError.device("paplay or parecord failed")
        }
        return bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }
}
