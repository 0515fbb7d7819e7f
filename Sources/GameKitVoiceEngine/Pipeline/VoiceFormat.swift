import Foundation
/// The audio format of the voice engine: mono, 16-bit samples at 16 kHz, in frames of 10 or 20 ms.
///
/// 16 kHz is wideband speech: it carries everything up to 8 kHz, where nearly all of speech's
/// intelligibility lies; it is the rate PESQ-WB and STOI measure at; Opus codes it in its SILK
/// mode, whose in-band FEC is what recovers lost packets; and echo cancellation costs a third of
/// what it costs at 48 kHz.
public struct VoiceFormat: Sendable, Hashable {
    /// Samples per second.
    public static let sampleRate = 16_000

    /// The length of one frame in milliseconds: 10 or 20.
    public let frameMilliseconds: Int

    /// Creates a format with frames of `frameMilliseconds` (10 or 20).
    public init(frameMilliseconds: Int = 20) throws(VoiceEngineError) {
        guard frameMilliseconds == 10 || frameMilliseconds == 20 else {
            throw .invalidConfiguration("frames are 10 or 20 ms, not \(frameMilliseconds)")
        }
        self.frameMilliseconds = frameMilliseconds
    }

    /// 20 ms frames.
    public static let standard = try! VoiceFormat(frameMilliseconds: 20)

    /// Samples in one frame.
    public var samplesPerFrame: Int { VoiceFormat.sampleRate / 1000 * frameMilliseconds }

    /// Samples in 10 ms, the unit echo cancellers work in.
    public static let samplesPer10ms = sampleRate / 100
}

/// Errors of the voice engine.
public enum VoiceEngineError: Error, Equatable, CustomStringConvertible {
    /// A setting is out of range.
    case invalidConfiguration(String)
    /// libopus refused a call; the code is Opus's and the text its description.
    case opus(code: Int32, message: String)
    /// An echo canceller could not be made or refused a frame.
    case echoCanceller(String)
    /// A frame had the wrong number of samples.
    case wrongFrameSize(expected: Int, got: Int)
    /// An audio device failed; the text says which and why.
    case device(String)
    /// A WAV file could not be read or written.
    case wavFile(String)

    public var description: String {
        switch self {
        case .invalidConfiguration(let why): "invalid voice configuration: \(why)"
        case .opus(let code, let message): "opus error \(code): \(message)"
        case .echoCanceller(let why): "echo canceller: \(why)"
        case .wrongFrameSize(let expected, let got): "frame of \(got) samples, expected \(expected)"
        case .device(let why): "audio device: \(why)"
        case .wavFile(let why): "WAV file: \(why)"
        }
    }
}

extension VoiceEngineError: LocalizedError {
    /// What failed, in a sentence (the error's `localizedDescription`).
    public var errorDescription: String? {
        let text = self.description
        return text.prefix(1).uppercased() + text.dropFirst() + (text.hasSuffix(".") ? "" : ".")
    }
}
