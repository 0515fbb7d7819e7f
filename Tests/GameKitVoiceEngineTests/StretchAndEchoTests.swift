import Foundation
@testable import GameKitVoiceEngine
import NetworkImpairment
import Testing
import VoiceTestSupport

@Suite("Time stretching, echo cancellation, WAV files")
struct StretchAndEchoTests {
    @Test("Accelerate and expand change a frame by one pitch period with no jump in the waveform")
    func stretchIsSeamless() throws {
        let sine = VoiceTestSupport.sine(frequency: 200, dBFS: -6, seconds: 0.02)
        let largestStep = zip(sine, sine.dropFirst()).map { abs(Int($1) - Int($0)) }.max()!
        let shorter = try #require(TimeStretch.accelerate(sine))
        let longer = try #require(TimeStretch.expand(sine))
        #expect((sine.count - shorter.count) % 80 == 0 && shorter.count < sine.count)
        #expect((longer.count - sine.count) % 80 == 0 && longer.count > sine.count)
        for stretched in [shorter, longer] {
            let steps = zip(stretched, stretched.dropFirst()).map { abs(Int($1) - Int($0)) }
            #expect(steps.max()! <= largestStep + largestStep / 10)
            // It still begins where the original began (continuous with the previous frame).
            #expect(stretched[0] == sine[0])
        }
        // Loud noise is neither periodic nor quiet: no cut.
        var random = SplitMix(seed: 1)
        let noise = (0..<320).map { _ in Int16.random(in: -20000...20000, using: &random) }
        #expect(TimeStretch.accelerate(noise) == nil)
    }

    @Test("Both echo cancellers remove most of the echo and keep the near-end talker", arguments: [EchoCancellerKind.webrtc, .speex])
    func cancellersCancel(kind: EchoCancellerKind) throws {
        let far = try VoiceTestSupport.speech() + VoiceTestSupport.speech()
        let near = Array(try VoiceTestSupport.speech().reversed())
        let result = try EchoMeasurement.run(canceller: try kind.make(), far: far, near: near)
        #expect(result.erleSteadyDecibels > 10)
        #expect(result.doubleTalkAttenuationDecibels < 10)
        #expect(result.doubleTalkOutput.count == 5 * VoiceFormat.sampleRate)
    }

    @Test("Until the canceller converges, echo-only frames are held down by 30 dB; a near talker louder than the far end passes; once converged, everything passes")
    func startupSuppressionFollowsConvergence() {
        var suppressor = StartupEchoSuppressor()
        let far = VoiceTestSupport.sine(frequency: 300, dBFS: -12, seconds: 0.02)
        let echo = far.map { $0 / 2 }  // an echo path of −6 dB
        let silence = [Int16](repeating: 0, count: far.count)
        // The canceller removes nothing yet: the echo is attenuated (after the first frame's ramp).
        _ = suppressor.process(near: echo, far: far, output: echo)
        let held = suppressor.process(near: echo, far: far, output: echo)
        #expect(abs(VoiceTestSupport.level(held[...]) - (VoiceTestSupport.level(echo[...]) - 30)) < 0.5)
        // The near end talks over it (louder than the loudspeaker): passed as it is, after the ramp.
        let talker = VoiceTestSupport.sine(frequency: 200, dBFS: -3, seconds: 0.02)
        _ = suppressor.process(near: talker, far: far, output: talker)
        #expect(suppressor.process(near: talker, far: far, output: talker) == talker)
        // The far end silent (for the whole window): nothing to hold down.
        for _ in 0..<suppressor.windowFrames { _ = suppressor.process(near: silence, far: silence, output: silence) }
        #expect(suppressor.process(near: talker, far: silence, output: talker) == talker)
        #expect(!suppressor.converged)
        // The canceller now removes 26 dB of the echo: after 25 such frames, converged for good.
        let residual = echo.map { $0 / 20 }
        for _ in 0..<(suppressor.convergedFrames + 30) { _ = suppressor.process(near: echo, far: far, output: residual) }
        #expect(suppressor.converged)
        #expect(suppressor.process(near: echo, far: far, output: echo) == echo)
    }

