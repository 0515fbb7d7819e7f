import Foundation
@testable import GameKitVoiceEngine
import Testing
import VoiceTestSupport

/// Two engines wired back to back in virtual time.
final class EnginePair: @unchecked Sendable {
    let a: VoiceEngine
    let b: VoiceEngine
    private var toA: [[UInt8]] = []
    private var toB: [[UInt8]] = []
    private(set) var now: Int64 = 0
    var dropToB: (Int) -> Bool = { _ in false }
    private var sentToB = 0

    init(configuration: VoiceEngine.Configuration = EnginePair.quiet) throws {
        let box = Box()
        a = try VoiceEngine(configuration: configuration) { box.pair?.toB.append($0) }
        b = try VoiceEngine(configuration: configuration) { box.pair?.toA.append($0) }
        box.pair = self
    }

    /// No echo canceller: these tests look at the codec path.
    static var quiet: VoiceEngine.Configuration {
        var configuration = VoiceEngine.Configuration()
        configuration.echoCanceller = .none
        return configuration
    }

    private final class Box: @unchecked Sendable { weak var pair: EnginePair? }

    /// One frame: A hears `microphone`, B hears silence; returns what B plays.
    func step(_ microphone: [Int16]) throws -> [Int16] {
        _ = try a.process(microphone: microphone, atMilliseconds: now)
        for packet in toB {
            defer { sentToB += 1 }
            if !dropToB(sentToB) { b.receive(packet, atMilliseconds: now) }
        }
        toB.removeAll()
        let played = try b.process(microphone: [Int16](repeating: 0, count: microphone.count), atMilliseconds: now)
        for packet in toA { a.receive(packet, atMilliseconds: now) }
        toA.removeAll()
        now += 20
        return played
    }

    func run(_ signal: [Int16]) throws -> [Int16] {
        try VoiceTestSupport.frames(signal).flatMap { try step($0) }
    }
}

@Suite("Voice engine")
struct EngineTests {
    @Test("Meters read a −20 dBFS sine within ±0.5 dB at both ends")
    func metersReadASine() throws {
        let pair = try EnginePair()
        _ = try pair.run(VoiceTestSupport.sine(frequency: 440, dBFS: -20, seconds: 3))
        #expect(abs(pair.a.inputLevel - -20) <= 0.5)
        #expect(abs(pair.b.outputLevel - -20) <= 0.5)
        var meter = LevelMeter()
        #expect(meter.level == LevelMeter.floor)
        meter.measure([Int16](repeating: 0, count: 320))
        #expect(meter.level == LevelMeter.floor)
    }

    @Test("Remote volume 0.5 plays 6 dB quieter (±0.5), and the output meter shows it")
    func volumeHalfIsMinusSixDecibels() throws {
        let full = try EnginePair(), half = try EnginePair()
        half.b.remoteVolume = 0.5
        let tone = VoiceTestSupport.sine(frequency: 300, dBFS: -12, seconds: 2)
        let loud = try full.run(tone), quiet = try half.run(tone)
        let difference = VoiceTestSupport.level(quiet[16_000...]) - VoiceTestSupport.level(loud[16_000...])
        #expect(abs(difference - -6.02) <= 0.5)
        #expect(abs(Double(half.b.outputLevel - full.b.outputLevel) - -6.02) <= 0.5)
        half.b.remoteVolume = 7
        #expect(half.b.remoteVolume == 1)
        half.b.remoteVolume = .nan
        #expect(half.b.remoteVolume == 1)
    }

    @Test("Muting sends silence: the far end plays nothing, while the local input meter still reads")
    func muteReachesTheFarEndAsSilence() throws {
        let pair = try EnginePair()
        let tone = VoiceTestSupport.sine(frequency: 440, dBFS: -10, seconds: 1)
        let before = try pair.run(tone)
        pair.a.isMicrophoneMuted = true
        let during = try pair.run(tone + tone)
        #expect(VoiceTestSupport.level(before[8000...]) > -12)
        #expect(VoiceTestSupport.level(during[16_000...]) < -70)
        #expect(pair.a.inputLevel > -11)
        #expect(pair.b.currentStatistics.receiver.mutedPackets > 0)
    }

    @Test("Speech through two engines arrives intelligible")
    func speechArrives() throws {
        let speech = try VoiceTestSupport.speech()
        let pair = try EnginePair()
        let played = try pair.run(speech + [Int16](repeating: 0, count: 8000))
        let quality = try VoiceTestSupport.quality(reference: speech, degraded: played)
        #expect(quality.stoi >= 0.9)
    }

    @Test("With 10 % loss, reports reach the sender, its encoder plans for the loss (up to the ceiling), and FEC recovers frames")
    func reportsDriveFEC() throws {
        var configuration = EnginePair.quiet
        configuration.opus.initialExpectedLossPercent = 0
        let pair = try EnginePair(configuration: configuration)
        pair.dropToB = { $0 % 10 == 3 }
        let speech = try VoiceTestSupport.speech()
        _ = try pair.run(speech)
        let a = pair.a.currentStatistics, b = pair.b.currentStatistics
        #expect(b.reportsSent >= 5)
        #expect(a.reportsReceived == b.reportsSent)
        #expect((8...12).contains(a.lastReportedLossPercent))
        #expect(a.expectedLossPercent == min(a.lastReportedLossPercent, OpusSettings().maximumExpectedLossPercent))
        #expect(a.expectedLossPercent == 5)
        #expect(b.jitter.recoveredByFEC > 20)
    }

