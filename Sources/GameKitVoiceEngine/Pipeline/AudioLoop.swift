import Foundation

/// What an `AudioLoop` drives: one microphone frame in, one loudspeaker frame out
/// (`VoiceEngine`, `GroupVoiceEngine`).
public protocol VoiceFrameProcessor: AnyObject, Sendable {
    /// The frame format.
    var format: VoiceFormat { get }
    /// Processes one microphone frame at time `now` and returns the frame for the loudspeaker.
    func process(microphone: [Int16], atMilliseconds now: Int64) throws(VoiceEngineError) -> [Int16]
}

/// Drives a voice engine from audio devices on a thread of its own: read a microphone frame,
/// process it, play the returned frame, repeat, until stopped or the microphone ends.
public final class AudioLoop: @unchecked Sendable {
    private let engine: any VoiceFrameProcessor
    private let capture: AudioCaptureDevice
    private let playback: AudioPlaybackDevice
    private let clock: VoiceClock
    private let lock = NSLock()
    private var stopping = false
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    private var failure: VoiceEngineError?
    private var frames = 0
    private var ended = false
    /// Set by ``shutDown()``: the devices are closed (the playback one by the loop, at its end).
    private var closing = false
    private var onEnd: (@Sendable (VoiceEngineError?) -> Void)?

    /// A loop for `engine` between `capture` and `playback`, timing arrivals with `clock`.
    public init(engine: any VoiceFrameProcessor, capture: AudioCaptureDevice, playback: AudioPlaybackDevice, clock: VoiceClock = MonotonicVoiceClock()) {
        self.engine = engine
        self.capture = capture
        self.playback = playback
        self.clock = clock
    }

    /// Starts the thread (once; not after ``stop()``). `onEnd`, if given, runs on the loop's
    /// thread once the loop has ended (stopped, microphone ended, or a device failed), with the
    /// failure if any: nothing waits for the loop on a thread of its own, or of a shared pool.
    public func start(onEnd: (@Sendable (VoiceEngineError?) -> Void)? = nil) {
        lock.withLock {
            guard thread == nil, !stopping else { return }
            self.onEnd = onEnd
            let thread = Thread { [self] in run() }
            thread.name = "ogk-voice-audio"
            thread.qualityOfService = .userInteractive
            self.thread = thread
            thread.start()
        }
    }

    /// Frames processed so far.
    public var framesProcessed: Int { lock.withLock { frames } }

    /// Asks the loop to stop after its current frame.
    public func stop() { lock.withLock { stopping = true } }

    /// Stops the loop and closes both devices, without blocking the caller: the capture device
    /// at once (a read blocked in it returns), the playback device once the loop has ended (both
    /// at once for a loop that never ran). The closing happens on a thread of its own and on the
    /// loop's: closing a PulseAudio stream can block. Once is enough; later calls do nothing.
    public func shutDown() {
        let (started, ended, first) = lock.withLock { () -> (Bool, Bool, Bool) in
            defer { (stopping, closing) = (true, true) }
            return (thread != nil, self.ended, !closing)
        }
        guard first else { return }
        let (capture, playback) = (self.capture, self.playback)
        let closesPlayback = !started || ended
        Thread.detachNewThread {
            capture.close()
            if closesPlayback { playback.close() }
        }
    }

    /// Waits until the loop has ended (stopped, microphone ended, or a device failed) and
    /// returns the failure, if any; at once for a loop stopped before it started. Closes
    /// neither device. It blocks the calling thread (as long as the loop runs, for a loop not
    /// stopped): for a thread of the caller's own, never a shared pool's (`start(onEnd:)` hears
    /// the end without a waiting thread).
    @discardableResult
    public func wait() -> VoiceEngineError? {
        if lock.withLock({ thread == nil && stopping }) { return nil }
        finished.wait()
        finished.signal()
        return lock.withLock { failure }
    }

    private func run() {
        let count = engine.format.samplesPerFrame
        do {
            while !lock.withLock({ stopping }) {
                guard let microphone = try capture.read(count: count) else { break }
                let speaker = try engine.process(microphone: microphone, atMilliseconds: clock.milliseconds())
                try playback.write(speaker)
                lock.withLock { frames += 1 }
            }
        } catch {
            lock.withLock { failure = error }
        }
        // A shutDown() that came first left the playback device to close here, after the last
        // frame was written to it.
        let (closesPlayback, outcome, handler) = lock.withLock { () -> (Bool, VoiceEngineError?, (@Sendable (VoiceEngineError?) -> Void)?) in
            ended = true
            defer { self.onEnd = nil }
            return (closing, self.failure, self.onEnd)
        }
        if closesPlayback { playback.close() }
        finished.signal()
        handler?(outcome)
    }
}
