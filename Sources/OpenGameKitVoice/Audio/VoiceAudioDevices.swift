import Foundation
import GameKitVoiceEngine

/// Where a voice chat's audio comes from and goes to (a Swift-only addition).
public enum VoiceAudioDevices: Sendable {
    /// PulseAudio: a source and a sink by name (nil: the server's defaults), on `server` (nil:
    /// the environment's, e.g. `PULSE_SERVER`).
    case pulseAudio(source: String? = nil, sink: String? = nil, server: String? = nil)
    /// A 16 kHz mono WAV file as the microphone (played in real time, then silence) and a WAV
    /// file the far side's voice is written to.
    case files(input: String, output: String)
    /// No devices: silence is sent in real time and what arrives is decoded and dropped.
    case silent
    /// Devices made by the application, once per call.
    case custom(@Sendable () throws -> (AudioCaptureDevice, AudioPlaybackDevice))

    /// The devices in words, for error messages.
    var summary: String {
        switch self {
        case .pulseAudio(let source, let sink, let server):
            "PulseAudio source \(source ?? "(default)"), sink \(sink ?? "(default)"), server \(server ?? "from PULSE_SERVER or the default")"
        case .files(let input, let output): "WAV file \(input) as microphone, \(output) as speaker"
        case .silent: "no devices"
        case .custom: "the application's devices"
        }
    }

    /// Opens the devices for one call.
    func open() throws -> (AudioCaptureDevice, AudioPlaybackDevice) {
        switch self {
        case .pulseAudio(let source, let sink, let server):
            let capture = try PulseAudioDevice(.capture, device: source, server: server)
            do {
                return (capture, try PulseAudioDevice(.playback, device: sink, server: server))
            } catch {
                capture.close()
                throw error
            }
        case .files(let input, let output):
            let capture = try WAVFileCaptureDevice(path: input, pacing: .realTime)
            return (ContinuingCaptureDevice(capture), try WAVFilePlaybackDevice(path: output))
        case .silent:
            return (ContinuingCaptureDevice(nil), DiscardingPlaybackDevice())
        case .custom(let make):
            return try make()
        }
    }
}

/// A microphone that goes on with silence, in real time, once its source has ended, so a call
/// outlives a short input file.
final class ContinuingCaptureDevice: AudioCaptureDevice, @unchecked Sendable {
    private let lock = NSLock()
    private var source: AudioCaptureDevice?
    private let pacer = RealTimePacer()
    private var closed = false
    let name: String

    init(_ source: AudioCaptureDevice?) {
        self.source = source
        self.name = source?.name ?? "silence"
    }

    func read(count: Int) throws(VoiceEngineError) -> [Int16]? {
        if let source = self.lock.withLock({ self.source }) {
            if let samples = try source.read(count: count) { return samples }
            self.lock.withLock { self.source = nil }
        }
        guard !self.lock.withLock({ self.closed }) else { return nil }
        self.pacer.pace(count)
        return [Int16](repeating: 0, count: count)
    }

    func close() {
        let source = self.lock.withLock {
            self.closed = true
            return self.source
        }
        source?.close()
    }
}

/// A loudspeaker that drops what it is given.
final class DiscardingPlaybackDevice: AudioPlaybackDevice, @unchecked Sendable {
    let name = "discard"
    func write(_ samples: [Int16]) throws(VoiceEngineError) {}
    func close() {}
}
