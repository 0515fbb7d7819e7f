import Foundation
@testable import GameKitVoiceEngine
import VoiceTestSupport
import Testing

@Suite("Opus codec and voice packets")
struct CodecTests {
    @Test("Speech through Opus at 32 kbit/s stays intelligible (STOI ≥ 0.9)")
    func speechRoundTripIsIntelligible() throws {
        let speech = try VoiceTestSupport.speech()
        var settings = OpusSettings()
        settings.initialExpectedLossPercent = 0
        let encoder = try OpusVoiceEncoder(settings: settings)
        let decoder = try OpusVoiceDecoder()
        var decoded: [Int16] = []
        for frame in VoiceTestSupport.frames(speech) {
            decoded += try decoder.decode(try encoder.encode(frame))
        }
        let quality = try VoiceTestSupport.quality(reference: speech, degraded: decoded)
        #expect(quality.stoi >= 0.9)
        #expect((quality.pesq ?? 0) >= 3.5)
    }

    @Test("A frame of the wrong size is refused with its error")
    func wrongFrameSize() throws {
        let encoder = try OpusVoiceEncoder()
        #expect(throws: VoiceEngineError.wrongFrameSize(expected: 320, got: 100)) { try encoder.encode([Int16](repeating: 0, count: 100)) }
    }

