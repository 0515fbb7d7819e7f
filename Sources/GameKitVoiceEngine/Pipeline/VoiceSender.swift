/// The sending half of a voice stream: cleaned microphone frames in, audio packets out.
///
/// Meters the microphone (after echo cancellation, before mute: "is someone speaking here"),
/// replaces the frame with silence when muted, encodes it with Opus and wraps it in a
/// `VoicePacket`. Receiver reports set the loss the encoder plans its FEC for: the highest of the
/// last ``OpusSettings/lossHoldReports``, at most ``OpusSettings/maximumExpectedLossPercent``;
/// and the cover against bursts: while a receiver asks for frames 2 or 3 back, a second encoder
/// at ``OpusSettings/redundancyBitrate`` codes each frame again, and each packet carries those
/// copies of the frames that far back. Under ``OpusSettings/maximumBitrate`` the frames get what
/// the packets' headers and the copies leave, and the copies go before the frames would get less
/// than ``OpusSettings/minimumFrameBitrateUnderCap``.
public final class VoiceSender {
    private let encoder: OpusVoiceEncoder
    private let settings: OpusSettings
    private let format: VoiceFormat
    private var sequence: UInt16
    private var timestamp: UInt32
    /// Each receiver's latest reported losses, oldest first, and the cover it asks for.
    private var recentLoss: [UInt32: [Int]] = [:]
    private var askedCover: [UInt32: Int] = [:]
    /// The copies' encoder, while cover is asked for, and its recent frames (newest last).
    private var copyEncoder: OpusVoiceEncoder?
    private var recentCopies: [(timestamp: UInt32, payload: [UInt8])] = []
    /// Whether frames go out as silence.
    public var isMuted = false
    /// The microphone's level.
    public private(set) var meter = LevelMeter()
    /// Packets made, and frames DTX left unsent.
    public private(set) var packetsSent = 0
    public private(set) var framesSuppressed = 0
    /// The bytes of the packets made (headers, frames and copies; no transport overhead).
    public private(set) var bytesSent = 0
    /// Packets that carried copies of earlier frames.
    public private(set) var packetsWithCopies = 0
    /// How many frames back packets cover now (0: no copies; the receiver's last ask, when
    /// ``OpusSettings/burstRedundancy`` is on).
    public private(set) var burstCover = 0

    /// Creates a sender; the first sequence number and timestamp are random.
    public init(format: VoiceFormat = .standard, settings: OpusSettings = OpusSettings()) throws(VoiceEngineError) {
        encoder = try OpusVoiceEncoder(format: format, settings: settings)
        self.settings = settings
        self.format = format
        sequence = UInt16.random(in: .min ... .max)
        timestamp = UInt32.random(in: .min ... .max) / UInt32(format.samplesPerFrame) * UInt32(format.samplesPerFrame)
        if settings.maximumBitrate != nil { plan() }
    }

    /// The loss the encoder currently plans for, in percent.
    public var expectedLossPercent: Int { encoder.expectedLossPercent }

    /// The frames' target bit rate now (with their FEC), in bits per second.
    public var frameBitrate: Int { encoder.bitrate }

