import NIOCore

/// Puts fragmented unreliable messages back together, delivering a message only when every
/// fragment arrived; incomplete ones are dropped whole when they expire.
///
/// Memory and work are bounded: a message may not exceed the largest unreliable message this side
/// accepts, all partial messages together may not exceed `maximumBufferedBytes`, and there are at
/// most `maximumPartials` of them (the oldest are dropped first).
struct FragmentReassembler: Sendable {
    private struct Partial {
        var buffer: ByteBuffer
        var coverage = IntervalSet()
        var firstSeen: NIODeadline
    }

    /// Partial messages held at once; beyond it the oldest is dropped (so that lookups and expiry,
    /// linear in this count, stay cheap however a peer fragments).
    static let maximumPartials = 64

    let maxMessageSize: Int
    let timeout: TimeAmount
    let maximumBufferedBytes: Int

    private var partials: [UInt64: Partial] = [:]
    private var bufferedBytes = 0
    /// Messages dropped because they expired, were evicted or were inconsistent.
    private(set) var droppedMessages = 0

    init(maxMessageSize: Int, timeout: TimeAmount, maximumBufferedBytes: Int) {
        self.maxMessageSize = maxMessageSize
        self.timeout = timeout
        self.maximumBufferedBytes = max(maximumBufferedBytes, maxMessageSize)
    }

    var partialCount: Int { self.partials.count }

    /// Adds a fragment; returns the message when it is complete.
    mutating func receive(_ fragment: UnreliableFragment, now: NIODeadline) -> ByteBuffer? {
        guard fragment.totalLength <= UInt64(self.maxMessageSize) else {
            self.droppedMessages += 1
            return nil
        }
        let total = Int(fragment.totalLength)
        var partial: Partial
        if let existing = self.partials[fragment.messageID] {
            guard existing.buffer.readableBytes == total else {
                // Fragments disagree on the size: drop the message.
                self.discard(fragment.messageID)
                self.droppedMessages += 1
                return nil
            }
            partial = existing
        } else {
            self.makeRoom(for: total)
            var buffer = ByteBufferAllocator().buffer(capacity: total)
            buffer.writeRepeatingByte(0, count: total)
            partial = Partial(buffer: buffer, firstSeen: now)
            self.bufferedBytes += total
        }
        // Only the partials dictionary holds the buffer while it is written, so no copy happens.
        self.partials[fragment.messageID] = nil
        let range = fragment.offset..<(fragment.offset + UInt64(fragment.data.readableBytes))
        partial.buffer.setBuffer(fragment.data, at: Int(fragment.offset))
        partial.coverage.insert(range)
        if partial.coverage.contains(0..<UInt64(total)) {
            self.bufferedBytes -= total
            return partial.buffer
        }
        self.partials[fragment.messageID] = partial
        return nil
    }

    /// Drops partial messages older than the timeout; returns how many.
    @discardableResult
    mutating func expire(now: NIODeadline) -> Int {
        let expired = self.partials.filter { now - $0.value.firstSeen >= self.timeout }.map(\.key)
        for id in expired { self.discard(id) }
        self.droppedMessages += expired.count
        return expired.count
    }

    var nextExpiry: NIODeadline? {
        self.partials.values.min { $0.firstSeen < $1.firstSeen }.map { $0.firstSeen + self.timeout }
    }

    private mutating func makeRoom(for bytes: Int) {
        while self.bufferedBytes + bytes > self.maximumBufferedBytes || self.partials.count >= Self.maximumPartials,
            let oldest = self.partials.min(by: { $0.value.firstSeen < $1.value.firstSeen })?.key
        {
            self.discard(oldest)
            self.droppedMessages += 1
        }
    }

    private mutating func discard(_ id: UInt64) {
        if let partial = self.partials.removeValue(forKey: id) {
            self.bufferedBytes -= partial.buffer.readableBytes
        }
    }
}
