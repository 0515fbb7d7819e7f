import NIOCore

/// The receiving side of acknowledgements: which packet numbers arrived and when an ACK is due.
///
/// An ACK is sent at once when two ack-eliciting packets are unacknowledged or one arrived out of
/// order (the endpoint sends after processing a whole batch of received datagrams, so "at once"
/// means once per batch); otherwise within the maximum acknowledgement delay. Every outgoing
/// packet also carries an ACK whenever something new arrived since the last one.
struct AckTracker: Sendable {
    /// At most this many ranges are remembered (and reported); older ones are forgotten.
    static let rememberedRanges = 256
    static let reportedRanges = 128

    private(set) var received = IntervalSet()
    private var largestReceivedTime: NIODeadline?
    private var ackElicitingSinceAck = 0
    private var receivedSinceAck = false
    private var immediate = false
    private(set) var deadline: NIODeadline?

    mutating func onPacketReceived(_ packetNumber: UInt64, isAckEliciting: Bool, now: NIODeadline, maxAckDelay: TimeAmount) {
        let largest = self.received.last.map { $0.upperBound - 1 }
        let inOrder = largest.map { packetNumber == $0 + 1 } ?? true
        self.received.insert(packetNumber)
        self.received.keepHighest(Self.rememberedRanges)
        if largest.map({ packetNumber > $0 }) ?? true {
            self.largestReceivedTime = now
        }
        self.receivedSinceAck = true
        guard isAckEliciting else { return }
        self.ackElicitingSinceAck += 1
        if self.ackElicitingSinceAck >= 2 || !inOrder {
            self.immediate = true
        } else if self.deadline == nil {
            self.deadline = now + maxAckDelay
        }
    }

    /// Whether an ACK must go out now, even in a packet of its own.
    func isAckDue(now: NIODeadline) -> Bool {
        self.immediate || (self.deadline.map { now >= $0 } ?? false)
    }

    /// Whether an ACK would tell the peer anything new (worth piggybacking).
    var hasNewInformation: Bool { self.receivedSinceAck }

    func ackDelayMicroseconds(now: NIODeadline) -> UInt64 {
        guard let time = self.largestReceivedTime, now > time else { return 0 }
        return UInt64((now - time).nanoseconds / 1000)
    }

    mutating func onAckSent() {
        self.ackElicitingSinceAck = 0
        self.receivedSinceAck = false
        self.immediate = false
        self.deadline = nil
    }
}
