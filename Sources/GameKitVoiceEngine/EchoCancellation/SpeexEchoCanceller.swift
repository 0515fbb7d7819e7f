import CSpeexDSP

/// speexdsp's echo canceller with a 200 ms tail, followed by its preprocessor (residual echo
/// suppression and noise suppression), on 10 ms frames at 16 kHz.
public final class SpeexEchoCanceller: EchoCanceller {
    private let echo: OpaquePointer
    private let preprocess: OpaquePointer
    private var output: [Int16]
    /// Samples per frame: 10 or 20 ms.
    public let frameSize: Int

    /// Creates the canceller with a tail of `tailMilliseconds` (at least 200).
    public init(tailMilliseconds: Int = 200, frameMilliseconds: Int = 20, noiseSuppression: Bool = true) throws(VoiceEngineError) {
        guard frameMilliseconds == 10 || frameMilliseconds == 20 else { throw .invalidConfiguration("speex frames of \(frameMilliseconds) ms") }
        frameSize = VoiceFormat.samplesPer10ms * frameMilliseconds / 10
        output = [Int16](repeating: 0, count: frameSize)
        let frame = Int32(frameSize)
        guard tailMilliseconds >= 20,
            let echo = speex_echo_state_init(frame, Int32(VoiceFormat.sampleRate / 1000 * tailMilliseconds))
        else { throw .echoCanceller("speex_echo_state_init failed") }
        guard let preprocess = speex_preprocess_state_init(frame, Int32(VoiceFormat.sampleRate)) else {
            speex_echo_state_destroy(echo)
            throw .echoCanceller("speex_preprocess_state_init failed")
        }
        self.echo = echo
        self.preprocess = preprocess
        var rate = Int32(VoiceFormat.sampleRate)
        speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate)
        speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_ECHO_STATE, UnsafeMutableRawPointer(echo))
        var on: Int32 = noiseSuppression ? 1 : 0
        speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_DENOISE, &on)
    }

    deinit {
        speex_preprocess_state_destroy(preprocess)
        speex_echo_state_destroy(echo)
    }

    public func process(near: [Int16], far: [Int16]) throws(VoiceEngineError) -> [Int16] {
        let count = frameSize
        guard near.count == count else { throw .wrongFrameSize(expected: count, got: near.count) }
        guard far.count == count else { throw .wrongFrameSize(expected: count, got: far.count) }
        near.withUnsafeBufferPointer { nearPointer in
            far.withUnsafeBufferPointer { farPointer in
                output.withUnsafeMutableBufferPointer { out in
                    speex_echo_cancellation(echo, nearPointer.baseAddress, farPointer.baseAddress, out.baseAddress)
                    _ = speex_preprocess_run(preprocess, out.baseAddress)
                }
            }
        }
        return output
    }
}
