import Foundation
import GameKitVoiceEngine
import Testing
import VoiceTestSupport

/// Double talk without an echo path (a headset, WAV files): nothing is echo, so nothing may be
/// suppressed, from the first frame; with the benchmark's room the start-up suppressor still holds
/// the echo down.
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

    @Test("Without an echo path, speex with the start-up suppressor never suppresses, and a near talker quieter than the far end keeps every dB, from the first word on", arguments: [0, 1, 10])
    func noEchoNoSuppression(second: Int) throws {
        let far = try VoiceTestSupport.speech()
        let near = Array(far.reversed()).map { $0 / 2 }  // 6 dB under the far end: Geigel's test calls it echo
        let canceller = try SpeexEchoCanceller()
        let result = try EchoMeasurement.run(canceller: canceller, far: far, near: near, path: .none, doubleTalkAt: second)
        #expect(canceller.startupSuppressor?.release == .noEcho)
        // Not a frame, not even before the detector's verdict: the microphone never correlated
        // with the far end (at 0 s the two talk from the first word; the suppressor used to cut
        // the near talker until the verdict, 0.5 s and more).
        #expect(canceller.startupSuppressor?.attenuatedFrames == 0)
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
        #expect(!canceller.isBypassed && !canceller.echoAppeared, "an echo path never bypasses the canceller")
    }

    @Test("With the room's echo the suppressor holds down every echo frame from the first one in which the microphone hears the far end")
    func roomEchoHeldFromItsOnset() throws {
        let far = try VoiceTestSupport.speech()
        let echo = Self.echo(of: far)
        var suppressor = StartupEchoSuppressor()
        let echoFrames = VoiceTestSupport.frames(echo, size: 320)
        let farFrames = VoiceTestSupport.frames(far, size: 320)
        var (input, output) = (0.0, 0.0)
        var passed: [Int] = []
        // The first 3 s; no canceller (the output is the microphone), so the suppressor never lets go.
        for index in 0..<150 {
            let frame = suppressor.process(near: echoFrames[index], far: farFrames[index], output: echoFrames[index])
            let energy = echoFrames[index].reduce(0.0) { $0 + Double($1) * Double($1) }
            input += energy
            output += frame.reduce(0.0) { $0 + Double($1) * Double($1) }
            if frame == echoFrames[index] && energy / 320 > 100 { passed.append(index) }
        }
        #expect(suppressor.mayHearEcho && suppressor.release == nil)
        #expect(suppressor.detector?.echo == true)
        // The correlation dips under the no-echo threshold for two frames just after the echo's
        // onset; suppression that followed it frame by frame passed frame 30 whole (26.7 dB).
        #expect(passed.isEmpty, "echo frames passed whole: \(passed)")
        #expect(10 * log10(input / output) > 29, "\(10 * log10(input / output)) dB")
    }

    /// The canceller's output, frame by frame, for a microphone and a far end; the frame at
    /// which it was first bypassed, and the one at which an echo ended the bypass.
    static func cancel(_ canceller: SpeexEchoCanceller, near: [Int16], far: [Int16]) throws -> (output: [[Int16]], bypassedAt: Int?, echoAt: Int?) {
        let nearFrames = VoiceTestSupport.frames(near, size: 320)
        let farFrames = VoiceTestSupport.frames(far, size: 320)
        var output: [[Int16]] = []
        var (bypassedAt, echoAt): (Int?, Int?) = (nil, nil)
        for index in 0..<min(nearFrames.count, farFrames.count) {
            output.append(try canceller.process(near: nearFrames[index], far: farFrames[index]))
            if canceller.isBypassed, bypassedAt == nil { bypassedAt = index }
            if canceller.echoAppeared, echoAt == nil { echoAt = index }
        }
        return (output, bypassedAt, echoAt)
    }

    @Test("Without an echo path the canceller steps aside: from the detector's verdict on, what goes out is the microphone, bit for bit")
    func noEchoBypassesTheCanceller() throws {
        let far = try VoiceTestSupport.speech()
        let near = Array(far.reversed())  // a near talker over the far end all along
        let nearFrames = VoiceTestSupport.frames(near, size: 320)
        let bypassed = try Self.cancel(SpeexEchoCanceller(), near: near, far: far)
        let verdict = try #require(bypassed.bypassedAt, "never bypassed")
        #expect(verdict < 150, "within 3 s")
        #expect(bypassed.echoAt == nil)
        let after = verdict + 1..<bypassed.output.count
        #expect(after.allSatisfy { bypassed.output[$0] == nearFrames[$0] })
        // Control: without the bypass, speex (its filter adapting on the near talker, its residual
        // echo suppressor) changes those frames.
        let kept = try Self.cancel(SpeexEchoCanceller(bypassesWithoutEcho: false), near: near, far: far)
        #expect(kept.bypassedAt == nil)
        #expect(after.filter { kept.output[$0] != nearFrames[$0] }.count > after.count / 2)
    }

    @Test("An echo that appears while the canceller is bypassed (a speaker in the headset's place) ends the bypass, and speex cancels it")
    func anEchoEndsTheBypass() throws {
        let speech = try VoiceTestSupport.speech()
        let far = speech + speech + speech
        let rate = VoiceFormat.sampleRate
        // No echo path for the first 6 s, then the benchmark's room.
        let switchSample = 6 * rate
        let echo = Self.echo(of: far)
        let microphone = far.indices.map { $0 < switchSample ? Int16(0) : echo[$0] }
        let canceller = try SpeexEchoCanceller()
        let run = try Self.cancel(canceller, near: microphone, far: far)
        let bypassedAt = try #require(run.bypassedAt)
        #expect(bypassedAt < switchSample / 320)
        let echoAt = try #require(run.echoAt, "the echo never ended the bypass")
        #expect(echoAt > switchSample / 320)
        #expect(!canceller.isBypassed)
        // The last 4 s: speex removes the echo (the room's steady ERLE is over 35 dB).
        func energy(_ frames: [[Int16]]) -> Double { frames.joined().reduce(0.0) { $0 + Double($1) * Double($1) } }
        let micTail = energy(Array(VoiceTestSupport.frames(microphone, size: 320).suffix(200)))
        let outTail = energy(Array(run.output.suffix(200)))
        let erle = 10 * log10(micTail / max(outTail, 1))
        #expect(erle > 20, "ERLE \(erle) dB")
    }
}
