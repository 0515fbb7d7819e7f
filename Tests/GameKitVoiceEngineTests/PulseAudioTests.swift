import Foundation
import GameKitVoiceEngine
import VoiceTestSupport
import Testing

@Suite("PulseAudio devices")
struct PulseAudioTests {
    @Test("Speech played into a headless PulseAudio microphone sink arrives at the far engine's speaker sink")
    func speechCrossesRealPulseAudio() throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["ogk_mic", "ogk_discard", "ogk_silence", "ogk_speaker"])
        defer { server.stop() }
        final class Peer: @unchecked Sendable { var engine: VoiceEngine? }
        let peer = Peer()
        let clock = MonotonicVoiceClock()
        let a = try VoiceEngine { peer.engine?.receive($0, atMilliseconds: clock.milliseconds()) }
        let b = try VoiceEngine { _ in }
        peer.engine = b
        let devices = [
            try PulseAudioDevice(.capture, device: "ogk_mic.monitor", server: server.address),
            try PulseAudioDevice(.playback, device: "ogk_discard", server: server.address),
            try PulseAudioDevice(.capture, device: "ogk_silence.monitor", server: server.address),
            try PulseAudioDevice(.playback, device: "ogk_speaker", server: server.address),
        ]
        defer { devices.forEach { $0.close() } }
        let loops = [
            AudioLoop(engine: a, capture: devices[0], playback: devices[1]),
            AudioLoop(engine: b, capture: devices[2], playback: devices[3]),
        ]
        loops.forEach { $0.start() }
        let received = try VoiceTestSupport.playSpeechAndRecord(server: server, into: "ogk_mic", recording: "ogk_speaker.monitor")
        loops.forEach { $0.stop() }
        for loop in loops { #expect(loop.wait() == nil) }
        #expect(a.currentStatistics.packetsSent > 100)
        let quality = try VoiceTestSupport.quality(reference: try VoiceTestSupport.speech(), degraded: received)
        #expect(quality.stoi > 0.6, "sender \(a.currentStatistics); receiver \(b.currentStatistics)")
        #expect(quality.delayMilliseconds > 0)
    }

    @Test("A device that cannot be opened is an error naming it")
    func missingDevice() throws {
        let server = try PrivatePulseAudioServer(nullSinks: ["ogk_only"])
        defer { server.stop() }
        #expect(throws: VoiceEngineError.self) { try PulseAudioDevice(.playback, device: "no_such_sink", server: server.address) }
        let playback = try PulseAudioDevice(.playback, device: "ogk_only", server: server.address)
        #expect(throws: VoiceEngineError.self) { try playback.read(count: 320) }
        playback.close()
        #expect(throws: VoiceEngineError.self) { try playback.write([0]) }
    }
}
