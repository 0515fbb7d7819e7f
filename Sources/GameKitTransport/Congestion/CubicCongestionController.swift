import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// CUBIC congestion control (RFC 9438) with slow start (its first one ended early when the RTT
/// rises, ``HyStart``), a Reno-friendly region, fast
/// convergence, one reduction per recovery period and app-limited detection; a reduction only for
/// losses that ``LossEvidence`` calls congestive, and undone when every loss of its recovery period
/// proves spurious (the original packet was acknowledged after all).
///
/// Why CUBIC rather than NewReno: its multiplicative decrease is 0.7 instead of 0.5 and its
/// growth after a loss depends on time rather than on RTT, so a link keeps its rate through the
/// random (non-congestive) loss of Wi-Fi better, while still backing off under real congestion.
/// Windows are in bytes; the cubic function works in segments of `maxDatagramSize` and seconds.
struct CubicCongestionController: Sendable {
    /// RFC 9438 §4.6 constants.
    static let c = 0.4
    static let beta = 0.7
    /// The Reno-friendly additive increase that matches Reno's average rate (RFC 9438 §4.3).
    static let alpha = 3.0 * (1.0 - beta) / (1.0 + beta)

    let maxDatagramSize: Int
    let minimumWindow: Int
    let maximumWindow: Int

    private(set) var congestionWindow: Int
    private(set) var slowStartThreshold = Int.max
    private(set) var bytesInFlight = 0
    /// Packets sent at or before this time belong to the current recovery period.
    private(set) var recoveryStart: NIODeadline?

    // CUBIC state (segments, seconds).
    private var windowMax = 0.0
    private var epochStart: NIODeadline?
    private var k = 0.0
    private var renoEstimate = 0.0
    /// Set when the window, not the application, limited sending since the last acknowledgement.
    private var cwndLimited = false
    /// What a reduction changes, kept to undo it.
    private struct Snapshot: Sendable {
        var window: Int
        var threshold: Int
        var windowMax: Double
        var k: Double
        var epochStart: NIODeadline?
        var renoEstimate: Double
        var recoveryStart: NIODeadline?
    }

    /// The state before the last retransmission timeout, restored if it proves spurious.
    private var beforeTimeout: Snapshot?
    /// The state before the current recovery period's loss reduction, and how many of the
    /// period's congestive losses are not yet proven spurious.
    private var beforeLossReduction: Snapshot?
    private var unprovenLosses = 0
    /// Losses that reduced the window, losses taken as random (no reduction), reductions undone.
    private(set) var congestiveLosses = 0
    private(set) var randomLosses = 0
    private(set) var reductionsUndone = 0
    /// Recovery periods begun by a congestive loss (each one reduction of the window).
    private(set) var lossReductions = 0
    /// Watches the first slow start's RTT (``HyStart``).
    private(set) var hyStart = HyStart()

    init(maxDatagramSize: Int, initialWindowPackets: Int = 10, minimumWindowPackets: Int = 2, maximumWindow: Int = 64 << 20) {
        self.maxDatagramSize = maxDatagramSize
        self.minimumWindow = minimumWindowPackets * maxDatagramSize
        self.maximumWindow = maximumWindow
        self.congestionWindow = initialWindowPackets * maxDatagramSize
    }

    var isInSlowStart: Bool { self.congestionWindow < self.slowStartThreshold }

    /// Whether a packet of `bytes` may be sent now.
    func canSend(bytes: Int) -> Bool {
        self.bytesInFlight + bytes <= self.congestionWindow
    }

    /// Records that the window held back a packet (so growth is deserved).
    mutating func onBlockedByWindow() {
        self.cwndLimited = true
    }

    mutating func onPacketSent(bytes: Int) {
        self.bytesInFlight += bytes
        if self.bytesInFlight * 2 >= self.congestionWindow {
            self.cwndLimited = true
        }
    }

    /// Records acknowledged ack-eliciting bytes; grows the window unless in recovery or
    /// application-limited.
    mutating func onPacketAcknowledged(bytes: Int, timeSent: NIODeadline, now: NIODeadline, smoothedRTT: TimeAmount) {
        self.bytesInFlight = max(0, self.bytesInFlight - bytes)
        if let recoveryStart, timeSent <= recoveryStart { return }
        guard self.cwndLimited else { return }
        if self.isInSlowStart {
            self.congestionWindow = min(self.congestionWindow + bytes, self.maximumWindow)
            return
        }
        self.growInCongestionAvoidance(ackedBytes: bytes, now: now, rtt: smoothedRTT)
    }

    /// An RTT sample (acknowledgement delay taken off) from the acknowledgement of a packet sent at
    /// `timeSent`: in the first slow start, once the window holds ``HyStart/lowWindowPackets``
    /// packets, a rising RTT ends it and congestion avoidance begins at the window reached; an RTT
    /// that falls back within a few rounds resumes it (``HyStart``).
    mutating func onRTTSample(_ rtt: TimeAmount, timeSent: NIODeadline, now: NIODeadline) {
        guard self.hyStart.phase != .done else { return }
        guard self.congestionWindow >= HyStart.lowWindowPackets * self.maxDatagramSize else { return }
        switch self.hyStart.onRTTSample(rtt, timeSent: timeSent, now: now) {
        case .none: break
        case .exit:
            self.slowStartThreshold = self.congestionWindow
            self.epochStart = nil
        case .resume:
            self.slowStartThreshold = Int.max
        }
    }

