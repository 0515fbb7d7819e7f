import Foundation
import GameKitVoiceEngine
import Testing
import VoiceTestSupport

/// The speech scorer (Tests/Peers/voice_quality.py) that gk-bench voice and the voice tests use.
/// A receiver whose playout delay moves during a call (an adaptive buffer that stretches) must
/// not lose STOI for it: STOI aligns each utterance on its own, and a constant delay scores the
/// same as under one global alignment.
@Suite("Speech scoring")
struct SpeechScoringTests {
    /// The reference with `lead` samples of silence before it, and `moved` more inserted at its
    /// quietest 20 ms frame between 40 % and 60 % of it (a pause: no speech is cut).
    static func delayed(_ speech: [Int16], lead: Int, moved: Int) -> [Int16] {
        let frame = VoiceFormat.sampleRate / 50
        let frames = (speech.count * 4 / 10 / frame)..<(speech.count * 6 / 10 / frame)
        let quietest = frames.min { a, b in
            VoiceTestSupport.level(speech[a * frame..<(a + 1) * frame]) < VoiceTestSupport.level(speech[b * frame..<(b + 1) * frame])
        }!
        let cut = quietest * frame
        return [Int16](repeating: 0, count: lead) + speech[..<cut] + [Int16](repeating: 0, count: moved) + speech[cut...]
    }

    @Test func aConstantDelayScoresTheSameEitherWay() throws {
        let speech = try VoiceTestSupport.speech()
        let quality = try VoiceTestSupport.quality(reference: speech, degraded: Self.delayed(speech, lead: 640, moved: 0))
        #expect(abs(quality.delayMilliseconds - 40) < 1)
        #expect(quality.delaySpreadMilliseconds < 1)
        #expect(abs(quality.stoi - quality.stoiGlobal) < 0.001, "\(quality)")
        #expect(quality.stoi > 0.99, "\(quality)")
    }

    /// A call shorter than the speech (the NAT tests record 10 s of a longer reference) is scored
    /// over what it covers, both ways: the per-utterance figure counted the uncovered rest as
    /// lost at first (the client-channel NAT call, 2.5 s of set-up: 0.50 against the test's 0.6).
    @Test func aRecordingThatEndsEarlyIsScoredOverWhatItCovers() throws {
        let speech = try VoiceTestSupport.speech()
        let quality = try VoiceTestSupport.quality(
            reference: speech, degraded: Array(Self.delayed(speech, lead: 640, moved: 0).prefix(speech.count * 6 / 10)))
        #expect(quality.stoi > 0.99 && abs(quality.stoi - quality.stoiGlobal) < 0.001, "\(quality)")
    }

    @Test func aPlayoutDelayThatMovesCostsNoIntelligibility() throws {
        let speech = try VoiceTestSupport.speech()
        // 40 ms, then 30 ms more from the middle on: what an adaptive buffer that grew does.
        let quality = try VoiceTestSupport.quality(reference: speech, degraded: Self.delayed(speech, lead: 640, moved: 480))
        #expect((25...35).contains(quality.delaySpreadMilliseconds), "\(quality)")
        #expect(quality.stoi > 0.99, "\(quality)")
        // One global alignment misses half the speech by 30 ms, and STOI counts it as lost.
        #expect(quality.stoiGlobal < quality.stoi - 0.02, "\(quality)")
    }
}
