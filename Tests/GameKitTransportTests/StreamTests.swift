import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

@Suite("Reliable streams")
struct StreamTests {
    static func messages(_ stream: inout ReceiveStream) -> [ByteBuffer] {
        var result: [ByteBuffer] = []
        while let message = stream.nextMessage() { result.append(message) }
        return result
    }

    /// The stream bytes of `messages` as the sender lays them out.
    static func streamBytes(_ messages: [ByteBuffer]) -> ByteBuffer {
        var stream = SendStream()
        for message in messages { stream.append(message) }
        var bytes = ByteBuffer()
        let range = stream.takeUnsentRange(maximumLength: .max, limit: .max)!
        stream.write(range, into: &bytes)
        return bytes
    }

    @Test func receiverCutsMessagesFromChunksInAnyOrder() throws {
        let sent = (0..<50).map { ByteBuffer.numbered($0, size: 10 + $0 * 37) }
        let bytes = Self.streamBytes(sent)
        // Chunks of 100 bytes delivered in a shuffled order, with duplicates.
        var chunks: [(UInt64, ByteBuffer)] = stride(from: 0, to: bytes.readableBytes, by: 100).map { offset in
            (UInt64(offset), bytes.getSlice(at: offset, length: min(100, bytes.readableBytes - offset))!)
        }
        var generator = SeededRandom(seed: 42)
        chunks.shuffle(using: &generator)
        chunks += chunks.prefix(5)
        var stream = ReceiveStream(window: 1 << 20, maxMessageSize: 1 << 20)
        var received: [ByteBuffer] = []
        for (offset, data) in chunks {
            try stream.receive(offset: offset, data: data)
            received += Self.messages(&stream)
        }
        #expect(received == sent)
        #expect(stream.bufferedBytes == 0)
        #expect(stream.consumedOffset == UInt64(bytes.readableBytes))
    }

    @Test func overlappingRetransmissionsAreTrimmed() throws {
        let bytes = Self.streamBytes([ByteBuffer(repeating: 1, count: 1000)])
        var stream = ReceiveStream(window: 1 << 20, maxMessageSize: 1 << 20)
        try stream.receive(offset: 500, data: bytes.getSlice(at: 500, length: 300)!)
        try stream.receive(offset: 400, data: bytes.getSlice(at: 400, length: 500)!)
        #expect(stream.bufferedBytes == 500)
        try stream.receive(offset: 0, data: bytes.getSlice(at: 0, length: bytes.readableBytes)!)
        #expect(Self.messages(&stream) == [ByteBuffer(repeating: 1, count: 1000)])
    }