    /// Encodes one frame and returns the packet's bytes, or nil when DTX leaves it unsent.
    public func send(frame: [Int16]) throws(VoiceEngineError) -> [UInt8]? {
        guard frame.count == format.samplesPerFrame else {
            throw .wrongFrameSize(expected: format.samplesPerFrame, got: frame.count)
        }
        meter.measure(frame)
        let input = isMuted ? [Int16](repeating: 0, count: frame.count) : frame
        let payload = try encoder.encode(input)
        defer { timestamp &+= UInt32(format.samplesPerFrame) }
        // Opus marks a frame DTX need not send with a packet of at most two bytes.
        if settings.dtx && payload.count <= 2 {
            framesSuppressed += 1
            return nil
        }
        var earlier: [VoicePacket.EarlierFrame] = []
        if let copyEncoder {
            earlier = (2...max(2, burstCover)).compactMap { distance in
                let wanted = timestamp &- UInt32(distance * format.samplesPerFrame)
                return recentCopies.last { $0.timestamp == wanted }.map { .init(distance: distance, payload: $0.payload) }
            }
            recentCopies.append((timestamp, try copyEncoder.encode(input)))
            if recentCopies.count > Int(VoicePacket.maximumBurstCover) { recentCopies.removeFirst() }
        }
        if !earlier.isEmpty { packetsWithCopies += 1 }
        let packet: VoicePacket = earlier.isEmpty
            ? .audio(sequence: sequence, timestamp: timestamp, muted: isMuted, payload: payload)
            : .redundantAudio(sequence: sequence, timestamp: timestamp, muted: isMuted, payload: payload, earlier: earlier)
        sequence &+= 1
        packetsSent += 1
        let bytes = packet.encoded()
        bytesSent += bytes.count
        return bytes
    }

    /// Takes a receiver report: the encoder plans for the highest loss of the recent reports, up
    /// to the ceiling; packets cover `burstCover` frames back (0 or 1: no copies; at most 3).
    /// With several receivers (a group call, `receiver` tells them apart) one stream serves all,
    /// so it is planned for the worst: the highest loss and the deepest cover any asks for.
    public func apply(reportedLossPercent: Int, burstCover: Int = 0, from receiver: UInt32 = 0) {
        var losses = recentLoss[receiver, default: []]
        losses.append(max(0, reportedLossPercent))
        if losses.count > settings.lossHoldReports { losses.removeFirst(losses.count - settings.lossHoldReports) }
        recentLoss[receiver] = losses
        askedCover[receiver] = burstCover
        plan()
    }

    /// Forgets a receiver that left: its reports no longer shape the stream.
    public func forget(receiver: UInt32) {
        // `apply` sets both, so one tells whether the receiver had reported.
        askedCover[receiver] = nil
        guard recentLoss.removeValue(forKey: receiver) != nil else { return }
        plan()
    }

    /// What the frames (with their FEC) may spend under `budget` when packets cover `cover`
    /// frames back: the budget less the packets' headers and the copies.
    private func frameBitrate(budget: Int, cover: Int) -> Int {
        let copies = max(0, cover - 1)
        let packetsPerSecond = 1000 / format.frameMilliseconds
        // A packet with copies has a count byte and 3 bytes per copy more.
        let headerBytes = VoicePacket.audioHeaderSize + (copies > 0 ? 1 + 3 * copies : 0)
        return budget - packetsPerSecond * headerBytes * 8 - copies * settings.redundancyBitrate
    }

    private func plan() {
        // With no receiver reporting (all left), back to the loss planned for at the start.
        let worstLoss = recentLoss.isEmpty ? settings.initialExpectedLossPercent : recentLoss.values.compactMap { $0.max() }.max() ?? 0
        encoder.expectedLossPercent = min(worstLoss, settings.maximumExpectedLossPercent)
        let asked = askedCover.values.max() ?? 0
        var cover = settings.burstRedundancy && asked >= 2 ? min(asked, Int(VoicePacket.maximumBurstCover)) : 0
        if let budget = settings.maximumBitrate {
            // The copies go (the deepest first) before the frames would get too little.
            while cover >= 2, frameBitrate(budget: budget, cover: cover) < OpusSettings.minimumFrameBitrateUnderCap {
                cover = cover > 2 ? cover - 1 : 0
            }
            encoder.bitrateLimit = frameBitrate(budget: budget, cover: cover)
        }
        self.burstCover = cover
        if cover == 0 {
            copyEncoder = nil
            recentCopies.removeAll()
        } else if copyEncoder == nil {
            var copies = settings
            copies.bitrate = settings.redundancyBitrate
            copies.inBandFEC = false
            copies.dtx = false
            copies.initialExpectedLossPercent = 0
            copyEncoder = try? OpusVoiceEncoder(format: format, settings: copies)
        }
    }
}
