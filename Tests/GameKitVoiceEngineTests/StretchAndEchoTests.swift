import Foundation
@testable import GameKitVoiceEngine
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
}