    @Test("Corrupt, empty and oversized Opus packets are errors, and the decoder carries on")
    func corruptPacketsAreErrors() throws {
        let encoder = try OpusVoiceEncoder()
        let decoder = try OpusVoiceDecoder()
        let tone = VoiceTestSupport.sine(frequency: 440, dBFS: -20, seconds: 0.02)
        let good = try encoder.encode(tone)
        #expect(throws: VoiceEngineError.self) { try decoder.decode([]) }
        #expect(throws: VoiceEngineError.self) { try decoder.decode([UInt8](repeating: 0xFF, count: 2000)) }
        // A TOC byte promising more frames than the packet holds (code 3, 48 frames).
        #expect(throws: VoiceEngineError.self) { try decoder.decode([0x0B, 0xFF]) }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let garbage = (0..<Int.random(in: 1...400, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            if let pcm = try? decoder.decode(garbage) { #expect(pcm.count <= 1920) }
        }
        #expect(try decoder.decode(good).count == 320)
    }

    @Test("FEC: with every 10th packet lost, decoding the next packet's FEC copy sounds better than concealing")
    func fecRecoversTheLostFrame() throws {
        let speech = try VoiceTestSupport.speech()
        func played(fec: Bool) throws -> [Int16] {
            var settings = OpusSettings()
            settings.inBandFEC = fec
            settings.initialExpectedLossPercent = fec ? 10 : 0
            let encoder = try OpusVoiceEncoder(settings: settings)
            let decoder = try OpusVoiceDecoder()
            let packets = try VoiceTestSupport.frames(speech).map { try encoder.encode($0) }
            var out: [Int16] = []
            for index in 0..<(packets.count - 1) {
                if index % 10 == 5 {
                    out += fec ? try decoder.decodeFEC(from: packets[index + 1]) : decoder.conceal()
                } else {
                    out += try decoder.decode(packets[index])
                }
            }
            return out
        }
        let recovered = try VoiceTestSupport.quality(reference: speech, degraded: try played(fec: true))
        let concealed = try VoiceTestSupport.quality(reference: speech, degraded: try played(fec: false))
        #expect(try #require(recovered.pesq) > (concealed.pesq ?? 0))
    }

    @Test("Voice packets round-trip; malformed ones are refused with their reason")
    func packets() throws {
        let audio = VoicePacket.audio(sequence: 65535, timestamp: 0xDEAD_BEEF, muted: true, payload: [1, 2, 3])
        #expect(try VoicePacket(decoding: audio.encoded()) == audio)
        let report = VoicePacket.report(lossPercent: 12, highestSequence: 7, jitterMilliseconds: 30, targetDelayMilliseconds: 60)
        #expect(try VoicePacket(decoding: report.encoded()) == report)
        #expect(throws: VoicePacket.DecodeError.empty) { try VoicePacket(decoding: []) }
        #expect(throws: VoicePacket.DecodeError.unsupportedVersion(2)) { try VoicePacket(decoding: [0x21, 0, 0, 0, 0, 0, 0, 0, 1]) }
        #expect(throws: VoicePacket.DecodeError.unknownKind(9)) { try VoicePacket(decoding: [0x19]) }
        #expect(throws: VoicePacket.DecodeError.truncated) { try VoicePacket(decoding: [0x11, 0, 0]) }
        #expect(throws: VoicePacket.DecodeError.emptyAudio) { try VoicePacket(decoding: [0x11, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: VoicePacket.DecodeError.tooLarge(1300)) { try VoicePacket(decoding: [0x11] + [UInt8](repeating: 0, count: 1299)) }
        #expect(throws: VoicePacket.DecodeError.truncated) { try VoicePacket(decoding: [0x12, 1, 2]) }
        // A report's loss is capped at 100 %.
        #expect(try VoicePacket(decoding: [0x12, 250, 0, 0, 0, 0, 0, 0]) == .report(lossPercent: 100, highestSequence: 0, jitterMilliseconds: 0, targetDelayMilliseconds: 0))
    }

    @Test("Packets with copies of earlier frames round-trip; malformed ones are refused with their reason")
    func redundantPackets() throws {
        let earlier = [VoicePacket.EarlierFrame(distance: 2, payload: [7, 7]), .init(distance: 3, payload: [9])]
        let packet = VoicePacket.redundantAudio(sequence: 1, timestamp: 640, muted: false, payload: [1, 2, 3], earlier: earlier)
        let bytes = packet.encoded()
        #expect(bytes == [0x13, 0, 0, 1, 0, 0, 2, 128, 2, 2, 0, 2, 3, 0, 1, 7, 7, 9, 1, 2, 3])
        #expect(try VoicePacket(decoding: bytes) == packet)
        let none = VoicePacket.redundantAudio(sequence: 1, timestamp: 640, muted: true, payload: [1], earlier: [])
        #expect(try VoicePacket(decoding: none.encoded()) == none)
        let header: [UInt8] = [0x13, 0, 0, 1, 0, 0, 2, 128]
        #expect(throws: VoicePacket.DecodeError.truncated) { try VoicePacket(decoding: header) }
        #expect(throws: VoicePacket.DecodeError.badRedundancy) { try VoicePacket(decoding: header + [4] + [UInt8](repeating: 1, count: 20)) }
        #expect(throws: VoicePacket.DecodeError.truncated) { try VoicePacket(decoding: header + [1, 2, 0]) }
        #expect(throws: VoicePacket.DecodeError.badRedundancy) { try VoicePacket(decoding: header + [1, 0, 0, 1, 5, 1]) }  // distance 0
        #expect(throws: VoicePacket.DecodeError.badRedundancy) { try VoicePacket(decoding: header + [1, 16, 0, 1, 5, 1]) }  // too far
        #expect(throws: VoicePacket.DecodeError.badRedundancy) { try VoicePacket(decoding: header + [2, 2, 0, 1, 2, 0, 1, 5, 5, 1]) }  // twice
        #expect(throws: VoicePacket.DecodeError.emptyAudio) { try VoicePacket(decoding: header + [1, 2, 0, 0, 1]) }  // empty copy
        #expect(throws: VoicePacket.DecodeError.tooLarge(1276)) { try VoicePacket(decoding: header + [1, 2, 0x04, 0xFC, 1]) }
        #expect(throws: VoicePacket.DecodeError.truncated) { try VoicePacket(decoding: header + [1, 2, 0, 9, 5, 5]) }  // copy cut short
        #expect(throws: VoicePacket.DecodeError.emptyAudio) { try VoicePacket(decoding: header + [1, 2, 0, 2, 5, 5]) }  // no frame of its own
        // Reports carry the cover asked for; 8-byte reports (older senders) ask for none; more than 3 is read as 3.
        let report = VoicePacket.report(lossPercent: 9, highestSequence: 7, jitterMilliseconds: 30, targetDelayMilliseconds: 60, burstCover: 3)
        #expect(try VoicePacket(decoding: report.encoded()) == report)
        #expect(try VoicePacket(decoding: Array(report.encoded().prefix(8))) == .report(lossPercent: 9, highestSequence: 7, jitterMilliseconds: 30, targetDelayMilliseconds: 60))
        #expect(try VoicePacket(decoding: Array(report.encoded().prefix(8)) + [200]) == report)
    }

    @Test("The receiver asks for the least cover that leaves under 0.5 % of frames lost")
    func burstCoverFollowsTheRunsOfLoss() {
        // 1000 frames a window; runs of loss by length.
        func cover(_ runs: [Int: Int]) -> Int { LossCounter.cover(for: [(1000, runs)]) }
        #expect(cover([:]) == 0)
        #expect(cover([1: 50, 2: 4]) == 0)  // the FEC copy leaves 4 of 1000
        #expect(cover([1: 50, 2: 5]) == 2)  // 5 of 1000: copies 2 back
        #expect(cover([1: 20, 2: 10, 3: 5]) == 3)  // cover 2 leaves 5
        #expect(cover([3: 40, 8: 5]) == 3)  // the deepest there is, even though 25 stay lost
        #expect(LossCounter.cover(for: []) == 0)
        // From sequence numbers: runs of 3 missing, 10 times in 500 packets.
        var counter = LossCounter()
        var sequence: UInt16 = 65000
        for packet in 0..<500 {
            counter.record(sequence: sequence)
            sequence &+= packet % 50 == 0 ? 4 : 1
        }
        _ = counter.closeInterval()
        #expect(counter.burstCover == 3)
        // Ten clean intervals later the runs have left the window.
        for _ in 0..<LossCounter.coverWindowIntervals {
            for _ in 0..<50 {
                counter.record(sequence: sequence)
                sequence &+= 1
            }
            _ = counter.closeInterval()
        }
        #expect(counter.burstCover == 0)
    }

    @Test("While the receiver asks for cover, packets carry copies of the frames that far back; a clean network pays nothing")
    func senderAddsCopiesOnlyWhileAsked() throws {
        let sender = try VoiceSender()
        let frame = (0..<320).map { Int16(truncatingIfNeeded: $0 * 37 % 2000 - 1000) }
        func next() throws -> VoicePacket { try VoicePacket(decoding: try #require(try sender.send(frame: frame))) }
        guard case .audio = try next() else { Issue.record("copies before any ask"); return }
        sender.apply(reportedLossPercent: 10, burstCover: 3)
        #expect(sender.burstCover == 3)
        // The copies' encoder starts now: the first packets have no earlier copies yet.
        guard case .audio = try next() else { Issue.record("a copy of a frame before the ask"); return }
        _ = try next()
        guard case .redundantAudio(_, let t2, _, _, let two) = try next() else { Issue.record("no copy 2 back"); return }
        #expect(two.map(\.distance) == [2])
        guard case .redundantAudio(_, let t3, _, let primary, let three) = try next() else { Issue.record("no copies"); return }
        #expect(three.map(\.distance) == [2, 3])
        #expect(t3 == t2 &+ 320)
        // Coarser: 12 kbit/s against 32.
        #expect(three.allSatisfy { $0.payload.count < primary.count })
        sender.apply(reportedLossPercent: 10, burstCover: 2)
        guard case .redundantAudio(_, _, _, _, let only) = try next() else { Issue.record("no copy"); return }
        #expect(only.map(\.distance) == [2])
        sender.apply(reportedLossPercent: 0, burstCover: 0)
        guard case .audio = try next() else { Issue.record("copies after the ask ended"); return }
        #expect(sender.packetsWithCopies == 3)
        // Switched off in the settings, nothing is ever added.
        var settings = OpusSettings()
        settings.burstRedundancy = false
        let plain = try VoiceSender(settings: settings)
        plain.apply(reportedLossPercent: 10, burstCover: 3)
        #expect(plain.burstCover == 0)
        for _ in 0..<5 {
            guard case .audio = try VoicePacket(decoding: try #require(try plain.send(frame: frame))) else { Issue.record("copies though off"); return }
        }
    }

    @Test("Under a cap the frames get what the headers and copies leave, copies go first, and speech keeps to it")
    func aCapCoversFramesCopiesAndHeaders() throws {
        // No cap: 40,000 while loss is planned for, copies as asked.
        let free = try VoiceSender()
        free.apply(reportedLossPercent: 10, burstCover: 3)
        #expect(free.frameBitrate == 40_000 && free.burstCover == 3)
        var settings = OpusSettings()
        settings.maximumBitrate = 64_000
        let roomy = try VoiceSender(settings: settings)
        roomy.apply(reportedLossPercent: 10, burstCover: 3)
        // 64,000 less 50 packets a second of 15 header bytes (8, a count, 3 per copy) and two
        // copies at 16,000.
        #expect(roomy.burstCover == 3)
        #expect(roomy.frameBitrate == 64_000 - 50 * 15 * 8 - 2 * 16_000)
        settings.maximumBitrate = 32_000
        let tight = try VoiceSender(settings: settings)
        // From the start, before any report: 32,000 less the 8-byte headers.
        #expect(tight.frameBitrate == 32_000 - 50 * 8 * 8)
        tight.apply(reportedLossPercent: 10, burstCover: 3)
        // Even one copy would leave the frames 11,200: no copies.
        #expect(tight.burstCover == 0 && tight.frameBitrate == 28_800)
        // On speech, what the packets carry stays under the cap.
        let speech = try VoiceTestSupport.speech()
        var bytes = 0
        var frames = 0
        for frame in VoiceTestSupport.frames(speech) {
            bytes += try tight.send(frame: frame)?.count ?? 0
            frames += 1
        }
        let bitsPerSecond = Double(bytes * 8) / (Double(frames) * 0.02)
        #expect(bitsPerSecond <= 32_000, "\(bitsPerSecond) bit/s")
        settings.maximumBitrate = 7_000
        #expect(throws: VoiceEngineError.self) { try VoiceSender(settings: settings) }
    }

    @Test("The FEC is planned for the highest loss of the last reports, up to the ceiling; clean reports switch it off in time")
    func fecPlanningHoldsTheHighestRecentLossUpToTheCeiling() throws {
        var settings = OpusSettings()
        settings.lossHoldReports = 3
        let sender = try VoiceSender(settings: settings)
        #expect(sender.expectedLossPercent == 5)  // before any report
        sender.apply(reportedLossPercent: 2)
        #expect(sender.expectedLossPercent == 2)
        sender.apply(reportedLossPercent: 0)  // a clean second amid loss: still planned for 2 %
        #expect(sender.expectedLossPercent == 2)
        sender.apply(reportedLossPercent: 30)  // heavy loss: the ceiling
        #expect(sender.expectedLossPercent == 5)
        sender.apply(reportedLossPercent: 0)
        sender.apply(reportedLossPercent: 0)
        #expect(sender.expectedLossPercent == 5)  // 30 is still among the last 3
        sender.apply(reportedLossPercent: 0)
        #expect(sender.expectedLossPercent == 0)  // three clean reports: no FEC spent
        sender.apply(reportedLossPercent: -4)  // nonsense counts as none
        #expect(sender.expectedLossPercent == 0)
    }

    @Test("While the FEC is planned for loss the encoder spends the loss bit rate, and its packets are that much larger")
    func lossBitRateFollowsTheExpectedLoss() throws {
        let encoder = try OpusVoiceEncoder()
        #expect(encoder.expectedLossPercent == 5 && encoder.bitrate == 40_000, "the start plans for 5 %")
        let speech = VoiceTestSupport.frames(try VoiceTestSupport.speech()).prefix(250)
        let bytesAt40 = try speech.map { try encoder.encode($0).count }.reduce(0, +)
        encoder.expectedLossPercent = 0
        #expect(encoder.bitrate == 32_000)
        let bytesAt32 = try speech.map { try encoder.encode($0).count }.reduce(0, +)
        // About 40 against 32 kbit/s (the FEC copies take part of the 40).
        #expect(Double(bytesAt40) > Double(bytesAt32) * 1.1, "\(bytesAt40) vs \(bytesAt32)")
        encoder.expectedLossPercent = 3
        #expect(encoder.bitrate == 40_000)
        // Without in-band FEC, one rate whatever the loss.
        var plain = OpusSettings()
        plain.inBandFEC = false
        let noFEC = try OpusVoiceEncoder(settings: plain)
        #expect(noFEC.bitrate == 32_000)
        noFEC.expectedLossPercent = 10
        #expect(noFEC.bitrate == 32_000)
    }

    @Test("Settings out of range are refused")
    func settingsAreValidated() {
        var settings = OpusSettings()
        settings.bitrate = 1000
        #expect(throws: VoiceEngineError.self) { try OpusVoiceEncoder(settings: settings) }
        settings = OpusSettings()
        settings.complexity = 11
        #expect(throws: VoiceEngineError.self) { try OpusVoiceEncoder(settings: settings) }
        settings = OpusSettings()
        settings.maximumExpectedLossPercent = 101
        #expect(throws: VoiceEngineError.invalidConfiguration("maximum expected loss 101 %")) { try OpusVoiceEncoder(settings: settings) }
        settings = OpusSettings()
        settings.lossBitrate = 600_000
        #expect(throws: VoiceEngineError.invalidConfiguration("loss bitrate 600000")) { try OpusVoiceEncoder(settings: settings) }
        settings = OpusSettings()
        settings.lossHoldReports = 0
        #expect(throws: VoiceEngineError.invalidConfiguration("loss hold 0 reports")) { try OpusVoiceEncoder(settings: settings) }
        #expect(throws: VoiceEngineError.self) { try VoiceFormat(frameMilliseconds: 15) }
        #expect(throws: Never.self) { try VoiceFormat(frameMilliseconds: 10) }
    }
}