    /// Called once per batch of acknowledgements, after growth was decided.
    mutating func onAcknowledgementsProcessed() {
        self.cwndLimited = self.bytesInFlight * 2 >= self.congestionWindow
    }

    /// Removes bytes from flight without any congestion signal (e.g. a discarded packet).
    mutating func onPacketDiscarded(bytes: Int) {
        self.bytesInFlight = max(0, self.bytesInFlight - bytes)
    }

    /// A packet sent at `timeSent` was declared lost; `congestive` says whether the path shows
    /// congestion (``LossEvidence``). A random loss leaves the window as it is.
    mutating func onPacketLost(bytes: Int, timeSent: NIODeadline, now: NIODeadline, congestive: Bool = true) {
        self.bytesInFlight = max(0, self.bytesInFlight - bytes)
        guard congestive else {
            self.randomLosses += 1
            return
        }
        self.congestiveLosses += 1
        if let recoveryStart, timeSent <= recoveryStart {
            if self.beforeLossReduction != nil { self.unprovenLosses += 1 }
            return
        }
        self.beforeLossReduction = self.snapshot
        self.unprovenLosses = 1
        self.lossReductions += 1
        self.enterRecovery(now: now)
    }

    /// A packet sent at `timeSent`, declared lost as congestion, was acknowledged after all. When
    /// that proves every loss of the current recovery period spurious (reordering, not loss), the
    /// period's reduction is undone (as Linux and RFC 8985's DSACK-based undo do).
    mutating func onSpuriousLoss(timeSent: NIODeadline) {
        guard let saved = self.beforeLossReduction, let recoveryStart, timeSent <= recoveryStart else { return }
        self.unprovenLosses -= 1
        guard self.unprovenLosses <= 0 else { return }
        self.beforeLossReduction = nil
        self.restore(saved)
        self.reductionsUndone += 1
    }

    /// The retransmission timer expired: restart from the minimum window in slow start (RFC 5681
    /// §3.1, RFC 9438 §4.8). Bytes in flight stay counted until acknowledged or declared lost.
    mutating func onRetransmissionTimeout(now: NIODeadline) {
        if self.beforeTimeout == nil {
            self.beforeTimeout = self.snapshot
        }
        self.beforeLossReduction = nil
        self.enterRecovery(now: now)
        self.congestionWindow = self.minimumWindow
    }

    /// The first acknowledgement after a retransmission timeout arrived. If it acknowledges a packet
    /// sent before the timeout, the timeout was spurious (the path was slow, not lossy): the window
    /// is restored, as the Eifel response (RFC 4015) does.
    mutating func onAcknowledgementAfterTimeout(originalTransmissionAcknowledged: Bool) {
        guard let saved = self.beforeTimeout else { return }
        self.beforeTimeout = nil
        guard originalTransmissionAcknowledged else { return }
        self.restore(saved)
        self.recoveryStart = nil
    }

    var isRecoveringFromTimeout: Bool { self.beforeTimeout != nil }

    // MARK: - Private

    private var snapshot: Snapshot {
        Snapshot(window: self.congestionWindow, threshold: self.slowStartThreshold, windowMax: self.windowMax, k: self.k,
                 epochStart: self.epochStart, renoEstimate: self.renoEstimate, recoveryStart: self.recoveryStart)
    }

    private mutating func restore(_ saved: Snapshot) {
        self.congestionWindow = max(self.congestionWindow, saved.window)
        self.slowStartThreshold = saved.threshold
        self.windowMax = saved.windowMax
        self.k = saved.k
        self.epochStart = saved.epochStart
        self.renoEstimate = saved.renoEstimate
        self.recoveryStart = saved.recoveryStart
    }

    private mutating func enterRecovery(now: NIODeadline) {
        self.hyStart.finish()
        self.recoveryStart = now
        let segments = Double(self.congestionWindow) / Double(self.maxDatagramSize)
        // Fast convergence (RFC 9438 §4.7): release bandwidth when the window keeps shrinking.
        if segments < self.windowMax {
            self.windowMax = segments * (1.0 + Self.beta) / 2.0
        } else {
            self.windowMax = segments
        }
        let reduced = max(Int(Double(self.congestionWindow) * Self.beta), self.minimumWindow)
        self.congestionWindow = reduced
        self.slowStartThreshold = reduced
        self.epochStart = nil
    }

    private mutating func growInCongestionAvoidance(ackedBytes: Int, now: NIODeadline, rtt: TimeAmount) {
        let mss = Double(self.maxDatagramSize)
        let cwnd = Double(self.congestionWindow) / mss
        if self.epochStart == nil {
            self.epochStart = now
            if self.windowMax <= cwnd {
                self.windowMax = cwnd
                self.k = 0
            } else {
                self.k = cbrt((self.windowMax - cwnd) / Self.c)
            }
            self.renoEstimate = cwnd
        }
        let elapsed = Double((now - self.epochStart!).nanoseconds) / 1e9
        let rttSeconds = Double(rtt.nanoseconds) / 1e9
        // The window CUBIC wants one RTT from now, limited to 1.5x the current one.
        let t = elapsed + rttSeconds - self.k
        let target = min(max(Self.c * t * t * t + self.windowMax, cwnd), cwnd * 1.5)
        let ackedSegments = Double(ackedBytes) / mss
        self.renoEstimate += Self.alpha * ackedSegments / cwnd
        var next = cwnd + (target - cwnd) * ackedSegments / cwnd
        if self.renoEstimate > next {
            next = self.renoEstimate
        }
        self.congestionWindow = min(max(Int(next * mss), self.congestionWindow), self.maximumWindow)
    }
}
