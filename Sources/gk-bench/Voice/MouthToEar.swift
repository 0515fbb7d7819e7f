import Foundation
import GameKitVoiceEngine

/// Mouth-to-ear latency through a real PulseAudio: a private headless server holds a stereo null
/// sink, the "room". Chirps are played into its left channel, the source `ogk_mic` (A's
/// microphone); B plays into the room's right channel, the sink `ogk_right`. One recording of the
/// room's monitor holds both channels on one clock, so the delay of each chirp from left to right
/// is mouth to ear: A's capture buffer, everything between A and B, B's jitter buffer and B's
/// playback buffer. What lies between is the caller's `pipeline`.
enum MouthToEar {
    /// Starts a pipeline from the source `ogk_mic` to the sink `ogk_right` on the PulseAudio server
    /// at the given address (`ogk_discard` and `ogk_silence.monitor` are there for the other
    /// directions) and returns what stops it.
    typealias Pipeline = @Sendable (_ server: String) throws -> () -> Void

    /// `count` group engines wired to each other in this process, each on PulseAudio devices:
    /// the talker on `ogk_mic`, one listener playing into `ogk_right`, the rest on silence and a
    /// discarding sink. Two make a call as `VoiceEngine` runs it (a group engine with one other
    /// participant).
    static func engines(_ count: Int = 2) -> Pipeline {
        { address in
            final class Wiring: @unchecked Sendable {
                var engines: [GroupVoiceEngine] = []
            }
            let wiring = Wiring()
            let clock = MonotonicVoiceClock()
            let id: @Sendable (Int) -> GroupVoiceEngine.ParticipantID = { GroupVoiceEngine.ParticipantID($0 + 1) }
            for index in 0..<count {
                let engine = try GroupVoiceEngine(localParticipant: id(index)) { packet, destination in
                    let now = clock.milliseconds()
                    for (other, engine) in wiring.engines.enumerated() where other != index {
                        if case .participant(let target) = destination, target != id(other) { continue }
                        engine.receive(packet, from: id(index), atMilliseconds: now)
                    }
                }
                for other in 0..<count where other != index { try engine.add(id(other)) }
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

    static func measure(chirps: Int, workspace: String, impl: String = "opengamekit", pipeline: Pipeline = engines()) throws -> [String: Any] {
        let rate = VoiceFormat.sampleRate
        let server = try PrivatePulseAudioServer(
            nullSinks: ["ogk_discard", "ogk_silence"],
            extraModules: [
                "module-null-sink sink_name=ogk_room rate=\(rate) channels=2 channel_map=front-left,front-right",
                "module-remap-sink sink_name=ogk_left master=ogk_room channels=1 master_channel_map=front-left channel_map=mono remix=no",
                "module-remap-sink sink_name=ogk_right master=ogk_room channels=1 master_channel_map=front-right channel_map=mono remix=no",
                "module-remap-source source_name=ogk_mic master=ogk_room.monitor channels=1 master_channel_map=front-left channel_map=mono remix=no",
            ])
        defer { server.stop() }
        let stop = try pipeline(server.address)
        defer { stop() }
        Thread.sleep(forTimeInterval: 1)

        // One 100 ms chirp (300 → 3000 Hz, −12 dBFS) per second.
        var signal = [Int16](repeating: 0, count: rate * chirps + rate / 2)
        let chirpLength = rate / 10
        for index in 0..<chirps {
            for n in 0..<chirpLength {
                let t = Double(n) / Double(rate)
                let phase = 2 * Double.pi * (300 * t + 0.5 * 27_000 * t * t)
                signal[index * rate + rate / 4 + n] = Int16(0.25 * 32767 * sin(phase))
            }
        }
        let chirpPath = "\(workspace)/chirps.wav"
        let roomPath = "\(workspace)/room.raw"
        try WAVFile.write(signal, path: chirpPath)
        let recorder = try server.launch("parecord", [
            "--device=ogk_room.monitor", "--rate=\(rate)", "--channels=2", "--format=s16le", "--latency-msec=20", "--raw", roomPath,
        ])
        Thread.sleep(forTimeInterval: 0.3)
        let player = try server.launch("paplay", ["--device=ogk_left", "--latency-msec=20", chirpPath])
        player.wait(seconds: Double(chirps) + 10)
        Thread.sleep(forTimeInterval: 1)
        recorder.signal(SIGINT)
        recorder.wait(seconds: 5)

        guard let raw = FileManager.default.contents(atPath: roomPath) else { throw VoiceEngineError.device("no recording") }
        var left = [Double](), right = [Double]()
        raw.withUnsafeBytes { bytes in
            let samples = bytes.bindMemory(to: Int16.self)
            for index in stride(from: 0, to: samples.count - 1, by: 2) {
                left.append(Double(Int16(littleEndian: samples[index])))
                right.append(Double(Int16(littleEndian: samples[index + 1])))
            }
        }
        let delays = chirpDelays(left: left, right: right, chirpLength: chirpLength)
        let sorted = delays.sorted()
        func percentile(_ p: Double) -> Any { sorted.isEmpty ? NSNull() : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        return [
            "work": "mouth-to-ear", "impl": impl, "chirps": chirps, "detected": delays.count,
            "mouth_to_ear_ms_p50": percentile(0.5), "mouth_to_ear_ms_p95": percentile(0.95),
        ]
    }

    /// For each chirp onset in `left`, the delay in ms to the best match in `right`.
    static func chirpDelays(left: [Double], right: [Double], chirpLength: Int) -> [Double] {
        let rate = VoiceFormat.sampleRate
        let threshold = 0.05 * 32767
        var delays: [Double] = []
        var index = 0
        while index < left.count - chirpLength {
            guard abs(left[index]) > threshold else { index += 1; continue }
            let onset = index
            let template = Array(left[onset..<onset + chirpLength])
            var best = (lag: -1, score: 0.0)
            let maximumLag = min(rate / 2, right.count - onset - chirpLength)
            if maximumLag > 0 {
                for lag in 0..<maximumLag {
                    var score = 0.0
                    for n in stride(from: 0, to: chirpLength, by: 2) { score += template[n] * right[onset + lag + n] }
                    if score > best.score { best = (lag, score) }
                }
            }
            if best.lag >= 0 { delays.append(Double(best.lag) * 1000 / Double(rate)) }
            index = onset + rate / 2
        }
        return delays
    }
}
