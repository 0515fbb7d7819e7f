#if !PulseAudio
/// PulseAudio in a build without the package's `PulseAudio` trait: the same API, so code that
/// names it still compiles, but ``isAvailable`` is false and opening a stream throws an error
/// that says so. Such a build does not link libpulse; WAV files, silence and the application's
/// own devices work as usual.
public final class PulseAudioDevice: AudioCaptureDevice, AudioPlaybackDevice, @unchecked Sendable {
    /// Which way the stream goes.
    public enum Direction: Sendable { case capture, playback }

    /// Whether this build has PulseAudio (the package's `PulseAudio` trait): false.
    public static let isAvailable = false

    /// Why no stream opens in this build.
    public static let absence = """
        This build of OpenGameKit has no PulseAudio: the package's PulseAudio trait is off (the \
        dependency's `traits:` leaves it out). Use WAV files or your own devices, or enable the trait.
        """

    public let name: String
    public let direction: Direction

    /// Throws: this build has no PulseAudio.
    public init(
        _ direction: Direction, device: String? = nil, server: String? = nil,
        applicationName: String = "OpenGameKit", bufferMilliseconds: Int = 20
    ) throws(VoiceEngineError) {
        throw .device(Self.absence)
    }

    /// Never reached: no stream opens.
    public func read(count: Int) throws(VoiceEngineError) -> [Int16]? { throw .device(Self.absence) }

    /// Never reached: no stream opens.
    public func write(_ samples: [Int16]) throws(VoiceEngineError) { throw .device(Self.absence) }

    /// 0: no stream opens.
    public var latencyMilliseconds: Int { 0 }

    /// Does nothing.
    public func close() {}
}
#endif
