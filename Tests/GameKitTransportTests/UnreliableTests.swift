import NIOCore
import Testing

@testable import GameKitTransport

@Suite("Unreliable messages")
struct UnreliableTests {
    static func frames(_ buffer: ByteBuffer) -> [Frame] {
        var reader = FrameReader(buffer)
        var frames: [Frame] = []
        while let frame = try! reader.next() { frames.append(frame) }
        return frames
    }

    @Test func smallMessagesArePackedIntoOnePacket() {
        var queue = UnreliableSendQueue()
        for index in 0..<10 { queue.append(.numbered(index, size: 50)) }
        var packet = ByteBuffer()
        let (released, messages) = queue.fill(into: &packet, space: 1150, packetCapacity: 1150)
        #expect(messages == 10 && released == 500)
        #expect(Self.frames(packet).count == 10)
        #expect(queue.isEmpty && queue.queuedBytes == 0)
    }

    @Test func aMessageThatFitsAnEmptyPacketWaitsForOne() {
        var queue = UnreliableSendQueue()
        queue.append(ByteBuffer(repeating: 1, count: 1000))
        var packet = ByteBuffer()
        #expect(queue.fill(into: &packet, space: 500, packetCapacity: 1150).messages == 0)
        #expect(packet.readableBytes == 0)
        #expect(queue.fill(into: &packet, space: 1150, packetCapacity: 1150).messages == 1)
    }

    @Test func largeMessagesAreFragmentedAndReassembledInAnyOrder() {
        var queue = UnreliableSendQueue()
        let message = ByteBuffer.numbered(7, size: 10_000)
        queue.append(message)
        var fragments: [UnreliableFragment] = []
        while !queue.isEmpty {
            var packet = ByteBuffer()
            _ = queue.fill(into: &packet, space: 1150, packetCapacity: 1150)
            #expect(packet.readableBytes <= 1150)
            for case .unreliableFragment(let fragment) in Self.frames(packet) { fragments.append(fragment) }
        }
        #expect(fragments.count == 9)
        var reassembler = FragmentReassembler(maxMessageSize: 96 << 10, timeout: .seconds(2), maximumBufferedBytes: 1 << 20)
        var completed: [ByteBuffer] = []
        for fragment in fragments.reversed() {
            if let done = reassembler.receive(fragment, now: .uptimeNanoseconds(0)) { completed.append(done) }
        }
        #expect(completed == [message])
        #expect(reassembler.partialCount == 0)
    }

    @Test func incompleteMessagesExpireWhole() {
        var reassembler = FragmentReassembler(maxMessageSize: 96 << 10, timeout: .seconds(2), maximumBufferedBytes: 1 << 20)
        let start = NIODeadline.uptimeNanoseconds(0)
        let fragment = UnreliableFragment(messageID: 1, totalLength: 2000, offset: 0, data: ByteBuffer(repeating: 1, count: 1000))
        #expect(reassembler.receive(fragment, now: start) == nil)
        #expect(reassembler.nextExpiry == start + .seconds(2))
        #expect(reassembler.expire(now: start + .seconds(1)) == 0)
        #expect(reassembler.expire(now: start + .seconds(2)) == 1)
        #expect(reassembler.droppedMessages == 1)
        // The rest arriving later does not produce a message.
        let rest = UnreliableFragment(messageID: 1, totalLength: 2000, offset: 1000, data: ByteBuffer(repeating: 1, count: 1000))
        #expect(reassembler.receive(rest, now: start + .seconds(3)) == nil)
    }

    @Test func oversizedAndInconsistentFragmentsAreDropped() {
        var reassembler = FragmentReassembler(maxMessageSize: 5000, timeout: .seconds(2), maximumBufferedBytes: 10_000)
        let now = NIODeadline.uptimeNanoseconds(0)
        #expect(reassembler.receive(UnreliableFragment(messageID: 1, totalLength: 5001, offset: 0, data: ByteBuffer(repeating: 0, count: 10)), now: now) == nil)
        #expect(reassembler.droppedMessages == 1)
        _ = reassembler.receive(UnreliableFragment(messageID: 2, totalLength: 3000, offset: 0, data: ByteBuffer(repeating: 0, count: 10)), now: now)
        _ = reassembler.receive(UnreliableFragment(messageID: 2, totalLength: 4000, offset: 10, data: ByteBuffer(repeating: 0, count: 10)), now: now)
        #expect(reassembler.droppedMessages == 2)
        #expect(reassembler.partialCount == 0)
    }

    @Test func partialMessagesBeyondTheMemoryBoundEvictTheOldest() {
        var reassembler = FragmentReassembler(maxMessageSize: 5000, timeout: .seconds(2), maximumBufferedBytes: 10_000)
        for id in 0..<5 {
            let fragment = UnreliableFragment(messageID: UInt64(id), totalLength: 4000, offset: 0, data: ByteBuffer(repeating: 0, count: 10))
            _ = reassembler.receive(fragment, now: .uptimeNanoseconds(UInt64(id) * 1000))
        }
        #expect(reassembler.partialCount == 2)
        #expect(reassembler.droppedMessages == 3)
    }

    @Test func theNumberOfPartialMessagesIsBounded() {
        var reassembler = FragmentReassembler(maxMessageSize: 96 << 10, timeout: .seconds(2), maximumBufferedBytes: 1 << 20)
        for id in 0..<1000 {
            let fragment = UnreliableFragment(messageID: UInt64(id), totalLength: 2, offset: 0, data: ByteBuffer(bytes: [1]))
            _ = reassembler.receive(fragment, now: .uptimeNanoseconds(UInt64(id)))
        }
        #expect(reassembler.partialCount == FragmentReassembler.maximumPartials)
        #expect(reassembler.droppedMessages == 1000 - FragmentReassembler.maximumPartials)
    }
}
