import CSpeexDSP

/// speexdsp's echo canceller with a 200 ms tail, followed by its preprocessor (residual echo
/// suppression and noise suppression), on 20 ms frames at 16 kHz, and, until its filter has
/// converged, a ``StartupEchoSuppressor``.
public final class SpeexEchoCanceller: EchoCanceller {
    private let echo: OpaquePointer
    private let preprocess: OpaquePointer
    private var output: [Int16]
    /// The start-up suppressor's state (nil when switched off).
    public private(set) var startupSuppressor: StartupEchoSuppressor?
    /// Samples per frame: 10 or 20 ms.
    public let frameSize: Int

    /// Creates the canceller with a tail of `tailMilliseconds` (at least 20); `startupSuppression`
    /// (nil: none) holds the echo down until the filter has converged, its window set to the tail. The residual echo
    /// suppressor removes at most `echoSuppressDecibels` of what the filter leaves while only the
    /// far end talks, and `echoSuppressActiveDecibels` while the near end talks too (speexdsp's
    /// defaults: −40 and −15).
    public init(
        tailMilliseconds: Int = 200, frameMilliseconds: Int = 20, noiseSuppression: Bool = true, echoSuppressDecibels: Int = -40,
        echoSuppressActiveDecibels: Int = -15, startupSuppression: StartupEchoSuppressor? = StartupEchoSuppressor()
    ) throws(VoiceEngineError) {
        guard frameMilliseconds == 10 || frameMilliseconds == 20 else { throw .invalidConfiguration("speex frames of \(frameMilliseconds) ms") }
        frameSize = VoiceFormat.samplesPer10ms * frameMilliseconds / 10
        if var suppressor = startupSuppression {
            // The echo path the window covers: the tail, in frames (and one more).
            suppressor.windowFrames = tailMilliseconds / frameMilliseconds + 1
            suppressor.tailMilliseconds = tailMilliseconds
            startupSuppressor = suppressor
        }
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
        var suppress = Int32(echoSuppressDecibels)
        speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_ECHO_SUPPRESS, &suppress)
        var suppressActive = Int32(echoSuppressActiveDecibels)
        speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_ECHO_SUPPRESS_ACTIVE, &suppressActive)
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
        return startupSuppressor?.process(near: near, far: far, output: output) ?? output
    }
}
