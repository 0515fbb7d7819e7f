import Foundation
@testable import GameKitVoiceEngine
import NetworkImpairment
import Testing
import VoiceSimulation
import VoiceTestSupport

/// Group calls in virtual time (VoiceSimulation), without echo cancellation: the codec, jitter
/// buffer and mixing path.
@Suite("Group voice engine")
struct GroupEngineTests {
    static let frame = VoiceFormat.standard.samplesPerFrame
    static let silence = [Int16](repeating: 0, count: frame)

    static func simulation(_ count: Int, impairment: ImpairmentProfile = ImpairmentProfile(), seed: UInt64 = 1,
                           path: ((Int, Int) -> ImpairmentProfile)? = nil) throws -> GroupVoiceSimulation {
        var configuration = VoiceEngine.Configuration()
        configuration.echoCanceller = .none
        return try GroupVoiceSimulation(participants: count, impairment: impairment, seed: seed, pathImpairment: path, configuration: configuration)
    }

    /// Runs `seconds`, participant i saying `voice(i, frame)` (nil: silence); returns what each
    /// played.
    static func run(_ simulation: GroupVoiceSimulation, seconds: Double, voice: (Int, Int) -> [Int16]?) throws -> [[Int16]] {
        var played = Array(repeating: [Int16](), count: simulation.engines.count)
        for _ in 0..<Int(seconds * 50) {
            let index = simulation.frame
            let out = try simulation.step(microphones: simulation.engines.indices.map { voice($0, index) ?? silence })
            for (participant, frame) in out.enumerated() { played[participant] += frame }
        }
        return played
    }

    static let toneA = VoiceTestSupport.sine(frequency: 440, dBFS: -20, seconds: 10)
    static let toneB = VoiceTestSupport.sine(frequency: 1000, dBFS: -20, seconds: 10)
    static func slice(_ signal: [Int16], _ frame: Int) -> [Int16] { Array(signal[frame * Self.frame..<(frame + 1) * Self.frame]) }

    @Test("Four participants: each hears the mix of the others and never itself; meters per participant")
    func everyoneHearsTheOthersMixed() throws {
        let call = try Self.simulation(4)
        let played = try Self.run(call, seconds: 3) { participant, frame in
            participant == 0 ? Self.slice(Self.toneA, frame) : participant == 1 ? Self.slice(Self.toneB, frame) : nil
        }
        // The last second, after the buffers filled.
        let tail = { (participant: Int) in played[participant].suffix(VoiceFormat.sampleRate) }
        for listener in [2, 3] {
            #expect(abs(VoiceTestSupport.toneLevel(tail(listener), frequency: 440) - -20) < 2, "listener \(listener) hears A")
            #expect(abs(VoiceTestSupport.toneLevel(tail(listener), frequency: 1000) - -20) < 2, "listener \(listener) hears B")
            let engine = call.engines[listener]
            #expect(abs(engine.level(of: 1)! - -20) < 1.5)
            #expect(abs(engine.level(of: 2)! - -20) < 1.5)
            #expect(engine.level(of: GroupVoiceSimulation.id(listener == 2 ? 3 : 2))! < -60, "the silent one reads silent")
        }
        // A hears B and not itself.
        #expect(abs(VoiceTestSupport.toneLevel(tail(0), frequency: 1000) - -20) < 2)
        #expect(VoiceTestSupport.toneLevel(tail(0), frequency: 440) < -50)
        #expect(call.engines[0].participantIDs == [2, 3, 4])
        let statistics = call.engines[2].currentStatistics
        #expect(statistics.participants.count == 3)
        #expect(statistics.participants[1]!.packetsReceived >= 140)
        #expect(statistics.reportsSent >= 6, "a report a second to each of three senders")
    }

