import NIOCore

/// A client transaction over UDP (RFC 8489 §6.2.1): the request is sent, then sent again after
/// an interval that doubles, until a response arrives or the last interval ends.
struct STUNTransaction: Sendable {
    /// Retransmission settings. RFC 8489's defaults (500 ms, 7 sends) suit the Internet at large;
    /// traversal here runs while a call is being set up, so it starts at 200 ms and gives up after
    /// 5 sends (6.2 s).
    struct Timing: Sendable, Equatable {
        var initialInterval: TimeAmount = .milliseconds(200)
        var sends = 5
    }

    let transactionID: [UInt8]
    let bytes: [UInt8]
    private let timing: Timing
    private(set) var sent = 0
    private(set) var deadline: NIODeadline

    init(message: STUNMessage, bytes: [UInt8], timing: Timing, now: NIODeadline) {
        self.transactionID = message.transactionID
        self.bytes = bytes
        self.timing = timing
        self.deadline = now
    }

    /// When due, returns the bytes to (re)send and schedules the next send; `.expired` once the
    /// last interval has passed without an answer.
    mutating func poll(now: NIODeadline) -> Poll {
        guard now >= self.deadline else { return .wait }
        guard self.sent < self.timing.sends else { return .expired }
        let interval = TimeAmount.nanoseconds(self.timing.initialInterval.nanoseconds << self.sent)
        self.sent += 1
        // After the last send, wait one more (doubled) interval for the answer (RFC 8489 Rm).
        self.deadline = now + interval
        return .send(self.bytes)
    }

    enum Poll: Equatable {
        case wait
        case send([UInt8])
        case expired
    }
}
