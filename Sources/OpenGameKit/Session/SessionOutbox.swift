import DequeModule
import NIOCore

/// Reliable messages the session itself sends (a server's roster, joined and left messages and
/// the data it relays; drop requests) that did not fit in a link's send buffer. They go out in
/// order as room comes back; while any wait, the application's own reliable sends to that peer
/// fail as "buffer full" so that nothing overtakes them.
struct SessionOutbox: Sendable {
    private(set) var messages = Deque<ByteBuffer>()
    private(set) var bytes = 0

    var isEmpty: Bool { self.messages.isEmpty }

    mutating func append(_ message: ByteBuffer) {
        self.messages.append(message)
        self.bytes += message.readableBytes
    }

    var first: ByteBuffer? { self.messages.first }

    mutating func removeFirst() {
        let message = self.messages.removeFirst()
        self.bytes -= message.readableBytes
    }
}
