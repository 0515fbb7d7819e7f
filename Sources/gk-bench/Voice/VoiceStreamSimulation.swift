import GameKitVoiceEngine
import NIOCore
import NetworkImpairment

/// One direction of a call in virtual time: speech → sender → seeded impairment → receiver →
/// what the far end plays. Receiver reports go back over a perfect path every second.
struct VoiceStreamSimulation {
    /// Which pipeline runs.
    enum Pipeline: String {
        /// This engine: FEC fed by reports, adaptive jitter buffer.
        case opengamekit
        /// Plain Opus without FEC and a fixed 80 ms buffer, at 32 kbit/s.
        case baseline = "plain-opus-80ms"
        /// The FEC reference of issue 17: plain Opus at 32 kbit/s with its in-band FEC planned for
        /// the loss the condition has (set once, as a static application would), a fixed 80 ms
        /// buffer that always waits for the next packet's copy.
        case fecReference = "opus-fec-80ms"
    }

    /// The loss the condition is made with, in percent (what the FEC reference is told).
    var nominalLossPercent: Int {
        Int((max(self.impairment.loss, self.impairment.burstLoss?.averageLoss ?? 0) * 100).rounded())
    }

    let pipeline: Pipeline
    let impairment: ImpairmentProfile
    let seed: UInt64
    /// A rate to compare at, in bits per second: the engine's cap
    /// (``OpusSettings/maximumBitrate``, everything included), or the plain pipelines' one
    /// Opus rate. nil: each pipeline's own.
    var rate: Int?

    init(pipeline: Pipeline, impairment: ImpairmentProfile, seed: UInt64, rate: Int? = nil) {
        self.pipeline = pipeline
        self.impairment = impairment
        self.seed = seed
        self.rate = rate
    }

    /// What a run gave.
    struct Outcome {
        /// The played signal (as long as the speech plus a second to drain).
        var played: [Int16]
        /// The measured loss.
        var lossPercent: Double
        /// The voice packets' bit rate (their bytes, no transport overhead).
        var kilobitsPerSecond: Double
        /// What the receiver did with what arrived, in % of the frames it played (as the real
        /// calls' rows report it): `concealed_pct`, `late_pct`, `fec_pct`, `copies_pct`,
        /// `stretched_pct`; and `target_delay_ms`, its jitter buffer's target at the end.
        var receiver: [String: Double]
    }

    func run(speech: [Int16]) throws -> Outcome {
        var opus = OpusSettings()
        var jitter = JitterBuffer.Configuration()
        switch pipeline {
        case .opengamekit:
            opus.maximumBitrate = rate
        case .baseline:
            opus.inBandFEC = false
            opus.lossBitrate = opus.bitrate
            opus.burstRedundancy = false
            opus.initialExpectedLossPercent = 0
            jitter.adaptive = false
            jitter.holdForFEC = false
            jitter.initialDelayMilliseconds = 80
        case .fecReference:
            // Plain Opus: one bit rate whatever the loss.
            opus.lossBitrate = opus.bitrate
            opus.initialExpectedLossPercent = self.nominalLossPercent
            opus.burstRedundancy = false
            jitter.adaptive = false
            jitter.holdForFEC = true
            jitter.initialDelayMilliseconds = 80
        }
        if pipeline != .opengamekit, let rate {
            opus.bitrate = rate
            opus.lossBitrate = rate
        }
        let format = jitter.format
        let sender = try VoiceSender(format: format, settings: opus)
        let receiver = try VoiceReceiver(jitter: jitter)
        var network = ImpairmentModel<[UInt8]>(profile: impairment, seed: seed)
        let frames = (speech.count + format.samplesPerFrame - 1) / format.samplesPerFrame + 1000 / format.frameMilliseconds
        var sentBytes = 0
        var played = [Int16]()
        played.reserveCapacity(frames * format.samplesPerFrame)
        for frame in 0..<frames {
            let now = Int64(frame * format.frameMilliseconds)
            let start = frame * format.samplesPerFrame
            var input = [Int16](repeating: 0, count: format.samplesPerFrame)
            if start < speech.count {
                let end = min(speech.count, start + format.samplesPerFrame)
                input.replaceSubrange(0..<(end - start), with: speech[start..<end])
            }
            if let packet = try sender.send(frame: input) {
                sentBytes += packet.count
                network.submit(packet, at: .uptimeNanoseconds(UInt64(now) * 1_000_000))
            }
            while let bytes = network.popDue(at: .uptimeNanoseconds(UInt64(now) * 1_000_000)) {
                if let packet = try? VoicePacket(decoding: bytes) { receiver.receive(packet, atMilliseconds: now) }
            }
            played.append(contentsOf: receiver.pull())
            if pipeline != .fecReference, frame % (1000 / format.frameMilliseconds) == 0, frame > 0,
                case .report(let loss, _, _, _, let cover) = receiver.makeReport()
            {
                sender.apply(reportedLossPercent: Int(loss), burstCover: Int(cover))
            }
        }
        let stats = network.statistics
        let loss = stats.submitted > 0 ? Double(stats.dropped) * 100 / Double(stats.submitted) : 0
        let seconds = Double(frames * format.frameMilliseconds) / 1000
        let jitterStatistics = receiver.jitterStatistics, counts = receiver.statistics
        let playedFrames = Double(max(1, jitterStatistics.played))
        func share(_ count: Int) -> Double { Double(count) * 100 / playedFrames }
        let shares: [String: Double] = [
            "concealed_pct": share(jitterStatistics.concealed), "late_pct": share(jitterStatistics.late),
            "fec_pct": share(jitterStatistics.recoveredByFEC), "copies_pct": share(jitterStatistics.recoveredByCopy),
            "stretched_pct": share(counts.accelerated + counts.expanded),
            "target_delay_ms": Double(receiver.targetDelayMilliseconds),
        ]
        return Outcome(played: played, lossPercent: loss, kilobitsPerSecond: Double(sentBytes) * 8 / seconds / 1000, receiver: shares)
    }
}
