import DequeModule
import NIOCore

/// Why the peer's reliable stream cannot be accepted; each closes the link.
enum ReceiveStreamError: Error, Equatable {
    /// The peer sent bytes beyond the window this side advertised.
    case beyondWindow
    /// A message's length prefix exceeds the largest reliable message this side accepts.
    case messageTooLarge(UInt64)
    /// The out-of-order data is cut into more pieces than any honest sender produces (senders cut
    /// the stream at packet boundaries), which would only cost time and memory.
    case tooFragmented
}

/// The incoming reliable byte stream of a link: reorders chunks, cuts the stream back into
/// messages, and advertises how far the peer may send.
///
/// In-order chunks of whole messages (the common case) are delivered as slices of the decrypted
/// packet without copying. Out-of-order chunks wait, trimmed to the bytes not yet held and copied
/// out of their packets, so memory stays about the advertised window however the peer retransmits;
/// the number of waiting pieces is bounded too, so that neither memory nor the sorted insertion's
/// cost can be driven up by tiny chunks.
struct ReceiveStream: Sendable {
    let window: UInt64
    let maxMessageSize: Int

    /// Bytes below this offset have been delivered as messages.
    private(set) var consumedOffset: UInt64 = 0
    /// Contiguous received bytes not yet delivered: [consumedOffset, contiguousEnd).
    private var assembly = ByteBuffer()
    private(set) var contiguousEnd: UInt64 = 0
    /// Out-of-order chunks above `contiguousEnd`, sorted by offset, disjoint.
    private var pending = Deque<(offset: UInt64, data: ByteBuffer)>()
    /// At most this many out-of-order pieces wait at once.
    let maximumPendingPieces: Int
    private var pendingCoverage = IntervalSet()
    /// The peer may send stream bytes below this offset.
    private(set) var advertisedLimit: UInt64
    /// Messages cut from in-order chunks, waiting for `nextMessage()`.
    private var ready: [ByteBuffer] = []
    private var readyIndex = 0

    init(window: Int, maxMessageSize: Int) {
        self.window = UInt64(window)
        self.maxMessageSize = maxMessageSize
        self.advertisedLimit = UInt64(window)
        self.maximumPendingPieces = max(256, window / 512)
    }

    /// Bytes held for reassembly: partial messages and out-of-order chunks.
    var bufferedBytes: Int { self.assembly.readableBytes + Int(self.pendingCoverage.totalLength) }

    mutating func receive(offset: UInt64, data: ByteBuffer) throws(ReceiveStreamError) {
        let end = offset + UInt64(data.readableBytes)
        guard end <= self.advertisedLimit else { throw .beyondWindow }
        guard end > self.contiguousEnd, !data.readableBytes.isZero else { return }
        if offset > self.contiguousEnd {
            try self.stash(offset: offset, data: data)
            return
        }
        var fresh = data
        fresh.moveReaderIndex(forwardBy: Int(self.contiguousEnd - offset))
        try self.appendInOrder(fresh)
        while let first = self.pending.first, first.offset <= self.contiguousEnd {
            self.pending.removeFirst()
            let firstEnd = first.offset + UInt64(first.data.readableBytes)
            self.pendingCoverage.removeAll(below: firstEnd)
            guard firstEnd > self.contiguousEnd else { continue }
            var tail = first.data
            tail.moveReaderIndex(forwardBy: Int(self.contiguousEnd - first.offset))
            try self.appendInOrder(tail)
        }
    }

    /// The next complete message, in stream order.
    mutating func nextMessage() -> ByteBuffer? {
        guard self.readyIndex < self.ready.count else {
            if !self.ready.isEmpty {
                self.ready.removeAll(keepingCapacity: true)
                self.readyIndex = 0
            }
            return nil
        }
        let message = self.ready[self.readyIndex]
        self.readyIndex += 1
        return message
    }

