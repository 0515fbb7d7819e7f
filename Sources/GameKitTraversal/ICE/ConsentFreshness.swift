@_spi(Machine) import GameKitMachine
import NIOCore

/// Consent freshness on a selected pair (RFC 7675), sans-I/O: a check every
/// ``Timing/interval`` (±20 %), each retransmitted as a STUN transaction, and the verdict that
/// the far side stopped answering.
///
/// The verdict uses only evidence a starved process still has (as the transport's liveness
/// watcher does, PROTOCOL §6.6). Consent is lost when ``Timing/timeout`` has passed since the
/// last answer *and* at least ``checksBeforeLoss`` checks have left since then, the last of
/// those ``answerAllowance`` ago or more: a process that was stopped or starved for seconds sent nothing in
/// that time, so its own silence is no evidence against the path. The verdict is then only
/// suspected; it is confirmed ``confirmationDelay`` later, by a timer of its own, so that the
/// event loop reads its socket in between (answers that arrived during a stall, still waiting
/// there, clear the suspicion). An answer to any check since the last answer counts, not only to
/// the one being retransmitted: a far side slower than the interval still gives consent.
struct ConsentFreshness: Sendable {
    struct Timing: Sendable, Equatable {
        /// Between two checks (randomised ±20 %).
        var interval: TimeAmount
        /// Consent can be lost once this long has passed without an answer.
        var timeout: TimeAmount
        /// Retransmission of each check.
        var check: STUNTransaction.Timing
    }

    /// Unanswered checks, at least, before consent can be lost.
    static let checksBeforeLoss = 3
    /// How long the last of them must have been out.
    static let answerAllowance = TimeAmount.milliseconds(500)
    /// From a suspected loss to the verdict: long enough that the event loop polls its socket
    /// in between, short against the seconds a verdict takes.
    static let confirmationDelay = TimeAmount.milliseconds(50)
    /// Checks whose answers still count (the latest ones since the last answer).
    static let rememberedChecks = 8

    let timing: Timing
    /// The last answer (or the selection of the pair).
    private(set) var lastAnswer: NIODeadline
    private var nextCheck: NIODeadline
    /// The check being (re)transmitted.
    private var running: STUNTransaction?
    /// Transaction IDs of the latest checks since the last answer.
    private var outstanding: [[UInt8]] = []
    /// Checks that left since the last answer.
    private(set) var checksSinceAnswer = 0
    /// When the ``checksBeforeLoss``-th of them left.
    private var evidenceCheck: NIODeadline?
    /// When a loss was suspected (confirmed ``confirmationDelay`` later if still unanswered).
    private(set) var suspectedAt: NIODeadline?
    /// Suspected losses an answer cleared before the verdict.
    private(set) var suspicionsCleared = 0
    private(set) var isLost = false

    /// Consent given `now` (the pair was just selected); the first check is an interval away.
    init(timing: Timing, now: NIODeadline) {
        self.timing = timing
        self.lastAnswer = now
        self.nextCheck = now + timing.interval
    }

    /// Whether a response with this transaction ID answers one of the checks that still count.
    func isAnswer(to transactionID: [UInt8]) -> Bool {
        self.outstanding.contains(transactionID)
    }

    /// A valid answer to one of them (see ``isAnswer(to:)``) arrived `now`.
    mutating func answered(now: NIODeadline) {
        guard !self.isLost else { return }
        self.lastAnswer = now
        self.running = nil
        self.outstanding.removeAll()
        self.checksSinceAnswer = 0
        self.evidenceCheck = nil
        if self.suspectedAt != nil {
            self.suspectedAt = nil
            self.suspicionsCleared += 1
        }
    }

    /// Runs the verdict due at `now`; returns whether a new check is due (its request goes to
    /// ``start(_:bytes:now:random:)``).
    mutating func handleTimeout(now: NIODeadline) -> Bool {
        guard !self.isLost else { return false }
        if let suspectedAt = self.suspectedAt {
            if now >= suspectedAt + Self.confirmationDelay {
                self.isLost = true
                self.running = nil
                return false
            }
        } else if let due = self.verdictDue, now >= due {
            self.suspectedAt = now
        }
        return now >= self.nextCheck
    }

    /// A new check leaves `now` (its retransmissions replace the previous check's).
    mutating func start(_ message: STUNMessage, bytes: [UInt8], now: NIODeadline, random: inout MachineRandom) {
        self.running = STUNTransaction(message: message, bytes: bytes, timing: self.timing.check, now: now)
        self.outstanding.append(message.transactionID)
        if self.outstanding.count > Self.rememberedChecks { self.outstanding.removeFirst() }
        self.checksSinceAnswer += 1
        if self.checksSinceAnswer == Self.checksBeforeLoss { self.evidenceCheck = now }
        let interval = self.timing.interval.nanoseconds
        self.nextCheck = now + .nanoseconds(Int64.random(in: (interval * 4 / 5)...(interval * 6 / 5), using: &random))
    }

    /// The running check's (re)transmission due at `now`, if any.
    mutating func pollTransmit(now: NIODeadline) -> [UInt8]? {
        guard var running = self.running else { return nil }
        switch running.poll(now: now) {
        case .send(let bytes):
            self.running = running
            return bytes
        case .wait:
            return nil
        case .expired:
            // Its answer still counts if it comes (see isAnswer(to:)).
            self.running = nil
            return nil
        }
    }

    /// When the evidence for a loss is complete, if the checks so far would make it so.
    private var verdictDue: NIODeadline? {
        guard let evidenceCheck else { return nil }
        return max(self.lastAnswer + self.timing.timeout, evidenceCheck + Self.answerAllowance)
    }

    var nextDeadline: NIODeadline? {
        guard !self.isLost else { return nil }
        if let suspectedAt { return suspectedAt + Self.confirmationDelay }
        return [self.nextCheck, self.running?.deadline, self.verdictDue].compactMap { $0 }.min()
    }
}