    @Test("A participant's volume scales only that participant in the mix and its meter")
    func perParticipantVolume() throws {
        let call = try Self.simulation(3)
        #expect(call.engines[2].setVolume(0.1, of: 1))
        #expect(call.engines[2].volume(of: 1) == 0.1)
        let played = try Self.run(call, seconds: 3) { participant, frame in
            participant == 0 ? Self.slice(Self.toneA, frame) : participant == 1 ? Self.slice(Self.toneB, frame) : nil
        }
        let tail = played[2].suffix(VoiceFormat.sampleRate)
        #expect(abs(VoiceTestSupport.toneLevel(tail, frequency: 440) - -40) < 2, "A at −20 dB")
        #expect(abs(VoiceTestSupport.toneLevel(tail, frequency: 1000) - -20) < 2, "B untouched")
        #expect(abs(call.engines[2].level(of: 1)! - -40) < 1.5)
        // Elsewhere A is at full volume.
        #expect(abs(VoiceTestSupport.toneLevel(played[1].suffix(VoiceFormat.sampleRate), frequency: 440) - -20) < 2)
        // Clamped and refused.
        call.engines[2].setVolume(7, of: 2)
        #expect(call.engines[2].volume(of: 2) == 1)
        call.engines[2].setVolume(.nan, of: 2)
        #expect(call.engines[2].volume(of: 2) == 1)
        #expect(!call.engines[2].setVolume(0.5, of: 99))
        #expect(call.engines[2].volume(of: 99) == nil)
        #expect(call.engines[2].level(of: 99) == nil)
    }

    @Test("Active speaker: turns of speech are followed, the local talker included, in order")
    func activeSpeakerFollowsTurns() throws {
        let call = try Self.simulation(3)
        // A talks 0–2 s, B 3–5 s, nobody after; C listens.
        _ = try Self.run(call, seconds: 6.5) { participant, frame in
            switch participant {
            case 0 where frame < 100: Self.slice(Self.toneA, frame)
            case 1 where frame >= 150 && frame < 250: Self.slice(Self.toneB, frame)
            default: nil
            }
        }
        let atC = call.changes[2].map(\.change)
        #expect(atC == [.speaking(1, true), .activeSpeaker(1), .speaking(1, false), .speaking(2, true), .activeSpeaker(2), .speaking(2, false)])
        // A sees itself (the local participant) speak, then B.
        let atA = call.changes[0].map(\.change)
        #expect(atA == [.speaking(1, true), .activeSpeaker(1), .speaking(1, false), .speaking(2, true), .activeSpeaker(2), .speaking(2, false)])
        #expect(call.engines[2].activeSpeaker == 2, "the active speaker stays on the last one through silence")
        #expect(call.engines[2].speakers.isEmpty)
        // Starts within a few frames of the voice reaching C (onset 3 of 5 frames, plus the
        // jitter buffer), ends after the hangover.
        let startA = call.changes[2].first { $0.change == .speaking(1, true) }!.frame
        let endA = call.changes[2].first { $0.change == .speaking(1, false) }!.frame
        #expect((3...10).contains(startA))
        #expect((125...135).contains(endA))
    }

    @Test("A louder talker takes over the active speaker while the first still talks; leaving moves it on")
    func louderTalkerTakesOver() throws {
        let call = try Self.simulation(4)
        let quiet = VoiceTestSupport.sine(frequency: 440, dBFS: -35, seconds: 10)
        _ = try Self.run(call, seconds: 3) { participant, frame in
            switch participant {
            case 0: Self.slice(quiet, frame)
            case 1 where frame >= 50: Self.slice(Self.toneB, frame)
            default: nil
            }
        }
        let atD = call.changes[3].map(\.change)
        #expect(atD == [.speaking(1, true), .activeSpeaker(1), .speaking(2, true), .activeSpeaker(2)])
        #expect(call.engines[3].speakers == [1, 2], "both still speaking")
        // B leaves while speaking: it stops, and the active speaker moves to A, still talking.
        call.leave(1)
        #expect(call.changes[3].suffix(2).map(\.change) == [.speaking(2, false), .activeSpeaker(1)])
        #expect(call.engines[3].participantIDs == [1, 3])
        // A leaves too: nobody is left speaking.
        call.leave(0)
        #expect(call.changes[3].suffix(2).map(\.change) == [.speaking(1, false), .activeSpeaker(nil)])
    }

