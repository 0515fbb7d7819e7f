import GameKitVoiceEngine
import Testing
import VoiceTestSupport

/// Double talk without an echo path (a headset, WAV files): nothing is echo, so nothing may be
/// suppressed; with the benchmark's room the start-up suppressor still holds the echo down.
@Suite("Double talk: no echo path, no suppression")
struct DoubleTalkTests {
    /// The microphone and far end, frame by frame through a detector; returns the frame index at
    /// which it found no echo (nil: never) and its last correlation.
    static func detect(near: [Int16], far: [Int16]) -> (verdictFrame: Int?, correlation: Double, echo: Bool) {
        var detector = EchoPresenceDetector(frameSamples: 320, tailMilliseconds: 200)
        let nearFrames = VoiceTestSupport.frames(near, size: 320)
        let farFrames = VoiceTestSupport.frames(far, size: 320)
        var verdict: Int?
        for index in 0..<min(nearFrames.count, farFrames.count) where detector.process(near: nearFrames[index], far: farFrames[index]) {
            verdict = verdict ?? index
        }
        return (verdict, detector.correlation, detector.echo)
    }

    /// The benchmark room's echo of `far`, without noise.
    static func echo(of far: [Int16]) -> [Int16] {
        EchoMeasurement.echo(of: far, path: EchoMeasurement.EchoPath()).map { Int16(max(-32768, min(32767, $0.rounded()))) }
    }

    @Test("The detector finds no echo in a microphone that hears only a near talker or silence, and never in one that hears the room's echo")
    func detectorTellsEchoFromNone() throws {
        let far = try VoiceTestSupport.speech()
        let talker = Array(far.reversed())
        let silence = [Int16](repeating: 0, count: far.count)
        let echo = Self.echo(of: far)
        // The room's echo, alone and under a near talker as loud as the far end: echo, all along.
        let alone = Self.detect(near: echo, far: far)
        #expect(alone.verdictFrame == nil && alone.correlation > 0.3 && alone.echo, "\(alone)")
        let underTalker = Self.detect(near: zip(echo, talker).map { Int16(clamping: Int($0) + Int($1)) }, far: far)
        #expect(underTalker.verdictFrame == nil && underTalker.correlation > 0.2, "\(underTalker)")
        // A quieter echo (−20 dB) alone is still echo: the correlation does not depend on the gain.
        let quiet = Self.detect(near: echo.map { $0 / 10 }, far: far)
        #expect(quiet.verdictFrame == nil && quiet.echo, "\(quiet)")
        // No echo path: a near talker over the far end, or silence, within 3 s (150 frames).
        let headset = Self.detect(near: talker, far: far)
        #expect((headset.verdictFrame ?? .max) < 150 && !headset.echo, "\(headset)")
        let mute = Self.detect(near: silence, far: far)
        #expect((mute.verdictFrame ?? .max) < 150, "\(mute)")
        // No verdict while the far end has not talked: nothing is known of the echo path yet.
        #expect(Self.detect(near: talker, far: silence).verdictFrame == nil)
    }

    @Test("Without an echo path, speex with the start-up suppressor lets go at once, and a near talker quieter than the far end keeps every dB", arguments: [1, 10])
    func noEchoNoSuppression(second: Int) throws {
        let far = try VoiceTestSupport.speech()
        let near = Array(far.reversed()).map { $0 / 2 }  // 6 dB under the far end: Geigel's test calls it echo
        let canceller = try SpeexEchoCanceller()
        let result = try EchoMeasurement.run(canceller: canceller, far: far, near: near, path: .none, doubleTalkAt: second)
        #expect(canceller.startupSuppressor?.release == .noEcho)
        // Before: 7-8 dB on average, up to 30 in a frame (issue 29). What remains is speex's own
        // preprocessor (noise suppression).
        #expect(result.doubleTalkAttenuationDecibels < 1.5, "\(result.doubleTalkAttenuationDecibels) dB")
        let quality = try VoiceTestSupport.quality(reference: result.doubleTalkReference, degraded: result.doubleTalkOutput)
        #expect(quality.pesq ?? 1 >= 3.0, "PESQ-WB \(String(describing: quality.pesq))")
        // Control: the suppressor without the detector cuts that talker.
        var waiting = StartupEchoSuppressor()
        waiting.releasesWithoutEcho = false
        let cutCanceller = try SpeexEchoCanceller(startupSuppression: waiting)
        let cut = try EchoMeasurement.run(canceller: cutCanceller, far: far, near: near, path: .none, doubleTalkAt: second)
        #expect(cut.doubleTalkAttenuationDecibels > result.doubleTalkAttenuationDecibels + 2, "\(cut.doubleTalkAttenuationDecibels) dB")
        #expect(cutCanceller.startupSuppressor?.release == nil)
    }

    @Test("With the room's echo the suppressor still holds the start down and lets go only when speex has converged")
    func roomEchoStillSuppressed() throws {
        let far = try VoiceTestSupport.speech() + VoiceTestSupport.speech()
        let near = Array(try VoiceTestSupport.speech().reversed())
        let canceller = try SpeexEchoCanceller()
        let result = try EchoMeasurement.run(canceller: canceller, far: far, near: near)
        #expect(canceller.startupSuppressor?.release == .converged)
        #expect(result.erleFirst3sDecibels >= 15)
    }
}
