import DequeModule
import NIOCore

/// Unreliable messages waiting for a packet.
///
/// Small messages are packed together into one packet; a message too large for a packet is cut
/// into fragments that each fill one. Nothing here is ever sent twice: once a message has been
/// handed to packets its bytes are released, whatever happens to those packets.
struct UnreliableSendQueue: Sendable {
    private var messages = Deque<ByteBuffer>()
    /// Bytes of the head message already sent as fragments.
    private var headOffset = 0
    private var headMessageID: UInt64 = 0
    private var nextMessageID: UInt64 = 0
    /// Bytes of queued messages not yet handed to packets.
    private(set) var queuedBytes = 0

    var isEmpty: Bool { self.messages.isEmpty }

    mutating func append(_ message: ByteBuffer) {
        self.messages.append(message)
        self.queuedBytes += message.readableBytes
    }

    /// Writes whole messages and fragments into `buffer` while they fit in `space` bytes, given
    /// that an empty packet holds `packetCapacity` bytes of frames. Returns the message bytes
    /// released (messages fully written) and the number of messages completed.
    mutating func fill(into buffer: inout ByteBuffer, space: Int, packetCapacity: Int) -> (releasedBytes: Int, messages: Int) {
        var remaining = space
        var released = 0
        var completed = 0
        while let head = self.messages.first {
            let length = head.readableBytes
            if self.headOffset == 0 {
                let whole = FrameWriter.unreliableSize(length: length)
                if whole <= remaining {
                    FrameWriter.writeUnreliable(head, into: &buffer)
                    remaining -= whole
                    self.popHead(length: length, released: &released, completed: &completed)
                    continue
                }
                // It fits in a packet of its own: keep it whole for the next packet.
                if whole <= packetCapacity { break }
                self.headMessageID = self.nextMessageID
                self.nextMessageID += 1
            }
            // Fragment: as much of the rest of the message as fits.
            let rest = length - self.headOffset
            let header = FrameWriter.fragmentHeaderSize(
                messageID: self.headMessageID,
                totalLength: length,
                offset: self.headOffset,
                length: min(rest, remaining)
            )
            let chunk = min(rest, remaining - header)
            // Not worth a fragment of a few bytes: wait for the next packet.
            guard chunk > 0, chunk == rest || chunk >= 64 else { break }
            FrameWriter.writeFragment(
                messageID: self.headMessageID,
                totalLength: length,
                offset: self.headOffset,
                data: head.getSlice(at: head.readerIndex + self.headOffset, length: chunk)!,
                into: &buffer
            )
            remaining -= header + chunk
            self.headOffset += chunk
            if self.headOffset == length {
                self.popHead(length: length, released: &released, completed: &completed)
            } else {
                break
            }
        }
        return (released, completed)
    }

    private mutating func popHead(length: Int, released: inout Int, completed: inout Int) {
        self.messages.removeFirst()
        self.headOffset = 0
        self.queuedBytes -= length
        released += length
        completed += 1
    }
}