    @Test("Bursts of loss: the receiver asks for cover, the sender adds copies, bursts are played from them and quality beats concealment")
    func burstsAreCoveredByCopies() throws {
        // Runs of three lost packets, one every 20 packets (15 %), but for the first 2 s.
        func run(redundancy: Bool) throws -> (VoiceEngine.Statistics, VoiceEngine.Statistics, [Int16]) {
            var configuration = EnginePair.quiet
            configuration.opus.burstRedundancy = redundancy
            let pair = try EnginePair(configuration: configuration)
            pair.dropToB = { $0 >= 100 && $0 % 20 < 3 }
            let speech = try VoiceTestSupport.speech()
            let played = try pair.run(speech + [Int16](repeating: 0, count: 8000))
            return (pair.a.currentStatistics, pair.b.currentStatistics, played)
        }
        let speech = try VoiceTestSupport.speech()
        let (a, b, covered) = try run(redundancy: true)
        #expect(a.burstCover == 3)
        #expect(a.packetsWithCopies > 100)
        #expect(b.jitter.recoveredByCopy > 20)
        let (plainA, plainB, uncovered) = try run(redundancy: false)
        #expect(plainA.burstCover == 0 && plainA.packetsWithCopies == 0 && plainB.jitter.recoveredByCopy == 0)
        #expect(b.jitter.concealed < plainB.jitter.concealed)
        let withCopies = try VoiceTestSupport.quality(reference: speech, degraded: covered)
        let without = try VoiceTestSupport.quality(reference: speech, degraded: uncovered)
        #expect(try #require(withCopies.pesq) > (without.pesq ?? 0))
    }

    @Test("Garbage, empty packets, corrupt Opus and absurd jumps are survived and counted")
    func hostilePacketsAreSurvived() throws {
        let pair = try EnginePair()
        var random = SplitMix(seed: 9)
        let tone = VoiceTestSupport.sine(frequency: 440, dBFS: -20, seconds: 0.02)
        for index in 0..<400 {
            let length = Int.random(in: 0...1400, using: &random)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            // Valid headers (audio, or audio with copies) with random sequence, timestamp and payload.
            if index % 2 == 0, !bytes.isEmpty { bytes[0] = index % 4 == 0 ? 0x11 : 0x13 }
            if index % 4 == 2, bytes.count > 12 {
                bytes[8] = 1  // one copy, 1–3 frames back, of a random length that may fit
                bytes[9] = UInt8(1 + index % 3)
                bytes[10] = 0
            }
            pair.b.receive(bytes, atMilliseconds: pair.now)
            pair.b.receive([], atMilliseconds: pair.now)
            _ = try pair.step(tone)
        }
        let statistics = pair.b.currentStatistics
        #expect(statistics.rejectedPackets >= 400)
        #expect(statistics.jitter.resyncs > 0)
        _ = try pair.run(VoiceTestSupport.sine(frequency: 440, dBFS: -20, seconds: 2))
        #expect(abs(pair.b.outputLevel - -20) <= 1)
    }

    @Test("While copies arrive, the receiver's buffer grows to the whole target, not a frame under it")
    func copiesFillTheBufferToTheTarget() throws {
        let sender = try VoiceSender()
        let receiver = try VoiceReceiver()
        sender.apply(reportedLossPercent: 10, burstCover: 3)
        let tone = VoiceTestSupport.frames(VoiceTestSupport.sine(frequency: 180, dBFS: -20, seconds: 10))
        var lowest = Int.max
        for (index, frame) in tone.enumerated() {
            let packet = try VoicePacket(decoding: try #require(try sender.send(frame: frame)))
            receiver.receive(packet, atMilliseconds: Int64(index * 20))
            _ = receiver.pull()
            // Over the last 2 s, once it has had time to grow.
            if index >= tone.count - 100 { lowest = min(lowest, receiver.bufferedMilliseconds) }
        }
        #expect(receiver.jitterStatistics.accepted == tone.count)
        #expect(receiver.targetDelayMilliseconds == 20 + 3 * 20)  // no jitter: a frame, and three for the copies
        #expect(lowest >= receiver.targetDelayMilliseconds - 10)
        #expect(receiver.statistics.expanded > 0)
    }

    @Test("No delay creep: a sender whose clock runs 1 % fast for 10 minutes leaves the buffer near its target")
    func noDelayCreep() throws {
        // The receiver's jitter buffer alone, with real decoding and stretching.
        let sender = try VoiceSender()
        let receiver = try VoiceReceiver()
        let tone = VoiceTestSupport.frames(VoiceTestSupport.sine(frequency: 180, dBFS: -20, seconds: 10))
        var sendClock = 0.0
        var nextPull: Int64 = 0
        var maximumBuffered = 0
        for index in 0..<30_000 {
            // The sender makes a frame every 19.8 ms of receiver time.
            sendClock += 19.8
            let packet = try #require(try sender.send(frame: tone[index % tone.count]))
            guard case .audio(let sequence, let timestamp, let muted, let payload) = try VoicePacket(decoding: packet) else { continue }
            receiver.receive(sequence: sequence, timestamp: timestamp, muted: muted, payload: payload, atMilliseconds: Int64(sendClock))
            while nextPull <= Int64(sendClock) {
                _ = receiver.pull()
                nextPull += 20
            }
            maximumBuffered = max(maximumBuffered, receiver.bufferedMilliseconds)
        }
        // 600 s at 1 % is 6 s of surplus audio; it was all drained.
        #expect(receiver.statistics.accelerated > 100)
        #expect(receiver.bufferedMilliseconds <= receiver.targetDelayMilliseconds + 60)
        #expect(maximumBuffered <= 200)
    }
}