    /// A new limit to advertise, once the peer has used half of the previous one, or once the
    /// credit left could no longer hold a largest message (which is only consumed when whole, so
    /// waiting for half the window could deadlock behind it).
    mutating func windowUpdate() -> UInt64? {
        let credit = self.advertisedLimit - self.consumedOffset
        let largestMessage = UInt64(self.maxMessageSize) + UInt64(VarInt.encodedLength(UInt64(self.maxMessageSize)))
        guard credit <= self.window / 2 || credit < largestMessage else { return nil }
        guard self.consumedOffset + self.window > self.advertisedLimit else { return nil }
        self.advertisedLimit = self.consumedOffset + self.window
        return self.advertisedLimit
    }

    // MARK: - Private

    private mutating func stash(offset: UInt64, data: ByteBuffer) throws(ReceiveStreamError) {
        let range = offset..<(offset + UInt64(data.readableBytes))
        for gap in self.pendingCoverage.gaps(in: range) {
            guard self.pending.count < self.maximumPendingPieces else { throw .tooFragmented }
            var piece = ByteBufferAllocator().buffer(capacity: gap.count)
            piece.writeImmutableBuffer(data.getSlice(at: data.readerIndex + Int(gap.lowerBound - offset), length: gap.count)!)
            self.pending.insert((gap.lowerBound, piece), at: self.insertionIndex(for: gap.lowerBound))
            self.pendingCoverage.insert(gap)
        }
    }

    /// Where a piece starting at `offset` goes to keep `pending` sorted (binary search).
    private func insertionIndex(for offset: UInt64) -> Int {
        var low = 0
        var high = self.pending.count
        while low < high {
            let mid = (low + high) / 2
            if self.pending[mid].offset < offset { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Takes bytes that start exactly at `contiguousEnd` and cuts complete messages out of them.
    private mutating func appendInOrder(_ data: ByteBuffer) throws(ReceiveStreamError) {
        self.contiguousEnd += UInt64(data.readableBytes)
        if self.assembly.readableBytes == 0 {
            // Fast path: cut messages straight out of the packet's buffer.
            var chunk = data
            try Self.cutMessages(from: &chunk, copying: false, maxMessageSize: self.maxMessageSize, consumed: &self.consumedOffset, into: &self.ready)
            if chunk.readableBytes > 0 {
                self.assembly.clear()
                self.assembly.writeImmutableBuffer(chunk)
            }
            return
        }
        self.assembly.writeImmutableBuffer(data)
        try Self.cutMessages(from: &self.assembly, copying: true, maxMessageSize: self.maxMessageSize, consumed: &self.consumedOffset, into: &self.ready)
        if self.assembly.readableBytes == 0 {
            self.assembly.clear()
        } else if self.assembly.readerIndex >= 64 * 1024 {
            self.assembly.discardReadBytes()
        }
    }

    /// Moves every complete message at the front of `buffer` to `ready`. Messages cut from the
    /// reassembly buffer are copied, since that buffer is written again later.
    private static func cutMessages(
        from buffer: inout ByteBuffer,
        copying: Bool,
        maxMessageSize: Int,
        consumed: inout UInt64,
        into ready: inout [ByteBuffer]
    ) throws(ReceiveStreamError) {
        while true {
            let start = buffer.readerIndex
            guard let length = buffer.readVarInt() else { return }
            guard length <= UInt64(maxMessageSize) else { throw .messageTooLarge(length) }
            guard let body = buffer.readSlice(length: Int(length)) else {
                buffer.moveReaderIndex(to: start)
                return
            }
            consumed += UInt64(buffer.readerIndex - start)
            if copying {
                var copy = ByteBufferAllocator().buffer(capacity: body.readableBytes)
                copy.writeImmutableBuffer(body)
                ready.append(copy)
            } else {
                ready.append(body)
            }
        }
    }
}

extension Int {
    fileprivate var isZero: Bool { self == 0 }
}