    @Test func bytesBeyondTheAdvertisedWindowBreakTheStream() {
        var stream = ReceiveStream(window: 1000, maxMessageSize: 500)
        #expect(throws: ReceiveStreamError.beyondWindow) {
            try stream.receive(offset: 900, data: ByteBuffer(repeating: 0, count: 101))
        }
    }

    @Test func aLengthPrefixOverTheLimitBreaksTheStream() {
        var stream = ReceiveStream(window: 1 << 20, maxMessageSize: 100)
        var bytes = ByteBuffer()
        bytes.writeVarInt(101)
        #expect(throws: ReceiveStreamError.messageTooLarge(101)) {
            try stream.receive(offset: 0, data: bytes)
        }
    }

    @Test func windowUpdatesFollowConsumption() throws {
        var stream = ReceiveStream(window: 1000, maxMessageSize: 500)
        #expect(stream.windowUpdate() == nil)
        let bytes = Self.streamBytes((0..<3).map { _ in ByteBuffer(repeating: 0, count: 198) })
        try stream.receive(offset: 0, data: bytes)
        #expect(Self.messages(&stream).count == 3)
        #expect(stream.windowUpdate() == 600 + 1000)
        #expect(stream.windowUpdate() == nil)
    }

    @Test func senderReleasesTheAcknowledgedPrefixAndResendsOnlyUnacknowledgedLostBytes() {
        var stream = SendStream()
        stream.append(ByteBuffer(repeating: 1, count: 998))  // 1000 bytes with the prefix
        stream.append(ByteBuffer(repeating: 2, count: 998))
        let first = stream.takeUnsentRange(maximumLength: 600, limit: .max)!
        let second = stream.takeUnsentRange(maximumLength: 600, limit: .max)!
        let third = stream.takeUnsentRange(maximumLength: 2000, limit: 1500)!
        #expect([first, second, third] == [0..<600, 600..<1200, 1200..<1500])
        #expect(stream.takeUnsentRange(maximumLength: 600, limit: 1500) == nil)
        // The second chunk arrives, the first is lost, the third partly acknowledged later.
        // Bytes acknowledged beyond the hole no longer count as unacknowledged, but stay held.
        #expect(stream.acknowledge(second) == 600)
        #expect(stream.acknowledge(second) == 0)
        #expect(stream.unacknowledgedBytes == 1400 && stream.heldBytes == 2000)
        stream.declareLost(first)
        stream.declareLost(third)
        #expect(stream.acknowledge(1300..<1400) == 100)
        #expect(stream.popLostRange(maximumLength: 10_000) == 0..<600)
        #expect(stream.popLostRange(maximumLength: 50) == 1200..<1250)
        #expect(stream.popLostRange(maximumLength: 10_000) == 1250..<1300)
        #expect(stream.popLostRange(maximumLength: 10_000) == 1400..<1500)
        #expect(!stream.hasLostData)
        // The hole's repair releases the prefix up to the next gap.
        #expect(stream.acknowledge(0..<600) == 600)
        #expect(stream.unacknowledgedBytes == 700 && stream.heldBytes == 800)
        #expect(stream.acknowledge(1200..<2000) == 700)
        #expect(stream.isFullyAcknowledged && stream.unacknowledgedBytes == 0 && stream.heldBytes == 0)
    }

    @Test func bytesAreCopiedFromTheRightOffsetsAfterReleasingMemory() {
        var stream = SendStream()
        for index in 0..<200 { stream.append(.numbered(index, size: 1000)) }
        var sent: [Range<UInt64>] = []
        while let range = stream.takeUnsentRange(maximumLength: 1100, limit: .max) { sent.append(range) }
        for range in sent.prefix(150) { _ = stream.acknowledge(range) }
        var bytes = ByteBuffer()
        stream.write(sent[150], into: &bytes)
        var reference = StreamTests.streamBytes((0..<200).map { .numbered($0, size: 1000) })
        reference.moveReaderIndex(forwardBy: Int(sent[150].lowerBound))
        #expect(bytes == reference.getSlice(at: reference.readerIndex, length: sent[150].count))
    }

    @Test func declaringAlreadyAcknowledgedBytesLostDoesNothing() {
        var stream = SendStream()
        stream.append(ByteBuffer(repeating: 1, count: 3000))
        let range = stream.takeUnsentRange(maximumLength: 5000, limit: .max)!
        #expect(stream.acknowledge(range) == range.count)
        stream.declareLost(0..<1000)
        stream.declareLost(range)
        #expect(!stream.hasLostData)
    }

    @Test func theWindowReopensWhenTheCreditCannotHoldALargestMessage() throws {
        // Window = largest message + prefix, as the transport parameters require at the least.
        var stream = ReceiveStream(window: 1004, maxMessageSize: 1000)
        let bytes = StreamTests.streamBytes([ByteBuffer(repeating: 1, count: 10)])
        try stream.receive(offset: 0, data: bytes)
        #expect(Self.messages(&stream).count == 1)
        // 11 bytes consumed: 993 bytes of credit left, less than one largest message (1002).
        #expect(stream.windowUpdate() == 11 + 1004)
        #expect(stream.windowUpdate() == nil)
    }

    @Test func tinyOutOfOrderPiecesBeyondTheBoundBreakTheStream() throws {
        var stream = ReceiveStream(window: 1 << 20, maxMessageSize: 1 << 19)
        #expect(stream.maximumPendingPieces == 2048)
        var offset: UInt64 = 10_000
        #expect(throws: ReceiveStreamError.tooFragmented) {
            for _ in 0...2048 {
                try stream.receive(offset: offset, data: ByteBuffer(bytes: [1]))
                offset -= 2
            }
        }
        // Honest reordering of whole packets stays far below it.
        var honest = ReceiveStream(window: 4 << 20, maxMessageSize: 4 << 20)
        let bytes = StreamTests.streamBytes([ByteBuffer(repeating: 7, count: 3 << 20)])
        for start in stride(from: bytes.readableBytes - 1150, through: 0, by: -1150) {
            try honest.receive(offset: UInt64(start), data: bytes.getSlice(at: start, length: 1150)!)
        }
        try honest.receive(offset: 0, data: bytes.getSlice(at: 0, length: bytes.readableBytes % 1150 + 1150)!)
        #expect(Self.messages(&honest).map(\.readableBytes) == [3 << 20])
    }
}
