@testable import GameKitVoiceEngine
import Testing

/// The jitter buffer in virtual time: payloads are one byte naming their frame.
@Suite("Jitter buffer")
struct JitterBufferTests {
    static let frame: UInt32 = 320

    func payload(_ index: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: index)] }

    func insert(_ buffer: inout JitterBuffer, _ index: Int, base: UInt32 = 1000 * 320, at ms: Int64) -> JitterBuffer.Insertion {
        buffer.insert(timestamp: base &+ UInt32(index) &* Self.frame, payload: payload(index), arrivalMilliseconds: ms)
    }

    @Test("Waits for its target, then plays in timestamp order whatever the arrival order")
    func ordersPackets() {
        var buffer = JitterBuffer()
        #expect(buffer.next() == .waiting)
        // Frames 0…9, each sent 20 ms after the last, handed over shuffled.
        for index in [3, 0, 2, 1, 5, 4, 9, 7, 8, 6] { #expect(insert(&buffer, index, at: Int64(index * 20)) == .accepted) }
        var played: [JitterBuffer.Playout] = []
        for _ in 0..<10 { played.append(buffer.next()) }
        #expect(played == (0..<10).map { .packet(payload($0)) })
    }

    @Test("Before its target delay is held, the buffer waits")
    func waitsForTarget() {
        var configuration = JitterBuffer.Configuration()
        configuration.initialDelayMilliseconds = 60
        var buffer = JitterBuffer(configuration: configuration)
        _ = insert(&buffer, 0, at: 0)
        #expect(buffer.next() == .waiting)
        _ = insert(&buffer, 1, at: 20)
        #expect(buffer.next() == .waiting)
        _ = insert(&buffer, 2, at: 40)
        #expect(buffer.next() == .packet(payload(0)))
        #expect(buffer.isPlaying)
    }

    @Test("Duplicates and late packets are dropped and counted")
    func duplicatesAndLate() {
        var buffer = JitterBuffer()
        for index in 0..<4 { _ = insert(&buffer, index, at: 0) }
        #expect(insert(&buffer, 2, at: 1) == .duplicate)
        #expect(buffer.next() == .packet(payload(0)))
        #expect(buffer.next() == .packet(payload(1)))
        #expect(insert(&buffer, 0, at: 50) == .late)
        #expect(buffer.statistics.duplicates == 1)
        #expect(buffer.statistics.late == 1)
    }

    @Test("A lost frame with the next one held is recovered from that one's FEC; with neither, concealed")
    func fecAndConcealment() {
        var buffer = JitterBuffer()
        for index in [0, 1, 3, 6] { _ = insert(&buffer, index, at: 0) }
        #expect(buffer.next() == .packet(payload(0)))
        #expect(buffer.next() == .packet(payload(1)))
        #expect(buffer.next() == .fec(next: payload(3)))
        #expect(buffer.next() == .packet(payload(3)))
        #expect(buffer.next() == .conceal)
        #expect(buffer.next() == .fec(next: payload(6)))
        #expect(buffer.next() == .packet(payload(6)))
        #expect(buffer.statistics.recoveredByFEC == 2)
        #expect(buffer.statistics.concealed == 1)
    }

    @Test("With nothing newer held the playout point waits for the late frame instead of skipping it")
    func lateNetworkStretchesInsteadOfSkipping() {
        var buffer = JitterBuffer()
        _ = insert(&buffer, 0, at: 0)
        _ = insert(&buffer, 1, at: 0)
        #expect(buffer.next() == .packet(payload(0)))
        #expect(buffer.next() == .packet(payload(1)))
        #expect(buffer.next() == .conceal)
        #expect(buffer.next() == .conceal)
        #expect(insert(&buffer, 2, at: 100) == .accepted)
        #expect(buffer.next() == .packet(payload(2)))
    }

    @Test("After a long silence the buffer waits for its target again, and skips a gap rather than concealing through it")
    func rebuffersAfterAPause() {
        var buffer = JitterBuffer()
        _ = insert(&buffer, 0, at: 0)
        _ = insert(&buffer, 1, at: 0)
        _ = buffer.next()
        _ = buffer.next()
        for _ in 0..<10 { #expect(buffer.next() == .conceal) }
        #expect(!buffer.isPlaying)
        #expect(buffer.next() == .waiting)
        // The talker comes back 3 s later (150 frames on).
        _ = insert(&buffer, 150, at: 3000)
        _ = insert(&buffer, 151, at: 3020)
        let first = buffer.next()
        #expect(first == .packet(payload(150)))
        #expect(buffer.next() == .packet(payload(151)))
    }

    @Test("Absurd timestamp jumps restart the stream; wrap-around of the 32-bit timestamp is not a jump")
    func absurdJumpsAndWrapAround() {
        var buffer = JitterBuffer()
        let base = UInt32.max - 3 * Self.frame + 1
        for index in 0..<6 { #expect(insert(&buffer, index, base: base, at: Int64(index * 20)) == .accepted) }
        for index in 0..<6 { #expect(buffer.next() == .packet(payload(index))) }
        #expect(insert(&buffer, 0, base: base &+ 2_000_000_000, at: 200) == .resynchronised)
        #expect(buffer.statistics.resyncs == 1)
        _ = insert(&buffer, 1, base: base &+ 2_000_000_000, at: 220)
        #expect(buffer.next() == .packet(payload(0)))
        for _ in 0..<1000 {
            _ = buffer.insert(timestamp: UInt32.random(in: 0...UInt32.max), payload: [], arrivalMilliseconds: Int64.random(in: -1_000_000...1_000_000))
            _ = buffer.next()
        }
        #expect(buffer.statistics.overflowDrops >= 0)
    }

    @Test("The target follows the arrival jitter up, and back down when the jitter goes")
    func targetFollowsJitter() {
        var buffer = JitterBuffer()
        var random = SplitMix(seed: 3)
        for index in 0..<500 {
            let sent = Int64(index * 20)
            _ = insert(&buffer, index, at: sent + Int64.random(in: 0...60, using: &random))
            _ = buffer.next()
        }
        let jittery = buffer.targetDelayMilliseconds
        #expect(jittery >= 60)
        #expect(jittery <= 100)
        for index in 500..<1100 {
            _ = insert(&buffer, index, at: Int64(index * 20) + 5)
            _ = buffer.next()
        }
        #expect(buffer.targetDelayMilliseconds <= 40)
    }

    func insert(_ buffer: inout JitterBuffer, _ index: Int, copies distances: [Int], at ms: Int64) -> JitterBuffer.Insertion {
        let earlier = distances.map { VoicePacket.EarlierFrame(distance: $0, payload: [0xC0, UInt8(truncatingIfNeeded: index - $0)]) }
        return buffer.insert(timestamp: 1000 * 320 &+ UInt32(index) &* Self.frame, payload: payload(index), earlier: earlier, arrivalMilliseconds: ms)
    }

    func copy(_ index: Int) -> [UInt8] { [0xC0, UInt8(truncatingIfNeeded: index)] }

    @Test("A burst is played from the copies later packets carry, before any FEC copy; copies never replace a frame's own packet")
    func copiesCoverABurst() {
        var buffer = JitterBuffer()
        // Frames 2, 3 and 4 lost; 5, 6 and 7 carry copies 2 and 3 back (5 covers 2 and 3, 6 covers 3 and 4).
        for index in [0, 1] { _ = insert(&buffer, index, copies: [], at: 0) }
        for index in [5, 6, 7] { _ = insert(&buffer, index, copies: [2, 3], at: 0) }
        var played: [JitterBuffer.Playout] = []
        for _ in 0..<8 { played.append(buffer.next()) }
        #expect(played == [.packet(payload(0)), .packet(payload(1)), .copy(copy(2)), .copy(copy(3)), .copy(copy(4)), .packet(payload(5)), .packet(payload(6)), .packet(payload(7))])
        #expect(buffer.statistics.recoveredByCopy == 3 && buffer.statistics.recoveredByFEC == 0 && buffer.statistics.concealed == 0)

        // A frame's own packet, arriving after a copy of it, is what plays; copies of frames
        // already played are ignored.
        var late = JitterBuffer()
        for index in [0, 1, 2] { _ = insert(&late, index, copies: [], at: 0) }
        #expect(late.next() == .packet(payload(0)))
        _ = insert(&late, 5, copies: [2, 3], at: 0)  // a copy of 2 (held) and 3 (missing)
        _ = insert(&late, 3, copies: [], at: 0)  // 3's own packet after its copy
        #expect(late.next() == .packet(payload(1)))
        _ = insert(&late, 4, copies: [2, 3], at: 0)  // copies of 2 (held) and 1 (played)
        #expect((0..<4).map { _ in late.next() } == [.packet(payload(2)), .packet(payload(3)), .packet(payload(4)), .packet(payload(5))])
        #expect(late.statistics.recoveredByCopy == 0)
    }

    @Test("While copies arrive, the target holds the packet that far after a loss; 100 packets without copies release it")
    func copiesDeepenTheTarget() {
        var buffer = JitterBuffer()
        for index in 0..<20 {
            _ = insert(&buffer, index, at: Int64(index * 20))
            _ = buffer.next()
        }
        let plain = buffer.targetDelayMilliseconds
        #expect(buffer.copyDepth == 0)
        for index in 20..<40 {
            _ = insert(&buffer, index, copies: [2, 3], at: Int64(index * 20))
            _ = buffer.next()
        }
        #expect(buffer.copyDepth == 3)
        #expect(buffer.targetDelayMilliseconds == plain + 2 * 20)
        for index in 40..<(40 + JitterBuffer.redundancyTimeoutPackets - 1) {
            _ = insert(&buffer, index, at: Int64(index * 20))
            _ = buffer.next()
        }
        #expect(buffer.copyDepth == 3)
        _ = insert(&buffer, 40 + JitterBuffer.redundancyTimeoutPackets, at: Int64((40 + JitterBuffer.redundancyTimeoutPackets) * 20))
        #expect(buffer.copyDepth == 0 && buffer.targetDelayMilliseconds == plain)
    }

    @Test("The buffer never holds more than its capacity")
    func capacity() {
        var configuration = JitterBuffer.Configuration()
        configuration.capacityFrames = 20
        var buffer = JitterBuffer(configuration: configuration)
        for index in 0..<100 { _ = insert(&buffer, index, at: 0) }
        #expect(buffer.bufferedMilliseconds <= 20 * 20)
        #expect(buffer.statistics.overflowDrops == 80)
    }
}