    @Test("One stream serves every receiver: it is planned for the worst report, and forgets a receiver that left")
    func streamPlannedForTheWorstReceiver() throws {
        // A → B loses bursts of 3 packets on average (10 %); A → C is clean.
        let call = try Self.simulation(3, seed: 7) { from, to in
            from == 0 && to == 1 ? ImpairmentProfile(burstLoss: BurstLoss(averageLoss: 0.10, meanBurstLength: 3)) : ImpairmentProfile()
        }
        _ = try Self.run(call, seconds: 5) { participant, frame in participant == 0 ? Self.slice(Self.toneA, frame) : nil }
        let a = call.engines[0]
        #expect(a.currentStatistics.participants[2]!.lastReportedLossPercent > 0)
        #expect(a.currentStatistics.participants[3]!.lastReportedLossPercent == 0)
        #expect(a.currentStatistics.expectedLossPercent == OpusSettings().maximumExpectedLossPercent, "B's loss shapes A's FEC")
        #expect(a.currentStatistics.burstCover >= 2, "B asks for cover, C does not: the stream carries it")
        #expect(call.engines[1].currentStatistics.participants[1]!.jitter.recoveredByCopy > 0, "B plays copies of frames lost in bursts")
        a.remove(2)
        #expect(a.currentStatistics.expectedLossPercent == 0, "only C's clean reports are left")
        #expect(a.currentStatistics.burstCover == 0)
    }

    @Test("Bad input: strangers' and malformed packets are counted and dropped; the call's limits are errors")
    func badInput() throws {
        let engine = try GroupVoiceEngine(localParticipant: 1, send: { _, _ in })
        try engine.add(2)
        try engine.add(2)  // again: nothing
        #expect(engine.participantIDs == [2])
        engine.receive([0x11, 0, 0], from: 2, atMilliseconds: 0)
        engine.receive(VoicePacket.audio(sequence: 1, timestamp: 320, muted: false, payload: [1, 2, 3]).encoded(), from: 3, atMilliseconds: 0)
        let statistics = engine.currentStatistics
        #expect(statistics.rejectedPackets == 1)
        #expect(statistics.unknownParticipantPackets == 1)
        #expect(statistics.participants[2]!.packetsReceived == 0)
        #expect(throws: VoiceEngineError.self) { try engine.add(1) }
        for id in 3...UInt32(GroupVoiceEngine.maximumParticipants + 1) { try engine.add(id) }
        #expect(engine.participantIDs.count == GroupVoiceEngine.maximumParticipants)
        #expect(throws: VoiceEngineError.self) { try engine.add(500) }
        #expect(throws: VoiceEngineError.wrongFrameSize(expected: Self.frame, got: 10)) {
            _ = try engine.process(microphone: [Int16](repeating: 0, count: 10), atMilliseconds: 0)
        }
        engine.remove(77)  // not there: nothing
        #expect(engine.participantIDs.count == GroupVoiceEngine.maximumParticipants)
        // Packets queue until a frame or a call takes them in; past the limit the oldest go.
        let packet = VoicePacket.audio(sequence: 1, timestamp: 320, muted: false, payload: [0x08, 1]).encoded()
        for _ in 0..<(GroupVoiceEngine.maximumQueuedPackets + 5) { engine.receive(packet, from: 2, atMilliseconds: 0) }
        let after = engine.currentStatistics
        #expect(after.droppedArrivals == 5)
        #expect(after.participants[2]!.packetsReceived == GroupVoiceEngine.maximumQueuedPackets)
    }

    @Test("With no participant the microphone still goes out and silence is played")
    func aloneInTheCall() throws {
        final class Sent: @unchecked Sendable { var destinations: [GroupVoiceEngine.Destination] = [] }
        let sent = Sent()
        let engine = try GroupVoiceEngine(localParticipant: 1, send: { _, destination in sent.destinations.append(destination) })
        for frame in 0..<10 {
            let out = try engine.process(microphone: Self.slice(Self.toneA, frame), atMilliseconds: Int64(frame * 20))
            #expect(out == Self.silence)
        }
        #expect(sent.destinations == Array(repeating: .everyone, count: 10))
    }
}

