import Foundation
import GameKitVoiceEngine
import Testing

/// The engine's errors read as sentences (`localizedDescription`), naming the device or file.
@Suite("Voice engine error text")
struct ErrorTextTests {
    @Test func errorsAreSentences() {
        #expect(VoiceEngineError.device("no PulseAudio server at unix:/x").localizedDescription == "Audio device: no PulseAudio server at unix:/x.")
        #expect(VoiceEngineError.wrongFrameSize(expected: 320, got: 10).localizedDescription == "Frame of 10 samples, expected 320.")
    }

    @Test func aMissingWAVFileIsNamedAsMissing() {
        #expect(throws: VoiceEngineError.wavFile("/nonexistent/in.wav does not exist")) {
            _ = try WAVFileCaptureDevice(path: "/nonexistent/in.wav", pacing: .asFastAsPossible)
        }
    }

    /// A WAV file's 44-byte header: PCM `format`, `channels`, `rate` Hz, `bits` per sample.
    static func header(format: UInt16 = 1, channels: UInt16 = 1, rate: UInt32, bits: UInt16 = 16, dataBytes: UInt32 = 0) -> [UInt8] {
        func le32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        func le16(_ value: UInt16) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        let blockAlign = channels * bits / 8
        return Array("RIFF".utf8) + le32(36 + dataBytes) + Array("WAVE".utf8) + Array("fmt ".utf8) + le32(16)
            + le16(format) + le16(channels) + le32(rate) + le32(rate * UInt32(blockAlign)) + le16(blockAlign) + le16(bits)
            + Array("data".utf8) + le32(dataBytes)
    }

    /// Writes `bytes` to a file of its own and returns its path.
    static func file(_ bytes: [UInt8]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-\(UUID().uuidString).wav").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aWAVFileAtTheWrongRateOrDepthSaysHowToConvertIt() throws {
        let fast = try Self.file(Self.header(rate: 44_100, dataBytes: 4) + [0, 0, 0, 0])
        defer { try? FileManager.default.removeItem(atPath: fast) }
        #expect(throws: VoiceEngineError.wavFile("\(fast) is at 44100 Hz, but the engine runs at 16000 Hz (convert it: sox \(fast) -r 16000 -c 1 -b 16 out.wav)")) {
            _ = try WAVFileCaptureDevice(path: fast, pacing: .asFastAsPossible)
        }
        let eightBit = try Self.file(Self.header(rate: 16_000, bits: 8, dataBytes: 2) + [0, 0])
        defer { try? FileManager.default.removeItem(atPath: eightBit) }
        #expect(throws: VoiceEngineError.wavFile("\(eightBit) is not 16-bit PCM (format 1, 8 bits; convert it: sox \(eightBit) -r 16000 -c 1 -b 16 out.wav)")) {
            _ = try WAVFile.read(path: eightBit)
        }
        let text = try Self.file(Array("not a sound".utf8))
        defer { try? FileManager.default.removeItem(atPath: text) }
        #expect(throws: VoiceEngineError.wavFile("\(text) is not a RIFF/WAVE file")) { _ = try WAVFile.read(path: text) }
        // The right format reads.
        let good = try Self.file(Self.header(rate: 16_000, dataBytes: 4) + [1, 0, 2, 0])
        defer { try? FileManager.default.removeItem(atPath: good) }
        #expect(try WAVFile.read(path: good) == [1, 2])
    }

    @Test func aPulseAudioServerThatIsNotThereIsNamedWithTheReason() throws {
        guard PulseAudioDevice.isAvailable else { return }
        do {
            _ = try PulseAudioDevice(.capture, device: "mic", server: "unix:/nonexistent/pulse-socket")
            Issue.record("a stream opened on a server that does not exist")
        } catch {
            #expect(error.localizedDescription.hasPrefix("Audio device: PulseAudio mic capture: "), "\(error.localizedDescription)")
            #expect(error.localizedDescription.count > "Audio device: PulseAudio mic capture: .".count)
        }
    }
}
