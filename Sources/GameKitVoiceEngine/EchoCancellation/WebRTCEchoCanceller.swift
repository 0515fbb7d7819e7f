import CWebRTCShim

/// webrtc-audio-processing 0.3's echo canceller (AEC with the extended filter and delay-agnostic
/// alignment; moderate suppression by default) with its noise suppressor and high-pass filter, on 10 ms frames.
public final class WebRTCEchoCanceller: EchoCanceller {
    private let apm: OpaquePointer
    private let delayHint: Int32

    /// How hard the canceller's non-linear stage suppresses what echo is left. Higher removes
    /// more echo and more of the local talker during double talk.
    public enum Suppression: Int32, Sendable, CaseIterable {
        case low = 0, moderate = 1, high = 2
    }

    /// Creates the canceller. `delayHintMilliseconds` is the expected delay from playing a
    /// sample to hearing it (device buffers); the delay-agnostic mode finds the rest.
    public init(
        delayHintMilliseconds: Int = 0, suppression: Suppression = .moderate, noiseSuppression: Bool = true
    ) throws(VoiceEngineError) {
        guard let apm = ogk_apm_create(Int32(VoiceFormat.sampleRate), suppression.rawValue, noiseSuppression ? 1 : 0) else {
            throw .echoCanceller("webrtc AudioProcessing refused the configuration")
        }
        self.apm = apm
        delayHint = Int32(max(0, min(500, delayHintMilliseconds)))
    }

    deinit { ogk_apm_destroy(apm) }

    public var frameSize: Int { VoiceFormat.samplesPer10ms }

    public func process(near: [Int16], far: [Int16]) throws(VoiceEngineError) -> [Int16] {
        let count = VoiceFormat.samplesPer10ms
        guard near.count == count else { throw .wrongFrameSize(expected: count, got: near.count) }
        guard far.count == count else { throw .wrongFrameSize(expected: count, got: far.count) }
        let farStatus = far.withUnsafeBufferPointer { ogk_apm_analyze_far(apm, $0.baseAddress, Int32(count)) }
        guard farStatus == 0 else { throw .echoCanceller("far-end frame refused (\(farStatus))") }
        var cleaned = near
        let status = cleaned.withUnsafeMutableBufferPointer {
            ogk_apm_process_near(apm, $0.baseAddress, Int32(count), delayHint)
        }
        // Error -11 (stream delay unset/out of range warning) still processes the frame.
        guard status == 0 || status == -11 else { throw .echoCanceller("near-end frame refused (\(status))") }
        return cleaned
    }
}
