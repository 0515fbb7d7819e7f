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

    var streamRange: Range<UInt64>? {
        self.streamLength > 0 ? self.streamStart..<(self.streamStart + UInt64(self.streamLength)) : nil
    }
}

/// The packets of one direction, indexed by packet number, from the oldest one still of interest.
///
/// Packet numbers are consecutive, so lookup is an index computation. Entries leave from the
/// front once they are no longer outstanding.
struct SentPacketLog: Sendable {
    private var packets = Deque<SentPacket>()
    private(set) var firstPacketNumber: UInt64 = 0

    var isEmpty: Bool { self.packets.isEmpty }
    var count: Int { self.packets.count }
    var lastPacketNumber: UInt64? { self.packets.last?.packetNumber }

    mutating func append(_ packet: SentPacket) {
        if self.packets.isEmpty {
            self.firstPacketNumber = packet.packetNumber
        }
        precondition(packet.packetNumber == self.firstPacketNumber + UInt64(self.packets.count), "packet numbers must be consecutive")
        self.packets.append(packet)
    }

    /// The position of `packetNumber` in the log, if it is there.
    func index(of packetNumber: UInt64) -> Int? {
        guard packetNumber >= self.firstPacketNumber else { return nil }
        let offset = packetNumber - self.firstPacketNumber
        return offset < UInt64(self.packets.count) ? Int(offset) : nil
    }

    subscript(index: Int) -> SentPacket {
        get { self.packets[index] }
        set { self.packets[index] = newValue }
    }

    /// Drops leading packets that are no longer outstanding.
    mutating func pruneFront() {
        while let first = self.packets.first, first.state != .outstanding || !first.isAckEliciting {
            self.packets.removeFirst()
            self.firstPacketNumber += 1
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
