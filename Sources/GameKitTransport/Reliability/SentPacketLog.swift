import DequeModule
import NIOCore

/// What the sender remembers of a packet until it is acknowledged or declared lost.
///
/// Plain values only (no references, no arrays), so logging a packet allocates nothing. A packet
/// carries at most one reliable chunk, which is what `streamStart`/`streamLength` describe.
struct SentPacket: Sendable {
    enum State: UInt8, Sendable {
        case outstanding
        case acknowledged
        case lost
    }

    var packetNumber: UInt64
    var timeSent: NIODeadline
    var size: Int
    /// Whether the packet asks for an acknowledgement (and so counts against the congestion window).
    var isAckEliciting: Bool
    var streamStart: UInt64 = 0
    var streamLength: Int = 0
    var carriesWindowUpdate = false
    var state: State = .outstanding
    /// Declared lost while the path showed congestion (its loss reduced the window).
    var lostToCongestion = false
    /// Declared lost by the retransmission timer (its late acknowledgement means a slow path,
    /// not reordering).
    var lostByTimer = false

    var streamRange: Range<UInt64>? {
        self.streamLength > 0 ? self.streamStart..<(self.streamStart + UInt64(self.streamLength)) : nil
    }
}

/// The ack-eliciting packets of one direction that are still of interest, in packet-number order.
///
/// Acknowledgement-only packets are not logged: nothing is learnt from their fate, and a peer
/// that never acknowledges them could otherwise make the log grow without end. Packet numbers in
/// the log therefore have gaps; lookups are binary searches. Entries leave from the front once
/// they are no longer outstanding, so the log holds about one congestion window.
struct SentPacketLog: Sendable {
    private var packets = Deque<SentPacket>()

    var isEmpty: Bool { self.packets.isEmpty }
    var count: Int { self.packets.count }
    var lastPacketNumber: UInt64? { self.packets.last?.packetNumber }

    mutating func append(_ packet: SentPacket) {
        precondition(packet.isAckEliciting, "only ack-eliciting packets are logged")
        precondition(self.packets.last.map { $0.packetNumber < packet.packetNumber } ?? true, "packet numbers must increase")
        self.packets.append(packet)
    }

    /// The position of `packetNumber` in the log, if it is there.
    func index(of packetNumber: UInt64) -> Int? {
        let index = self.firstIndex(notBelow: packetNumber)
        return index < self.packets.count && self.packets[index].packetNumber == packetNumber ? index : nil
    }

    /// The position of the first packet numbered `packetNumber` or higher (`count` if none).
    func firstIndex(notBelow packetNumber: UInt64) -> Int {
        var low = 0
        var high = self.packets.count
        while low < high {
            let mid = (low + high) / 2
            if self.packets[mid].packetNumber < packetNumber { low = mid + 1 } else { high = mid }
        }
        return low
    }

    subscript(index: Int) -> SentPacket {
        get { self.packets[index] }
        set { self.packets[index] = newValue }
    }

    /// Drops leading packets that are no longer outstanding: acknowledged ones at once, lost ones
    /// once sent before `lostBefore` (until then an acknowledgement may still prove their loss
    /// spurious).
    mutating func pruneFront(lostBefore: NIODeadline) {
        while let first = self.packets.first, first.state == .acknowledged || (first.state == .lost && first.timeSent < lostBefore) {
            self.packets.removeFirst()
        }
    }

    /// The oldest outstanding packet that carries reliable data.
    var indexOfOldestOutstandingReliablePacket: Int? {
        self.packets.firstIndex { $0.state == .outstanding && $0.streamLength > 0 }
    }

    /// The reliable data of the newest outstanding packet that carries some.
    var newestOutstandingStreamRange: Range<UInt64>? {
        self.packets.last { $0.state == .outstanding && $0.streamLength > 0 }?.streamRange
    }
}
