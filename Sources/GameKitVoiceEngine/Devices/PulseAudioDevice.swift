#if PulseAudio
import CPulse
import Foundation

/// A PulseAudio stream (PipeWire's pulse server serves the same API) through libpulse-simple:
/// mono 16-bit 16 kHz, with buffers of about `bufferMilliseconds`.
///
/// Built with the package's `PulseAudio` trait (on by default). Without it the type is still
/// there, ``isAvailable`` is false and opening a stream throws (see PulseAudioDevice+Absent).
public final class PulseAudioDevice: AudioCaptureDevice, AudioPlaybackDevice, @unchecked Sendable {
    /// Which way the stream goes.
    public enum Direction: Sendable { case capture, playback }

    /// Whether this build has PulseAudio (the package's `PulseAudio` trait): true.
    public static let isAvailable = true

    private let lock = NSLock()
    /// Held for the length of every call into the stream, so that `close` never frees it under
    /// a read or write (libpulse aborts on that).
    private let ioLock = NSLock()
    private var stream: OpaquePointer?
    public let name: String
    public let direction: Direction

    /// Opens a stream on device `device` (a source for capture, a sink for playback; nil = the
    /// server's default) of server `server` (nil = the environment's, e.g. PULSE_SERVER).
    public init(
        _ direction: Direction, device: String? = nil, server: String? = nil,
        applicationName: String = "OpenGameKit", bufferMilliseconds: Int = 20
    ) throws(VoiceEngineError) {
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(VoiceFormat.sampleRate), channels: 1)
        let bytes = UInt32(VoiceFormat.sampleRate / 1000 * max(5, bufferMilliseconds) * 2)
        let none = UInt32.max
        var attributes = direction == .capture
            ? pa_buffer_attr(maxlength: none, tlength: none, prebuf: none, minreq: none, fragsize: bytes)
            : pa_buffer_attr(maxlength: none, tlength: bytes * 2, prebuf: bytes, minreq: bytes / 2, fragsize: none)
        var error: Int32 = 0
        let streamName = direction == .capture ? "microphone" : "voice"
        stream = pa_simple_new(
            server, applicationName, direction == .capture ? PA_STREAM_RECORD : PA_STREAM_PLAYBACK,
            device, streamName, &spec, nil, &attributes, &error)
        guard stream != nil else {
            throw .device("PulseAudio \(device ?? "default") \(direction): \(String(cString: pa_strerror(error)))")
        }
        self.direction = direction
        name = device ?? "default"
    }

    public func read(count: Int) throws(VoiceEngineError) -> [Int16]? {
        guard direction == .capture else { throw .device("\(name) is a playback stream") }
        ioLock.lock()
        defer { ioLock.unlock() }
        guard let stream = lock.withLock({ self.stream }) else { return nil }
        var samples = [Int16](repeating: 0, count: count)
        var error: Int32 = 0
        let status = samples.withUnsafeMutableBytes { pa_simple_read(stream, $0.baseAddress, $0.count, &error) }
        guard status >= 0 else { throw .device("PulseAudio read: \(String(cString: pa_strerror(error)))") }
        return samples
    }

    public func write(_ samples: [Int16]) throws(VoiceEngineError) {
        guard direction == .playback else { throw .device("\(name) is a capture stream") }
        ioLock.lock()
        defer { ioLock.unlock() }
        guard let stream = lock.withLock({ self.stream }) else { throw .device("\(name) is closed") }
        var error: Int32 = 0
        let status = samples.withUnsafeBytes { pa_simple_write(stream, $0.baseAddress, $0.count, &error) }
        guard status >= 0 else { throw .device("PulseAudio write: \(String(cString: pa_strerror(error)))") }
    }

    /// The stream's latency in ms, as the server reports it.
    public var latencyMilliseconds: Int {
        ioLock.lock()
        defer { ioLock.unlock() }
        guard let stream = lock.withLock({ self.stream }) else { return 0 }
        var error: Int32 = 0
        return Int(pa_simple_get_latency(stream, &error) / 1000)
    }

    /// Closes the stream; a read or write in progress on another thread finishes first (a
    /// capture read within one buffer, a playback write within the buffered audio).
    public func close() {
        ioLock.lock()
        defer { ioLock.unlock() }
        let stream = lock.withLock { () -> OpaquePointer? in
            defer { self.stream = nil }
            return self.stream
        }
        if let stream {
            if direction == .playback {
                var error: Int32 = 0
                _ = pa_simple_drain(stream, &error)
            }
            pa_simple_free(stream)
        }
    }

    deinit { close() }
}
#endif
