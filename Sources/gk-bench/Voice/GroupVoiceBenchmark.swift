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
///   (`pesq_wb_mean` the mean), to set beside the two-party `clean` row.
/// - `cpu_pct`: everyone talks at once (the speech, each from another offset), the worst case
///   for decoding; the process's CPU time ÷ N ÷ the audio's duration: one participant's share of
///   one core, against the 5 % (`ratio_vs_target`). `cpu_pct_one_talker` is the same
///   for the quality run. Both include the simulation's own work (impairment models, copying).
/// - `mouth_to_ear_ms_p50/p95`: chirps through a private PulseAudio, the talker's capture to
///   one listener's playback, with all N engines running on their audio devices in this process.
enum GroupVoiceBenchmark {
    /// The ceiling on one participant's share of a core, in percent.
    static let cpuTargetPercent = 5.0

    static func rows(
        sizes: [Int], speech: [Int16], quality: SpeechQuality, seed: UInt64, chirps: Int?, workspace: String
    ) throws -> [[String: Any]] {
        try sizes.map { count in
            let listening = try Self.qualityRun(participants: count, speech: speech, seed: seed)
            var scores: [Double] = []
            for (index, played) in listening.played.enumerated() {
                if let pesq = try quality.measure(reference: speech, degraded: played, name: "group\(count)-\(index)").pesq { scores.append(pesq) }
            }
            let cpu = try Self.cpuRun(participants: count, speech: speech, seed: seed)
            var row: [String: Any] = [
                "work": "group-\(count)", "impl": "opengamekit", "participants": count,
                "pesq_wb": scores.min() ?? NSNull(), "pesq_wb_mean": scores.isEmpty ? NSNull() : scores.reduce(0, +) / Double(scores.count),
                "cpu_pct": cpu, "cpu_pct_one_talker": listening.cpuPercent, "ratio_vs_target": cpu / Self.cpuTargetPercent,
                "kbps": listening.talkerKilobitsPerSecond,
                "mouth_to_ear_ms_p50": NSNull(), "mouth_to_ear_ms_p95": NSNull(),
            ]
            if let chirps {
                let latency = try MouthToEar.measure(chirps: chirps, workspace: workspace, impl: "group-\(count)", pipeline: Self.engines(count))
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
    static func qualityRun(participants count: Int, speech: [Int16], seed: UInt64) throws -> (played: [[Int16]], cpuPercent: Double, talkerKilobitsPerSecond: Double) {
        let call = try GroupVoiceSimulation(participants: count, seed: seed)
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

    /// N engines in this process, each on PulseAudio devices: the talker on the room's left
    /// channel, one listener playing into its right, the rest on silence and a discarding sink.
    static func engines(_ count: Int) -> MouthToEar.Pipeline {
        { address in
            final class Wiring: @unchecked Sendable {
                var engines: [GroupVoiceEngine] = []
            }
            let wiring = Wiring()
            let clock = MonotonicVoiceClock()
            for index in 0..<count {
                let id = GroupVoiceSimulation.id(index)
                let engine = try GroupVoiceEngine(localParticipant: id) { packet, destination in
                    let now = clock.milliseconds()
                    for (other, engine) in wiring.engines.enumerated() where other != index {
                        if case .participant(let target) = destination, target != GroupVoiceSimulation.id(other) { continue }
                        engine.receive(packet, from: id, atMilliseconds: now)
                    }
                }
                for other in 0..<count where other != index { try engine.add(GroupVoiceSimulation.id(other)) }
                wiring.engines.append(engine)
            }
            var devices: [PulseAudioDevice] = []
            var loops: [AudioLoop] = []
            for (index, engine) in wiring.engines.enumerated() {
                let capture = try PulseAudioDevice(.capture, device: index == 0 ? "ogk_mic" : "ogk_silence.monitor", server: address)
                let playback = try PulseAudioDevice(.playback, device: index == 1 ? "ogk_right" : "ogk_discard", server: address)
                devices += [capture, playback]
                loops.append(AudioLoop(engine: engine, capture: capture, playback: playback, clock: clock))
            }
            loops.forEach { $0.start() }
            return {
                loops.forEach { $0.stop() }
                loops.forEach { $0.wait() }
                devices.forEach { $0.close() }
            }
        }
    }
}
