/// Removes the loudspeaker's echo from the microphone.
///
/// Called once per 10 ms with the frame the loudspeaker is playing (`far`) and the frame the
/// microphone heard at the same moment (`near`); returns the cleaned microphone frame. Frames are
/// `frameSize` samples. Implementations are not thread-safe: one caller at a time.
public protocol EchoCanceller: AnyObject {
    /// Samples per frame this canceller takes: 160 (10 ms) or 320 (20 ms).
    var frameSize: Int { get }

    /// The cleaned microphone frame.
    func process(near: [Int16], far: [Int16]) throws(VoiceEngineError) -> [Int16]
}

/// The echo cancellers the engine can use.
public enum EchoCancellerKind: String, Sendable, CaseIterable {
    /// webrtc-audio-processing 0.3's AEC (extended filter, delay-agnostic, moderate
    /// suppression) with its noise suppressor: converges within a second, but cuts into the
    /// local talker during double talk.
    case webrtc
    /// speexdsp's MDF canceller (200 ms tail, 20 ms frames) with its preprocessor's residual
    /// echo and noise suppression, and a ``StartupEchoSuppressor`` until its filter converges:
    /// the default, because it keeps the local talker intact in double talk once converged (the
    /// README's echo cancellation figures).
    case speex
    /// No echo cancellation (headphones, tests).
    case none

    /// A new canceller of this kind.
    public func make(echoDelayHintMilliseconds: Int = 0) throws(VoiceEngineError) -> EchoCanceller {
        switch self {
        case .webrtc: try WebRTCEchoCanceller(delayHintMilliseconds: echoDelayHintMilliseconds)
        case .speex: try SpeexEchoCanceller()
        case .none: PassThroughEchoCanceller()
        }
    }
}

/// Returns the microphone unchanged.
public final class PassThroughEchoCanceller: EchoCanceller {
    public init() {}
    public var frameSize: Int { VoiceFormat.samplesPer10ms }
    public func process(near: [Int16], far: [Int16]) throws(VoiceEngineError) -> [Int16] {
        for frame in [near, far] where frame.count != frameSize {
            throw .wrongFrameSize(expected: frameSize, got: frame.count)
        }
        return near
    }
}
