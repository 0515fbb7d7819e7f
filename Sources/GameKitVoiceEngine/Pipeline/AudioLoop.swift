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

    /// A loop for `engine` between `capture` and `playback`, timing arrivals with `clock`.
    public init(engine: any VoiceFrameProcessor, capture: AudioCaptureDevice, playback: AudioPlaybackDevice, clock: VoiceClock = MonotonicVoiceClock()) {
        self.engine = engine
        self.capture = capture
        self.playback = playback
        self.clock = clock
    }

    /// Starts the thread (once; not after ``stop()``).
    public func start() {
        lock.withLock {
            guard thread == nil, !stopping else { return }
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

    /// Waits until the loop has ended (stopped, microphone ended, or a device failed) and
    /// returns the failure, if any; at once for a loop stopped before it started. Closes
    /// neither device.
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
        finished.signal()
    }
}
