import NIOCore

/// Ends the first slow start when the round-trip time starts to rise, before the window
/// overshoots a deep queue: HyStart++ (RFC 9406), with congestion avoidance's growth instead of
/// the RFC's conservative slow start while the exit is confirmed (PROTOCOL §8.3 says why).
///
/// Slow start doubles the window every round trip until a packet is lost. Behind a deep
/// drop-tail queue (100 ms of a 20 Mbit/s link holds 250 KB) that loss comes only once the queue is
/// full, with the window many times what the path needs, and a flow that starts a moment later
/// meets a full queue. With few losses in a deep queue (a handful in 20 s), CUBIC converges slowly,
/// so such a head start lasts. This rule watches the smallest RTT of each round: once it stands
/// an eighth of the previous round's above it (at least ``minimumRTTThreshold``, at most
/// ``maximumRTTThreshold``), a queue is building, and congestion avoidance begins at the window
/// reached. For ``confirmationRounds`` rounds after that, a round whose smallest RTT falls back
/// below the one that ended slow start shows the rise was noise (jitter), and slow start resumes,
/// as in the RFC. A loss ends slow start as always.
///
/// Rounds end when a packet sent after the round began is acknowledged (the RFC's `windowEnd`,
/// in send times). A round decides only after ``samplesPerRound`` samples, so jitter, which
/// leaves some samples fast, does not end it. Used for the first slow start only, from a window
/// of ``lowWindowPackets`` on.
struct HyStart: Sendable {
    /// RFC 9406 §4.3 gives 4 ms: made for Internet paths, it lets a LAN path of 1.5 ms fill 15 ms
    /// of queue (ten times its RTT) before the rule fires. 1 ms is the standing-queue floor of
    /// ``LossEvidence`` too.
    static let minimumRTTThreshold = TimeAmount.milliseconds(1)
    static let maximumRTTThreshold = TimeAmount.milliseconds(16)
    static let rttThresholdDivisor: Int64 = 8
    static let samplesPerRound = 8
    /// The RFC's CSS_ROUNDS: rounds after an exit in which slow start may resume.
    static let confirmationRounds = 5
    /// Below this window (in packets) the rule does not run, as in Linux's HyStart: a sender
    /// that has sent little (a game's trickle) should not leave slow start on RTT noise and later
    /// grow a bulk transfer from a few packets by CUBIC's curve.
    static let lowWindowPackets = 16

    enum Phase: Equatable, Sendable {
        /// Slow start, watched.
        case slowStart
        /// Slow start ended on a round whose smallest RTT was `baseline`; it resumes if a round
        /// falls below that within `roundsLeft` more rounds.
        case confirming(baseline: TimeAmount, roundsLeft: Int)
        /// Over (confirmed, or ended by a loss or a timeout): nothing more to watch.
        case done
    }

    /// What a sample decided.
    enum Decision: Equatable, Sendable {
        case none
        /// The RTT rose: slow start ends at the current window.
        case exit
        /// The RTT fell back: the rise was noise, slow start resumes.
        case resume
    }

    private(set) var phase = Phase.slowStart
    /// How many times the rule ended slow start, and how many times it resumed it.
    private(set) var exits = 0
    private(set) var resumptions = 0
    private var roundStart: NIODeadline?
    private var lastRoundMinimum: TimeAmount?
    private var currentRoundMinimum: TimeAmount?
    private var samples = 0

    /// Whether this rule ended slow start (and it stayed ended).
    var exitedOnRTT: Bool { self.exits > self.resumptions }

    /// The rise over the previous round's smallest RTT that ends slow start.
    static func threshold(lastRoundMinimum last: TimeAmount) -> TimeAmount {
        max(Self.minimumRTTThreshold, min(last / Self.rttThresholdDivisor, Self.maximumRTTThreshold))
    }

    /// Slow start ended some other way (a loss, a timeout): nothing more to watch.
    mutating func finish() {
        self.phase = .done
    }

    /// An RTT sample (acknowledgement delay taken off) from an acknowledgement of a packet sent at
    /// `timeSent`, arrived at `now`.
    mutating func onRTTSample(_ rtt: TimeAmount, timeSent: NIODeadline, now: NIODeadline) -> Decision {
        guard self.phase != .done else { return .none }
        if self.roundStart.map({ timeSent >= $0 }) ?? true {
            // A packet of this round was acknowledged: the next round begins.
            self.roundStart = now
            self.lastRoundMinimum = self.currentRoundMinimum
            self.currentRoundMinimum = nil
            self.samples = 0
            if case .confirming(let baseline, let left) = self.phase {
                guard left > 1 else {
                    self.phase = .done
                    return .none
                }
                self.phase = .confirming(baseline: baseline, roundsLeft: left - 1)
            }
        }
        let current = min(self.currentRoundMinimum ?? rtt, rtt)
        self.currentRoundMinimum = current
        self.samples += 1
        guard self.samples >= Self.samplesPerRound else { return .none }
        switch self.phase {
        case .slowStart:
            guard let last = self.lastRoundMinimum, current >= last + Self.threshold(lastRoundMinimum: last) else { return .none }
            self.phase = .confirming(baseline: current, roundsLeft: Self.confirmationRounds)
            self.exits += 1
            return .exit
        case .confirming(let baseline, _):
            guard current < baseline else { return .none }
            self.phase = .slowStart
            self.resumptions += 1
            return .resume
        case .done:
            return .none
        }
    }
}
