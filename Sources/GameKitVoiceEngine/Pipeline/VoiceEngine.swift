import Foundation

/// A full-duplex voice stream: the microphone goes out as packets, packets come back as audio for
/// the loudspeaker, with echo cancellation between the two (a `GroupVoiceEngine` with one other
/// participant).
///
/// The engine does no I/O and keeps no time of its own: the caller hands it one microphone frame
/// at a time (`process(microphone:atMilliseconds:)`, which returns the loudspeaker's frame) and
/// every packet that arrives (`receive(_:atMilliseconds:)`); packets to send leave through the
/// `send` closure. `AudioLoop` drives it from audio devices; tests drive it with a virtual clock.
/// All methods are thread-safe.
public final class VoiceEngine: @unchecked Sendable {
    /// Settings.
    public struct Configuration: Sendable {
        /// Frame length.
        public var format: VoiceFormat = .standard
        /// Opus settings.
        public var opus = OpusSettings()
        /// The echo canceller (default speexdsp; see `EchoCancellerKind`).
        public var echoCanceller: EchoCancellerKind = .speex
        /// The expected delay from loudspeaker to microphone (device buffers), a hint for the
        /// canceller.
        public var echoDelayHintMilliseconds = 40
        /// The jitter buffer.
        public var jitter = JitterBuffer.Configuration()
        /// How often a receiver report goes back to the sender, in frames (default 1 s).
        public var reportIntervalFrames = 50

        /// The defaults.
        public init() {}
    }

    /// Counters, for statistics screens and tests.
    public struct Statistics: Sendable, Hashable {
        public var packetsSent = 0
        public var reportsSent = 0
        /// The audio packets' bytes (headers, frames and copies; no transport overhead).
        public var bytesSent = 0
        public var packetsReceived = 0
        public var reportsReceived = 0
        public var rejectedPackets = 0
        public var jitter = JitterBuffer.Statistics()
        public var receiver = VoiceReceiver.Statistics()
        public var targetDelayMilliseconds = 0
        public var bufferedMilliseconds = 0
        public var expectedLossPercent = 0
        public var lastReportedLossPercent = 0
        /// How many frames back the packets sent cover against bursts (0: no copies), and how
        /// many packets carried copies.
        public var burstCover = 0
        public var packetsWithCopies = 0
    }

    /// The far side, as the group engine underneath numbers it.
    private static let remote: GroupVoiceEngine.ParticipantID = 1
    private let group: GroupVoiceEngine

    /// Creates an engine; `send` is called (outside the engine's lock) with every packet to send.
    public init(configuration: Configuration = Configuration(), send: @escaping @Sendable ([UInt8]) -> Void)
        throws(VoiceEngineError)
    {
        group = try GroupVoiceEngine(localParticipant: 0, configuration: configuration) { packet, _ in send(packet) }
        try group.add(Self.remote)
    }

    /// The frame format.
    public var format: VoiceFormat { group.format }

    /// Whether the microphone goes out as silence.
    public var isMicrophoneMuted: Bool {
        get { group.isMicrophoneMuted }
        set { group.isMicrophoneMuted = newValue }
    }

    /// Gain for the remote audio, 0…1.
    public var remoteVolume: Float {
        get { group.volume(of: Self.remote) ?? 1 }
        set { group.setVolume(newValue, of: Self.remote) }
    }

    /// The microphone's smoothed level in dBFS (after echo cancellation, before mute).
    public var inputLevel: Float { group.inputLevel }
    /// The played audio's smoothed level in dBFS (after volume).
    public var outputLevel: Float { group.outputLevel }

    /// A snapshot of the counters.
    public var currentStatistics: Statistics {
        let all = group.currentStatistics
        let remote = all.participants[Self.remote] ?? GroupVoiceEngine.ParticipantStatistics()
        var snapshot = Statistics()
        snapshot.packetsSent = all.packetsSent
        snapshot.bytesSent = all.bytesSent
        snapshot.reportsSent = all.reportsSent
        snapshot.packetsReceived = remote.packetsReceived
        snapshot.reportsReceived = remote.reportsReceived
        snapshot.rejectedPackets = all.rejectedPackets
        snapshot.jitter = remote.jitter
        snapshot.receiver = remote.receiver
        snapshot.targetDelayMilliseconds = remote.targetDelayMilliseconds
        snapshot.bufferedMilliseconds = remote.bufferedMilliseconds
        snapshot.expectedLossPercent = all.expectedLossPercent
        snapshot.lastReportedLossPercent = remote.lastReportedLossPercent
        snapshot.burstCover = all.burstCover
        snapshot.packetsWithCopies = all.packetsWithCopies
        return snapshot
    }

    /// Takes a packet from the other side. Malformed packets are counted and dropped.
    public func receive(_ bytes: [UInt8], atMilliseconds now: Int64) {
        group.receive(bytes, from: Self.remote, atMilliseconds: now)
    }

    /// Processes one microphone frame at time `now` and returns the frame for the loudspeaker.
    public func process(microphone: [Int16], atMilliseconds now: Int64) throws(VoiceEngineError) -> [Int16] {
        try group.process(microphone: microphone, atMilliseconds: now)
    }
}

extension VoiceEngine: VoiceFrameProcessor {}
