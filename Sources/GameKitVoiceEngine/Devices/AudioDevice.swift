import Foundation

/// An audio device the engine reads from or plays to: mono 16-bit samples at 16 kHz.
///
/// Devices are used by one thread at a time (the `AudioLoop`'s); `close()` may come from any.
public protocol AudioDevice: AnyObject, Sendable {
    /// A name for logs and screens.
    var name: String { get }
    /// Releases the device. Further reads end and writes fail.
    func close()
}

/// A microphone.
public protocol AudioCaptureDevice: AudioDevice {
    /// The next `count` samples, blocking as a real device does (real-time sources pace the
    /// caller); nil once the source has ended.
    func read(count: Int) throws(VoiceEngineError) -> [Int16]?
}

/// A loudspeaker.
public protocol AudioPlaybackDevice: AudioDevice {
    /// Plays `samples`, blocking while the device's buffer is full.
    func write(_ samples: [Int16]) throws(VoiceEngineError)
}

/// A source of milliseconds for packet arrival times.
public protocol VoiceClock: Sendable {
    /// Milliseconds since an arbitrary start, never going back.
    func milliseconds() -> Int64
}

/// The system's monotonic clock.
public struct MonotonicVoiceClock: VoiceClock {
    public init() {}
    public func milliseconds() -> Int64 { Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000) }
}

/// A clock that moves only when told: tests drive the engine in virtual time with it.
public final class VirtualVoiceClock: VoiceClock, @unchecked Sendable {
    private let lock = NSLock()
    private var now: Int64

    public init(startingAt start: Int64 = 0) { now = start }

    public func milliseconds() -> Int64 { lock.withLock { now } }

    /// Moves the clock forward by `milliseconds`.
    public func advance(by milliseconds: Int64) { lock.withLock { now += max(0, milliseconds) } }
}

/// Paces a source that has its samples at hand as a real microphone is paced: each call waits
/// until the samples handed out so far would have been captured.
public final class RealTimePacer: @unchecked Sendable {
    private let lock = NSLock()
    private var start: DispatchTime?
    private var samples = 0

    /// A pacer whose clock starts at the first ``pace(_:)``.
    public init() {}

    /// Counts `count` more samples (at 16 kHz) and sleeps until their end is due.
    public func pace(_ count: Int) {
        let due: DispatchTime = lock.withLock {
            let begin = start ?? .now()
            start = begin
            samples += count
            return begin + .nanoseconds(samples * 1_000_000_000 / VoiceFormat.sampleRate)
        }
        let now = DispatchTime.now()
        if due > now { Thread.sleep(forTimeInterval: Double(due.uptimeNanoseconds - now.uptimeNanoseconds) / 1e9) }
    }
}

/// A microphone that plays back samples held in memory, as fast as it is read.
public final class MemoryCaptureDevice: AudioCaptureDevice, @unchecked Sendable {
    private let lock = NSLock()
    private var samples: [Int16]
    private var position = 0
    private var closed = false
    public let name: String

    public init(samples: [Int16], name: String = "memory") {
        self.samples = samples
        self.name = name
    }

    public func read(count: Int) throws(VoiceEngineError) -> [Int16]? {
        lock.withLock {
            guard !closed, position < samples.count else { return nil }
            let end = min(samples.count, position + count)
            var frame = Array(samples[position..<end])
            position = end
            frame.append(contentsOf: repeatElement(0, count: count - frame.count))
            return frame
        }
    }

    public func close() { lock.withLock { closed = true } }
}

/// A loudspeaker that keeps what it is given in memory.
public final class MemoryPlaybackDevice: AudioPlaybackDevice, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Int16] = []
    private var closed = false
    public let name: String

    public init(name: String = "memory") { self.name = name }

    /// Everything played so far.
    public var samples: [Int16] { lock.withLock { stored } }

    public func write(_ samples: [Int16]) throws(VoiceEngineError) {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { throw .device("\(name) is closed") }
        stored.append(contentsOf: samples)
    }

    public func close() { lock.withLock { closed = true } }
}
