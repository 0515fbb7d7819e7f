import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// CUBIC congestion control (RFC 9438) with slow start, a Reno-friendly region, fast
/// convergence, one reduction per recovery period and app-limited detection.
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
    /// The state before the last retransmission timeout, restored if it proves spurious.
    private var beforeTimeout: (window: Int, threshold: Int, windowMax: Double, k: Double, epochStart: NIODeadline?, renoEstimate: Double)?

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

    /// Called once per batch of acknowledgements, after growth was decided.
    mutating func onAcknowledgementsProcessed() {
        self.cwndLimited = self.bytesInFlight * 2 >= self.congestionWindow
    }

    /// Removes bytes from flight without any congestion signal (e.g. a discarded packet).
    mutating func onPacketDiscarded(bytes: Int) {
        self.bytesInFlight = max(0, self.bytesInFlight - bytes)
    }

    /// A packet sent at `timeSent` was declared lost.
    mutating func onPacketLost(bytes: Int, timeSent: NIODeadline, now: NIODeadline) {
        self.bytesInFlight = max(0, self.bytesInFlight - bytes)
        if let recoveryStart, timeSent <= recoveryStart { return }
        self.enterRecovery(now: now)
    }

    /// The retransmission timer expired: restart from the minimum window in slow start (RFC 5681
    /// §3.1, RFC 9438 §4.8). Bytes in flight stay counted until acknowledged or declared lost.
    mutating func onRetransmissionTimeout(now: NIODeadline) {
        if self.beforeTimeout == nil {
            self.beforeTimeout = (self.congestionWindow, self.slowStartThreshold, self.windowMax, self.k, self.epochStart, self.renoEstimate)
        }
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
        self.congestionWindow = saved.window
        self.slowStartThreshold = saved.threshold
        self.windowMax = saved.windowMax
        self.k = saved.k
        self.epochStart = saved.epochStart
        self.renoEstimate = saved.renoEstimate
        self.recoveryStart = nil
    }

    var isRecoveringFromTimeout: Bool { self.beforeTimeout != nil }

    // MARK: - Private

    private mutating func enterRecovery(now: NIODeadline) {
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
