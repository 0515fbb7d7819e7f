import NIOCore

/// The outgoing reliable byte stream of a link: every reliable message, length-prefixed, in one
/// sequence of offsets, kept until acknowledged.
///
/// Reliable messages become one stream so that small messages pack densely into packets, large
/// ones split at any byte, and ordering and exactly-once delivery follow from offsets alone. The
/// bytes live in a single ByteBuffer used as a queue (appended at the back, released from the
/// front as the acknowledged prefix grows), so queueing a message allocates nothing once the
/// buffer has grown. Chunks are sent by offset range: new data, or ranges of packets declared lost.
struct SendStream: Sendable {
    private var buffer = ByteBuffer()
    /// Every byte below `base` is acknowledged (and released).
    private(set) var base: UInt64 = 0
    /// The end of the stream: every byte queued so far lies below it.
    private(set) var writeOffset: UInt64 = 0
    /// The first byte never sent.
    private(set) var sendOffset: UInt64 = 0
    /// Acknowledged ranges above `base`, and how many bytes they hold.
    private var acknowledged = IntervalSet()
    private var acknowledgedAboveBase = 0
    /// Sent ranges declared lost and not acknowledged since; sent again before new data.
    private var lost = IntervalSet()

    /// Bytes queued and not yet acknowledged (including length prefixes). Bytes acknowledged
    /// beyond a hole do not count: they wait only for the hole's repair, and the peer's receive
    /// window bounds how many there can be, so a loss does not stall a sender whose buffer the
    /// acknowledged-but-unreleased bytes would otherwise fill.
    var unacknowledgedBytes: Int { Int(self.writeOffset - self.base) - self.acknowledgedAboveBase }
    /// Bytes held in memory: every byte from `base` on.
    var heldBytes: Int { Int(self.writeOffset - self.base) }
    var hasLostData: Bool { !self.lost.isEmpty }
    var hasUnsentData: Bool { self.sendOffset < self.writeOffset }
    var isFullyAcknowledged: Bool { self.base == self.writeOffset }

    /// Appends a message with its length prefix; returns the stream bytes it took.
    @discardableResult
    mutating func append(_ message: ByteBuffer) -> Int {
        let before = self.buffer.writerIndex
        self.buffer.writeVarInt(UInt64(message.readableBytes))
        self.buffer.writeImmutableBuffer(message)
        let added = self.buffer.writerIndex - before
        self.writeOffset += UInt64(added)
        return added
    }

    /// The next lost range to send again, at most `maximumLength` bytes.
    mutating func popLostRange(maximumLength: Int) -> Range<UInt64>? {
        self.lost.popFirst(maximumLength: UInt64(max(0, maximumLength)))
    }

    /// The next never-sent range, at most `maximumLength` bytes and below `limit` (the peer's
    /// receive window).
    mutating func takeUnsentRange(maximumLength: Int, limit: UInt64) -> Range<UInt64>? {
        let end = min(self.writeOffset, limit, self.sendOffset + UInt64(max(0, maximumLength)))
        guard end > self.sendOffset else { return nil }
        let range = self.sendOffset..<end
        self.sendOffset = end
        return range
    }

    /// Copies the bytes of `range` (which must be sent and unacknowledged) to `output`.
    func write(_ range: Range<UInt64>, into output: inout ByteBuffer) {
        precondition(range.lowerBound >= self.base && range.upperBound <= self.writeOffset)
        let start = Int(range.lowerBound - self.base)
        self.buffer.withUnsafeReadableBytes { bytes in
            _ = output.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + range.count)]))
        }
    }

    /// Records an acknowledged range; returns how many of its bytes were not acknowledged
    /// before (what ``unacknowledgedBytes`` lost). The acknowledged prefix is released from memory.
    mutating func acknowledge(_ range: Range<UInt64>) -> Int {
        guard range.upperBound > self.base else { return 0 }
        let clipped = max(range.lowerBound, self.base)..<range.upperBound
        let newly = self.acknowledged.gaps(in: clipped).reduce(0) { $0 + $1.count }
        guard newly > 0 else { return 0 }
        self.lost.remove(clipped)
        self.acknowledged.insert(clipped)
        self.acknowledgedAboveBase += newly
        guard let first = self.acknowledged.first, first.lowerBound <= self.base else { return newly }
        let released = Int(first.upperBound - self.base)
        self.acknowledged.removeAll(below: first.upperBound)
        self.acknowledgedAboveBase -= released
        self.base = first.upperBound
        self.buffer.moveReaderIndex(forwardBy: released)
        self.compactIfWorthwhile()
        return newly
    }

    /// Records that the packet carrying `range` was lost; the unacknowledged parts will be sent
    /// again.
    /// Parts already acknowledged (through another packet carrying the same bytes) are ignored.
    mutating func declareLost(_ range: Range<UInt64>) {
        let lower = max(range.lowerBound, self.base)
        let upper = min(range.upperBound, self.sendOffset)
        guard lower < upper else { return }
        for gap in self.acknowledged.gaps(in: lower..<upper) {
            self.lost.insert(gap)
        }
    }

    /// Releases the memory of acknowledged bytes once it is at least half the buffer, so that
    /// the copy this costs is paid at most once per byte.
    private mutating func compactIfWorthwhile() {
        let released = self.buffer.readerIndex
        if released >= 64 * 1024, released >= self.buffer.readableBytes {
            self.buffer.discardReadBytes()
        } else if self.buffer.readableBytes == 0, released > 0 {
            self.buffer.clear()
        }
    }
}
