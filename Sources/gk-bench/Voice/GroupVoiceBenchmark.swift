import Foundation
import GameKitVoiceEngine
import NetworkImpairment
import VoiceSimulation

/// The group rows of `gk-bench voice` (`group-4`, `group-8`): calls of N `GroupVoiceEngine`s
/// with the default configuration (speex echo cancellation included) in virtual time
/// (VoiceSimulation, clean paths).
///
/// - `pesq_wb`: participant 1 says the reference speech, the others are silent; each listener's
///   loudspeaker (the mix of everyone else) against the speech; the lowest listener's score
///   (`pesq_wb_mean` the mean), to set beside the two-party `clean` row. A listener PESQ cannot
///   score (it heard no speech) counts as 1.0, the floor; `listeners_unscored` says how many.
/// - `pesq_wb_without_canceller` (`group-2` only): the same call with no echo canceller
///   (`EchoCancellerKind.none`), and `canceller_cost`, what the default canceller takes from
///   clean speech with no echo to cancel (the target: below ``cancellerCostTarget``).
/// - `cpu_pct`: everyone talks at once (the speech, each from another offset), the worst case
///   for decoding; the process's CPU time ÷ N ÷ the audio's duration: one participant's share of
///   one core, against the 5 % (`ratio_vs_target`). `cpu_pct_one_talker` is the same
///   for the quality run. Both include the simulation's own work (impairment models, copying).
/// - `mouth_to_ear_ms_p50/p95`: chirps through a private PulseAudio, the talker's capture to
///   one listener's playback, with all N engines running on their audio devices in this process
///   (`MouthToEar.engines`; `group-2` is the `mouth-to-ear` row).
enum GroupVoiceBenchmark {
    /// The ceiling on one participant's share of a core, in percent.
    static let cpuTargetPercent = 5.0
    /// The most PESQ-WB the default echo canceller may take from clean speech.
    static let cancellerCostTarget = 0.05

    /// `pairLatency`: the `mouth-to-ear` row already measured (two engines, the same pipeline as
    /// `group-2`), which `group-2` takes instead of measuring again.
    static func rows(
        sizes: [Int], speech: [Int16], quality: SpeechQuality, seed: UInt64, chirps: Int?, workspace: String,
        pairLatency: [String: Any]? = nil
    ) throws -> [[String: Any]] {
        try sizes.map { count in
            let listening = try Self.qualityRun(participants: count, speech: speech, seed: seed)
            // Every listener counts: one that heard nothing scores the floor (1.0), never drops out.
            var scores: [Double] = []
            var unscored = 0
            for (index, played) in listening.played.enumerated() {
                let score = try quality.measure(reference: speech, degraded: played, name: "group\(count)-\(index)")
                scores.append(score.pesq)
                if !score.pesqScored { unscored += 1 }
            }
            let cpu = try Self.cpuRun(participants: count, speech: speech, seed: seed)
            var cost: [String: Any] = [:]
            if count == 2 {
                var configuration = VoiceEngine.Configuration()
                configuration.echoCanceller = .none
                let plain = try Self.qualityRun(participants: 2, speech: speech, seed: seed, configuration: configuration)
                let score = try quality.measure(reference: speech, degraded: plain.played[0], name: "group2-no-canceller")
                cost["pesq_wb_without_canceller"] = score.pesq
                if let with = scores.first { cost["canceller_cost"] = score.pesq - with }
            }
            var row: [String: Any] = [
                "work": "group-\(count)", "impl": "opengamekit", "participants": count,
                "pesq_wb": scores.min() ?? NSNull(), "pesq_wb_mean": scores.isEmpty ? NSNull() : scores.reduce(0, +) / Double(scores.count),
                "listeners": scores.count, "listeners_unscored": unscored,
                "cpu_pct": cpu, "cpu_pct_one_talker": listening.cpuPercent, "ratio_vs_target": cpu / Self.cpuTargetPercent,
                "kbps": listening.talkerKilobitsPerSecond,
                "mouth_to_ear_ms_p50": NSNull(), "mouth_to_ear_ms_p95": NSNull(),
            ]
            row.merge(cost) { $1 }
            if let chirps {
                let latency = try count == 2 && pairLatency != nil
                    ? pairLatency!
                    : MouthToEar.measure(chirps: chirps, workspace: workspace, impl: "group-\(count)", pipeline: MouthToEar.engines(count))
                row["mouth_to_ear_ms_p50"] = latency["mouth_to_ear_ms_p50"]
                row["mouth_to_ear_ms_p95"] = latency["mouth_to_ear_ms_p95"]
                row["chirps_detected"] = latency["detected"]
            }
            return row
        }
    }

    static func frames(of speech: [Int16]) -> Int {
        let samples = VoiceFormat.standard.samplesPerFrame
        return (speech.count + samples - 1) / samples + 50  // and a second to drain
    }

    /// The frame of `speech` starting `offset` frames in (silence past its end).
    static func frame(_ speech: [Int16], _ index: Int) -> [Int16] {
        let samples = VoiceFormat.standard.samplesPerFrame
        let start = index * samples
        var frame = [Int16](repeating: 0, count: samples)
        if start < speech.count {
            let end = min(speech.count, start + samples)
            frame.replaceSubrange(0..<(end - start), with: speech[start..<end])
        }
        return frame
    }

    /// Participant 1 talks; every other's loudspeaker, the CPU share, and the talker's upstream
    /// bit rate (every copy it sent).
    static func qualityRun(
        participants count: Int, speech: [Int16], seed: UInt64, configuration: VoiceEngine.Configuration = VoiceEngine.Configuration()
    ) throws -> (played: [[Int16]], cpuPercent: Double, talkerKilobitsPerSecond: Double) {
        let call = try GroupVoiceSimulation(participants: count, seed: seed, configuration: configuration)
        let silence = [Int16](repeating: 0, count: VoiceFormat.standard.samplesPerFrame)
        var played = Array(repeating: [Int16](), count: count - 1)
        let frames = Self.frames(of: speech)
        let start = processCPUSeconds()
        for index in 0..<frames {
            var microphones = Array(repeating: silence, count: count)
            microphones[0] = Self.frame(speech, index)
            let out = try call.step(microphones: microphones)
            for listener in 1..<count { played[listener - 1] += out[listener] }
        }
        let seconds = Double(frames * VoiceFormat.standard.frameMilliseconds) / 1000
        let cpu = (processCPUSeconds() - start) / Double(count) / seconds * 100
        return (played.map { Array($0.prefix(speech.count)) }, cpu, Double(call.sentBytes[0]) * 8 / seconds / 1000)
    }

    /// Everyone talks at once, each from another point of the speech; one participant's share
    /// of a core in percent.
    static func cpuRun(participants count: Int, speech: [Int16], seed: UInt64) throws -> Double {
        let call = try GroupVoiceSimulation(participants: count, seed: seed)
        let frames = Self.frames(of: speech)
        let speechFrames = max(1, frames - 50)
        let start = processCPUSeconds()
        for index in 0..<frames {
            let microphones = (0..<count).map { Self.frame(speech, (index + $0 * speechFrames / count) % speechFrames) }
            _ = try call.step(microphones: microphones)
        }
        let seconds = Double(frames * VoiceFormat.standard.frameMilliseconds) / 1000
        return (processCPUSeconds() - start) / Double(count) / seconds * 100
    }
}
