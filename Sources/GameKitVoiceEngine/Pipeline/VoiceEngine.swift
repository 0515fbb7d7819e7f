import Foundation

/// A full-duplex voice stream: the microphone goes out as packets, packets come back as audio for
/// the loudspeaker, with echo cancellation between the two.
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

    private let lock = NSLock()
    private let configuration: Configuration
    private let sender: VoiceSender
    private let receiver: VoiceReceiver
    private let canceller: EchoCanceller
    private let send: @Sendable ([UInt8]) -> Void
    private var framesSinceReport = 0
    private var statistics = Statistics()

    /// Creates an engine; `send` is called (outside the engine's lock) with every packet to send.
    public init(configuration: Configuration = Configuration(), send: @escaping @Sendable ([UInt8]) -> Void)
        throws(VoiceEngineError)
    {
        guard configuration.jitter.format == configuration.format else {
            throw .invalidConfiguration("the jitter buffer's frames differ from the engine's")
        }
        guard configuration.reportIntervalFrames > 0 else { throw .invalidConfiguration("report interval") }
        self.configuration = configuration
        sender = try VoiceSender(format: configuration.format, settings: configuration.opus)
        receiver = try VoiceReceiver(jitter: configuration.jitter)
        canceller = try configuration.echoCanceller.make(echoDelayHintMilliseconds: configuration.echoDelayHintMilliseconds)
        self.send = send
    }

    /// The frame format.
    public var format: VoiceFormat { configuration.format }

    /// Whether the microphone goes out as silence.
    public var isMicrophoneMuted: Bool {
        get { locked { sender.isMuted } }
        set { locked { sender.isMuted = newValue } }
    }

    /// Gain for the remote audio, 0…1.
    public var remoteVolume: Float {
        get { locked { receiver.volume } }
        set { locked { receiver.volume = newValue } }
    }

    /// The microphone's smoothed level in dBFS (after echo cancellation, before mute).
    public var inputLevel: Float { locked { sender.meter.level } }
    /// The played audio's smoothed level in dBFS (after volume).
    public var outputLevel: Float { locked { receiver.meter.level } }

    /// A snapshot of the counters.
    public var currentStatistics: Statistics {
        locked {
            var snapshot = statistics
            snapshot.packetsSent = sender.packetsSent
            snapshot.jitter = receiver.jitterStatistics
            snapshot.receiver = receiver.statistics
            snapshot.targetDelayMilliseconds = receiver.targetDelayMilliseconds
            snapshot.bufferedMilliseconds = receiver.bufferedMilliseconds
            snapshot.expectedLossPercent = sender.expectedLossPercent
            snapshot.burstCover = sender.burstCover
            snapshot.packetsWithCopies = sender.packetsWithCopies
            return snapshot
        }
    }

    /// Takes a packet from the other side. Malformed packets are counted and dropped.
    public func receive(_ bytes: [UInt8], atMilliseconds now: Int64) {
        locked {
            guard let packet = try? VoicePacket(decoding: bytes) else {
                statistics.rejectedPackets += 1
                return
            }
            switch packet {
            case .audio, .redundantAudio:
                statistics.packetsReceived += 1
                receiver.receive(packet, atMilliseconds: now)
            case .report(let loss, _, _, _, let cover):
                statistics.reportsReceived += 1
                statistics.lastReportedLossPercent = Int(loss)
                sender.apply(reportedLossPercent: Int(loss), burstCover: Int(cover))
            }
        }
    }

    /// Processes one microphone frame at time `now` and returns the frame for the loudspeaker.
    public func process(microphone: [Int16], atMilliseconds now: Int64) throws(VoiceEngineError) -> [Int16] {
        let samples = configuration.format.samplesPerFrame
        guard microphone.count == samples else { throw .wrongFrameSize(expected: samples, got: microphone.count) }
        var outgoing: [[UInt8]] = []
        let speaker: [Int16]
        lock.lock()
        do {
            defer { lock.unlock() }
            speaker = receiver.pull()
            var cleaned = [Int16]()
            cleaned.reserveCapacity(samples)
            let step = canceller.frameSize
            for start in stride(from: 0, to: samples, by: step) {
                let near = Array(microphone[start..<start + step])
                let far = Array(speaker[start..<start + step])
                cleaned.append(contentsOf: try canceller.process(near: near, far: far))
            }
            if let packet = try sender.send(frame: cleaned) { outgoing.append(packet) }
            framesSinceReport += 1
            if framesSinceReport >= configuration.reportIntervalFrames, statistics.packetsReceived > 0 {
                framesSinceReport = 0
                outgoing.append(receiver.makeReport().encoded())
                statistics.reportsSent += 1
            }
        }
        for packet in outgoing { send(packet) }
        return speaker
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
