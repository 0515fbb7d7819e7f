/// The receiving half of a voice stream: audio packets in, one frame of playback per `pull()`.
///
/// Packets go into the jitter buffer; each pull decodes what it decides (packet, FEC copy or
/// concealment), keeps the buffer at its target by shortening or lengthening frames by a pitch
/// period, applies the remote volume and meters the result.
public final class VoiceReceiver {
    /// Counters beyond the jitter buffer's.
    public struct Statistics: Sendable, Hashable {
        public var accelerated = 0
        public var expanded = 0
        public var decodeErrors = 0
        public var mutedPackets = 0
    }

    private let format: VoiceFormat
    private let decoder: OpusVoiceDecoder
    private(set) var jitter: JitterBuffer
    private var loss = LossCounter()
    private var pending: [Int16] = []
    private var filteredLevel: Double = 0
    /// Linear gain applied to what is played, 0…1.
    public var volume: Float = 1 {
        didSet { volume = max(0, min(1, volume.isNaN ? 1 : volume)) }
    }
    /// The level of what is played (after volume).
    public private(set) var meter = LevelMeter()
    /// The level of the last frame pulled before volume (what the far side sent, for telling
    /// who is speaking), dBFS.
    public private(set) var frameLevel = LevelMeter.floor
    public private(set) var statistics = Statistics()

    /// Creates a receiver with a jitter buffer configured by `jitter`.
    public init(jitter configuration: JitterBuffer.Configuration = JitterBuffer.Configuration()) throws(VoiceEngineError) {
        format = configuration.format
        decoder = try OpusVoiceDecoder(format: configuration.format)
        jitter = JitterBuffer(configuration: configuration)
    }

    /// The jitter buffer's counters.
    public var jitterStatistics: JitterBuffer.Statistics { jitter.statistics }
    /// The jitter buffer's target delay in ms.
    public var targetDelayMilliseconds: Int { jitter.targetDelayMilliseconds }
    /// Audio held in ms: packets in the buffer plus decoded samples not yet played.
    public var bufferedMilliseconds: Int {
        jitter.bufferedMilliseconds + pending.count * 1000 / VoiceFormat.sampleRate
    }

    /// Takes an audio packet (with or without copies of earlier frames); a report is not the
    /// receiver's and is ignored (nil).
    @discardableResult
    public func receive(_ packet: VoicePacket, atMilliseconds now: Int64) -> JitterBuffer.Insertion? {
        switch packet {
        case .audio(let sequence, let timestamp, let muted, let payload):
            receive(sequence: sequence, timestamp: timestamp, muted: muted, payload: payload, atMilliseconds: now)
        case .redundantAudio(let sequence, let timestamp, let muted, let payload, let earlier):
            receive(sequence: sequence, timestamp: timestamp, muted: muted, payload: payload, earlier: earlier, atMilliseconds: now)
        case .report:
            nil
        }
    }

    /// Takes an audio packet's fields.
    @discardableResult
    public func receive(
        sequence: UInt16, timestamp: UInt32, muted: Bool, payload: [UInt8], earlier: [VoicePacket.EarlierFrame] = [],
        atMilliseconds now: Int64
    ) -> JitterBuffer.Insertion {
        if muted { statistics.mutedPackets += 1 }
        let result = jitter.insert(timestamp: timestamp, payload: payload, earlier: earlier, arrivalMilliseconds: now)
        if result == .resynchronised { loss.reset() }
        if result != .duplicate { loss.record(sequence: sequence) }
        return result
    }

    /// Ends a reporting interval and returns the report for the sender.
    public func makeReport() -> VoicePacket {
        let lossPercent = loss.closeInterval()
        return .report(
            lossPercent: UInt8(lossPercent),
            highestSequence: loss.highestSequence,
            jitterMilliseconds: UInt16(clamping: jitter.jitterMilliseconds),
            targetDelayMilliseconds: UInt16(clamping: jitter.targetDelayMilliseconds),
            burstCover: UInt8(loss.burstCover))
    }

    /// One frame to play.
    public func pull() -> [Int16] {
        let count = format.samplesPerFrame
        while pending.count < count {
            pending.append(contentsOf: decodeNext())
        }
        var frame = Array(pending[0..<count])
        pending.removeFirst(count)
        frameLevel = LevelMeter.level(of: frame)
        applyGain(volume, to: &frame)
        meter.measure(frame)
        return frame
    }

    private func decodeNext() -> [Int16] {
        let level = Double(bufferedMilliseconds)
        let decision = jitter.next()
        var pcm: [Int16]
        switch decision {
        case .waiting:
            filteredLevel = level
            return [Int16](repeating: 0, count: format.samplesPerFrame)
        case .packet(let payload), .copy(let payload):
            do { pcm = try decoder.decode(payload) } catch {
                statistics.decodeErrors += 1
                pcm = decoder.conceal()
            }
        case .fec(let next):
            do { pcm = try decoder.decodeFEC(from: next) } catch {
                statistics.decodeErrors += 1
                pcm = decoder.conceal()
            }
        case .conceal:
            return decoder.conceal()
        }
        return keepToTarget(pcm, level: level)
    }

    /// Shortens or lengthens a decoded frame when the buffer's smoothed level has left the band
    /// target ± one frame (the band keeps it from hunting); while copies of earlier frames
    /// arrive, the band's floor is the target itself.
    private func keepToTarget(_ pcm: [Int16], level: Double) -> [Int16] {
        // A fixed buffer (the benchmark's baseline) never stretches.
        guard jitter.configuration.adaptive else { return pcm }
        filteredLevel += (level - filteredLevel) / 16
        let target = Double(jitter.targetDelayMilliseconds)
        let band = Double(format.frameMilliseconds)
        // Far over the target (four frames), a cut is made even where it may be heard.
        if filteredLevel > target + band, let shorter = TimeStretch.accelerate(pcm, force: filteredLevel > target + 4 * band) {
            statistics.accelerated += 1
            filteredLevel -= Double((pcm.count - shorter.count) * 1000 / VoiceFormat.sampleRate)
            return shorter
        }
        // While the sender adds copies up to D frames back, the target holds exactly the packet
        // that carries a lost frame's deepest copy: a frame less and that copy comes too late.
        let floor = jitter.copyDepth >= 2 ? target : target - band
        if filteredLevel < floor, let longer = TimeStretch.expand(pcm) {
            statistics.expanded += 1
            filteredLevel += Double((longer.count - pcm.count) * 1000 / VoiceFormat.sampleRate)
            return longer
        }
        return pcm
    }
}
