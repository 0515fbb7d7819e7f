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
}