@Suite("Active speaker detector")
struct ActiveSpeakerDetectorTests {
    typealias Detector = ActiveSpeakerDetector<Int>

    /// Feeds `frames` frames of the given levels; returns the changes with their frame.
    static func feed(_ detector: inout Detector, frames: Int, from start: Int = 0, _ levels: (Int) -> [(Int, Float)]) -> [(Int, Detector.Change)] {
        var changes: [(Int, Detector.Change)] = []
        for frame in start..<start + frames {
            changes += detector.update(levels: levels(frame)).map { (frame, $0) }
        }
        return changes
    }

    @Test("Speaking starts on the third voiced frame of five and ends after 25 unvoiced ones")
    func onsetAndHangover() {
        var detector = Detector()
        // 10 frames of silence, 2 voiced (not enough), 3 quiet, then speech for 1 s, then silence.
        let changes = Self.feed(&detector, frames: 120) { frame in
            let voiced = (10..<12).contains(frame) || (15..<65).contains(frame)
            return [(1, voiced ? -20 : -90)]
        }
        #expect(changes.map(\.1) == [.speaking(1, true), .activeSpeaker(1), .speaking(1, false)])
        #expect(changes[0].0 == 17, "the third voiced frame of the run")
        #expect(changes[2].0 == 64 + 25, "25 frames after the last voiced one")
    }

    @Test("Pauses shorter than the hangover do not flicker; steady noise stops counting once it is the floor")
    func pausesAndNoise() {
        var detector = Detector()
        // Participant 1: 300 ms on, 200 ms off, for 10 s. Participant 2: steady noise at −35
        // dBFS, which reads as speech until 4 s of it make it the floor.
        let changes = Self.feed(&detector, frames: 500) { frame in
            [(1, frame % 25 < 15 ? -25 : -80), (2, -35)]
        }
        // 1 was louder at the onset; the noise is louder on average but not for 25 frames in a
        // row (1's words come within 6 dB of it), so it never takes over.
        #expect(changes.map(\.1) == [.speaking(1, true), .speaking(2, true), .activeSpeaker(1), .speaking(2, false)])
        let noiseEnds = changes.first { $0.1 == .speaking(2, false) }!.0
        #expect(noiseEnds == 200 + 25 - 1, "the floor is the noise after 4 s, then the hangover")
        #expect(detector.isSpeaking(1))
        #expect(!detector.isSpeaking(2))
    }

    @Test("A louder speaker must stay louder for the takeover time; the detector ignores NaN and −∞")
    func takeover() {
        var detector = Detector()
        var changes = Self.feed(&detector, frames: 50) { _ in [(1, -30), (2, -100)] }
        #expect(changes.map(\.1) == [.speaking(1, true), .activeSpeaker(1)])
        // 2 speaks louder, but only for 20 frames (less than 25): no takeover.
        changes = Self.feed(&detector, frames: 20, from: 50) { _ in [(1, -30), (2, -10)] }
        #expect(changes.map(\.1) == [.speaking(2, true)])
        changes = Self.feed(&detector, frames: 10, from: 70) { _ in [(1, -30), (2, -31)] }
        #expect(changes.isEmpty)
        // Then for long enough.
        changes = Self.feed(&detector, frames: 60, from: 80) { _ in [(1, -30), (2, -10)] }
        #expect(changes.map(\.1) == [.activeSpeaker(2)])
        changes = Self.feed(&detector, frames: 5, from: 140) { _ in [(1, .nan), (2, -.infinity)] }
        #expect(changes.isEmpty)
        #expect(detector.speakers == [1, 2])
    }
}
