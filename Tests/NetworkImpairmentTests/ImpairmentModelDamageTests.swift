import NIOCore
import Testing

@testable import NetworkImpairment

/// Reordering, duplication and corruption of ``ImpairmentModel``.
@Suite("ImpairmentModel reordering, duplication and corruption")
struct ImpairmentModelDamageTests {
    // MARK: - Reordering

    @Test("reordering holds selected datagrams back so that later ones overtake them")
    func reorderingHoldsDatagramsBack() {
        let profile = ImpairmentProfile(delay: .milliseconds(10), reorderProbability: 0.2, reorderDelay: .milliseconds(50))
        var model = ImpairmentModel<[UInt8]>(profile: profile, seed: 21)
        let deliveries = model.run((0..<10_000).map { numbered($0) }, step: .milliseconds(1))
        let latencies = deliveries.map { delivery in
            delivery.time - virtualTime(number(of: delivery.datagram), step: .milliseconds(1))
        }
        let heldBack = latencies.filter { $0 == .milliseconds(60) }.count
        #expect(latencies.allSatisfy { $0 == .milliseconds(10) || $0 == .milliseconds(60) })
        #expect(heldBack == model.statistics.reordered)
        #expect(abs(heldBack - 2_000) < 200)
        #expect(hasInversion(deliveries.map { number(of: $0.datagram) }))
        #expect(deliveries.count == 10_000)
    }

    // MARK: - Duplication

    @Test("duplication delivers selected datagrams exactly twice, each copy with its own jitter")
    func duplicationDeliversCopies() {
        let profile = ImpairmentProfile(jitter: .milliseconds(5), duplicateProbability: 0.25)
        var model = ImpairmentModel<[UInt8]>(profile: profile, seed: 31)
        let datagrams = (0..<10_000).map { numbered($0) }
        let deliveries = model.run(datagrams, step: .milliseconds(1))
        var times: [Int: [NIODeadline]] = [:]
        for delivery in deliveries {
            #expect(delivery.datagram == datagrams[number(of: delivery.datagram)])
            times[number(of: delivery.datagram), default: []].append(delivery.time)
        }
        #expect(times.count == 10_000)
        let twice = times.values.filter { $0.count == 2 }
        #expect(times.values.allSatisfy { $0.count == 1 || $0.count == 2 })
        #expect(twice.count == model.statistics.duplicated)
        #expect(abs(twice.count - 2_500) < 250)
        #expect(twice.contains { $0[0] != $0[1] })
    }

    // MARK: - Corruption

    @Test("corruption flips exactly one bit of each selected datagram")
    func corruptionFlipsExactlyOneBit() {
        var random = SeededRandom(seed: 5)
        let originals = (0..<2_000).map { index in
            numbered(index, size: 4) + (0..<28).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
        var model = ImpairmentModel<ByteBuffer>(profile: ImpairmentProfile(corruptProbability: 0.3), seed: 41)
        for (index, original) in originals.enumerated() {
            model.submit(ByteBuffer(bytes: original), at: virtualTime(index, step: .milliseconds(1)))
        }
        var flippedBits = Set<Int>()
        var corrupted = 0
        for (index, delivery) in model.drain().enumerated() {
            let bytes = Array(delivery.datagram.readableBytesView)
            let distance = bitDistance(bytes, originals[index])
            #expect(distance == 0 || distance == 1)
            if distance == 1 {
                corrupted += 1
                let byte = bytes.indices.first { bytes[$0] != originals[index][$0] }!
                flippedBits.insert(byte * 8 + (bytes[byte] ^ originals[index][byte]).trailingZeroBitCount)
            }
        }
        #expect(corrupted == model.statistics.corrupted)
        #expect(abs(corrupted - 600) < 90)
        // The flipped bit is chosen across the whole datagram.
        #expect(flippedBits.count > 150 && flippedBits.contains { $0 < 32 } && flippedBits.contains { $0 >= 224 })
    }

    @Test("empty datagrams pass corruption unchanged")
    func emptyDatagramsSurviveCorruption() {
        var model = ImpairmentModel<ByteBuffer>(profile: ImpairmentProfile(corruptProbability: 1), seed: 1)
        var bytesModel = ImpairmentModel<[UInt8]>(profile: ImpairmentProfile(corruptProbability: 1), seed: 1)
        for index in 0..<100 {
            model.submit(ByteBuffer(), at: virtualTime(index, step: .milliseconds(1)))
            bytesModel.submit([], at: virtualTime(index, step: .milliseconds(1)))
        }
        #expect(model.drain().allSatisfy { $0.datagram.readableBytes == 0 })
        #expect(bytesModel.drain().allSatisfy { $0.datagram.isEmpty })
        #expect(model.statistics.corrupted == 0 && model.statistics.delivered == 100)
    }

    @Test("a ByteBuffer's bits are counted from its reader index; bytes before it are untouched")
    func byteBufferFlipsOnlyReadableBytes() {
        var buffer = ByteBuffer(bytes: [0xAA, 0x00, 0x00, 0xFF])
        buffer.moveReaderIndex(forwardBy: 1)
        buffer.flipBit(at: 0)
        buffer.flipBit(at: 9)
        buffer.flipBit(at: 23)
        #expect(buffer.impairableByteCount == 3)
        #expect(Array(buffer.readableBytesView) == [0x01, 0x02, 0x7F])
        buffer.moveReaderIndex(to: 0)
        #expect(Array(buffer.readableBytesView) == [0xAA, 0x01, 0x02, 0x7F])
    }

    @Test("a byte array's bit i is bit i % 8 of byte i / 8")
    func byteArrayBitNumbering() {
        var bytes: [UInt8] = [0, 0]
        bytes.flipBit(at: 0)
        bytes.flipBit(at: 15)
        #expect(bytes == [0x01, 0x80])
        #expect(bytes.impairableByteCount == 2)
    }

    @Test("corrupting a shared ByteBuffer does not change other copies")
    func corruptionCopiesSharedStorage() {
        let original = ByteBuffer(bytes: [1, 2, 3, 4])
        var model = ImpairmentModel<ByteBuffer>(
            profile: ImpairmentProfile(duplicateProbability: 1, corruptProbability: 1),
            seed: 2
        )
        model.submit(original, at: origin)
        let copies = model.drain().map { Array($0.datagram.readableBytesView) }
        #expect(copies.count == 2)
        #expect(copies.allSatisfy { bitDistance($0, [1, 2, 3, 4]) == 1 })
        #expect(Array(original.readableBytesView) == [1, 2, 3, 4])
    }
}