    @Test("With the start-up suppressor, speex removes 15 dB and more within 3 s of a call's start; without, far less")
    func startupSuppressionSpeedsUpTheStart() throws {
        let far = try VoiceTestSupport.speech() + VoiceTestSupport.speech()
        let near = Array(try VoiceTestSupport.speech().reversed())
        let with = try EchoMeasurement.run(canceller: try SpeexEchoCanceller(), far: far, near: near)
        let without = try EchoMeasurement.run(canceller: try SpeexEchoCanceller(startupSuppression: nil), far: far, near: near)
        #expect(with.erleFirst3sDecibels >= 15)
        #expect(without.erleFirst3sDecibels < with.erleFirst3sDecibels - 6)
        // Converged by the double talk at 12 s: the near end is kept as well as without it.
        #expect(abs(with.doubleTalkAttenuationDecibels - without.doubleTalkAttenuationDecibels) < 0.5)
    }

    @Test("Echo cancellers refuse frames of the wrong size", arguments: EchoCancellerKind.allCases)
    func cancellersCheckFrames(kind: EchoCancellerKind) throws {
        let canceller = try kind.make()
        let size = canceller.frameSize
        #expect(throws: VoiceEngineError.self) { try canceller.process(near: [0, 0], far: [Int16](repeating: 0, count: size)) }
        #expect(throws: VoiceEngineError.self) { try canceller.process(near: [Int16](repeating: 0, count: size), far: [0]) }
        #expect(try canceller.process(near: [Int16](repeating: 0, count: size), far: [Int16](repeating: 0, count: size)).count == size)
    }

    @Test("WAV files round-trip; stereo is mixed down; other rates and junk are refused with a reason")
    func wavFiles() throws {
        let directory = FileManager.default.temporaryDirectory.path
        let path = "\(directory)/ogk-wav-\(getpid()).wav"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let tone = VoiceTestSupport.sine(frequency: 440, dBFS: -6, seconds: 0.5)
        try WAVFile.write(tone, path: path)
        #expect(try WAVFile.read(path: path) == tone)
        // Streaming writer, then the capture device reads it back frame by frame.
        let speaker = try WAVFilePlaybackDevice(path: path)
        try speaker.write(Array(tone[0..<1000]))
        try speaker.write(Array(tone[1000...]))
        speaker.close()
        #expect(throws: VoiceEngineError.self) { try speaker.write([1]) }
        let microphone = try WAVFileCaptureDevice(path: path, pacing: .asFastAsPossible)
        var read: [Int16] = []
        while let frame = try microphone.read(count: 320) { read += frame }
        #expect(Array(read[0..<tone.count]) == tone)
        #expect(read.count == 8000)
        // Stereo at 16 kHz, mixed down; 44.1 kHz refused; garbage refused.
        VoiceTestSupport.run("/usr/bin/sox", ["-n", "-r", "16000", "-c", "2", "-b", "16", "\(path).stereo.wav", "synth", "0.1", "sine", "440"])
        #expect(try WAVFile.read(path: "\(path).stereo.wav").count == 1600)
        VoiceTestSupport.run("/usr/bin/sox", ["-n", "-r", "44100", "-c", "1", "-b", "16", "\(path).44k.wav", "synth", "0.1", "sine", "440"])
        #expect(throws: VoiceEngineError.self) { try WAVFile.read(path: "\(path).44k.wav") }
        _ = FileManager.default.createFile(atPath: "\(path).junk", contents: Data("RIFF\u{0}\u{0}\u{0}\u{0}WAVEdata".utf8))
        #expect(throws: VoiceEngineError.self) { try WAVFile.read(path: "\(path).junk") }
        #expect(throws: VoiceEngineError.self) { try WAVFile.read(path: "/nonexistent.wav") }
        for suffix in [".stereo.wav", ".44k.wav", ".junk"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    @Test("An audio loop runs an engine between devices until the microphone ends")
    func audioLoopRunsToTheEnd() throws {
        let engine = try VoiceEngine(configuration: EnginePair.quiet) { _ in }
        let microphone = MemoryCaptureDevice(samples: VoiceTestSupport.sine(frequency: 440, dBFS: -20, seconds: 1))
        let speaker = MemoryPlaybackDevice()
        let loop = AudioLoop(engine: engine, capture: microphone, playback: speaker, clock: VirtualVoiceClock())
        loop.start()
        #expect(loop.wait() == nil)
        #expect(loop.framesProcessed == 50)
        #expect(speaker.samples.count == 16_000)
        #expect(abs(engine.inputLevel - -20) <= 0.5)
        // A speaker that fails ends the loop with its error.
        speaker.close()
        let failing = AudioLoop(engine: engine, capture: MemoryCaptureDevice(samples: [Int16](repeating: 0, count: 640)), playback: speaker)
        failing.start()
        #expect(failing.wait() == .device("memory is closed"))
    }

    /// The noise suppressor runs only where there is noise: the test speech (digital silence
    /// between words) through the canceller with a silent far end keeps its quality (the
    /// suppressor alone cost 0.5 PESQ-WB points); with steady noise 10 dB under it, the floor is
    /// found and the suppressor runs; the floor follows the noise down again.
    @Test func theNoiseSuppressorRunsOnlyWhereThereIsNoise() throws {
        let speech = try VoiceTestSupport.speech()
        let silence = [Int16](repeating: 0, count: 320)
        func through(_ canceller: SpeexEchoCanceller, _ signal: [Int16]) throws -> [Int16] {
            try VoiceTestSupport.frames(signal).flatMap { try canceller.process(near: $0, far: silence) }
        }
        let clean = try SpeexEchoCanceller()
        let cleanOut = try through(clean, speech)
        #expect(!clean.isDenoising)
        #expect((clean.noiseFloor.floorDecibels ?? 0) < -80)
        let untouched = try VoiceTestSupport.quality(reference: speech, degraded: speech)
        let processed = try VoiceTestSupport.quality(reference: Array(speech.prefix(cleanOut.count)), degraded: cleanOut)
        #expect(try #require(untouched.pesq) - (processed.pesq ?? 1) < 0.05, "\(processed) against \(untouched)")

        // Seeded white noise 10 dB under the speech's mean level.
        var random = SeededRandom(seed: 3)
        let power = speech.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(speech.count)
        let amplitude = sqrt(3 * power / 10)
        let noisy = speech.map { Int16(clamping: Int(Double($0) + amplitude * Double.random(in: -1...1, using: &random))) }
        let gated = try SpeexEchoCanceller()
        _ = try through(gated, noisy)
        #expect(gated.isDenoising)
        let floor = try #require(gated.noiseFloor.floorDecibels)
        #expect(floor > -60 && floor < Double(LevelMeter.level(of: Array(speech.prefix(320 * 50)))), "floor \(floor)")
        // Quiet again: the floor falls with the window and the suppressor stops.
        _ = try through(gated, [Int16](repeating: 0, count: 320 * 200))
        #expect(!gated.isDenoising)
        // The far end heard: there may be echo, and the suppressor takes residual echo too; until
        // the detector finds none (the microphone hears another talker, not the loudspeaker).
        let farTalks = try SpeexEchoCanceller()
        let farFrames = VoiceTestSupport.frames(speech)
        let nearFrames = VoiceTestSupport.frames(Array(speech.reversed()))
        var denoisedWhileUndecided = 0
        for (near, far) in zip(nearFrames, farFrames) {
            _ = try farTalks.process(near: near, far: far)
            if farTalks.isDenoising && farTalks.startupSuppressor?.release == nil { denoisedWhileUndecided += 1 }
        }
        #expect(denoisedWhileUndecided > 0)
        #expect(farTalks.startupSuppressor?.release == .noEcho)
        #expect(!farTalks.isDenoising)
        // Switched off, it never runs; ungated, it always does.
        let off = try SpeexEchoCanceller(noiseSuppression: false)
        _ = try through(off, noisy)
        #expect(!off.isDenoising)
        #expect(try SpeexEchoCanceller(noiseGateDecibels: nil).isDenoising)
    }
}
