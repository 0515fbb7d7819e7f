/// The arrival-delay distribution of recent packets, from which the jitter buffer sets its target.
///
/// For each packet, transit = arrival time − send timestamp (both in ms; their difference has an
/// unknown constant offset, which cancels). The jitter of a packet is its transit minus the
/// smallest transit of the window; the window is the last 500 packets (10 s of 20 ms frames),
/// so clock drift and route changes leave it by themselves. The target is the 95th percentile.
struct ArrivalStatistics {
    static let windowSize = 500
    private var transits: [Int64] = []
    private var next = 0
    private(set) var jitterP95: Int64 = 0
    var measured: Bool { transits.count >= 10 }
    private var sinceUpdate = 0

    mutating func record(transit: Int64) {
        if transits.count < Self.windowSize {
            transits.append(transit)
        } else {
            transits[next] = transit
            next = (next + 1) % Self.windowSize
        }
        sinceUpdate += 1
        // The percentile is recomputed every 5 packets (and at once while the window fills).
        if sinceUpdate >= 5 || transits.count < 50 {
            sinceUpdate = 0
            let floor = transits.min() ?? 0
            let sorted = transits.map { $0 - floor }.sorted()
            jitterP95 = sorted[min(sorted.count - 1, sorted.count * 95 / 100)]
        }
    }

    mutating func reset() {
        transits.removeAll(keepingCapacity: true)
        next = 0
        jitterP95 = 0
        sinceUpdate = 0
    }
}

/// Loss counted from sequence numbers, per reporting interval, and the cover against bursts the
/// receiver asks for (PROTOCOL §16.2): runs of missing sequence numbers over the last
/// ``coverWindowIntervals`` intervals say how many frames the FEC copy in the next packet alone
/// would leave lost, and how many copies two or three frames back would.
struct LossCounter {
    private var highest: Int64?
    private var received = 0
    private var intervalStartHighest: Int64 = 0
    private(set) var lastIntervalLossPercent = 0
    /// Runs of missing sequence numbers in the current interval (length → count).
    private var runs: [Int: Int] = [:]
    /// Closed intervals, newest last: packets expected and runs.
    private var history: [(expected: Int64, runs: [Int: Int])] = []
    /// The cover asked for after the last interval: 0, 2 or 3 frames back.
    private(set) var burstCover = 0

    static let coverWindowIntervals = 10
    /// The share of frames left lost (in ‰) above which deeper cover is asked for.
    static let uncoveredPerMilleLimit: Int64 = 5

    var highestSequence: UInt16 { UInt16(truncatingIfNeeded: highest ?? 0) }

    /// Notes a packet's sequence number (unwrapped against the highest seen).
    mutating func record(sequence: UInt16) {
        guard let current = highest else {
            highest = Int64(sequence)
            intervalStartHighest = Int64(sequence) - 1
            received = 1
            return
        }
        let delta = Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: current)))
        if delta > 0 { highest = current + delta }
        if delta > 1 { runs[Int(min(delta - 1, 64)), default: 0] += 1 }
        received += 1
    }

    /// Ends an interval and returns its loss in percent.
    mutating func closeInterval() -> Int {
        guard let highest else { return 0 }
        let expected = highest - intervalStartHighest
        if expected > 0 {
            let lost = max(0, expected - Int64(received))
            lastIntervalLossPercent = Int(min(100, lost * 100 / expected))
        }
        history.append((max(0, expected), runs))
        if history.count > Self.coverWindowIntervals { history.removeFirst(history.count - Self.coverWindowIntervals) }
        runs.removeAll(keepingCapacity: true)
        burstCover = Self.cover(for: history)
        intervalStartHighest = highest
        received = 0
        return lastIntervalLossPercent
    }

    /// The least cover (frames back, the FEC copy being 1) that leaves under 0.5 % of the
    /// window's frames lost, at most 3; 1 is asked for as 0 (the FEC copy needs no asking).
    static func cover(for history: [(expected: Int64, runs: [Int: Int])]) -> Int {
        let expected = history.reduce(0) { $0 + $1.expected }
        guard expected > 0 else { return 0 }
        for depth in 1...Int(VoicePacket.maximumBurstCover) {
            let uncovered = history.reduce(Int64(0)) { total, interval in
                total + interval.runs.reduce(Int64(0)) { $0 + Int64(max(0, $1.key - depth) * $1.value) }
            }
            if uncovered * 1000 < Self.uncoveredPerMilleLimit * expected { return depth == 1 ? 0 : depth }
        }
        return Int(VoicePacket.maximumBurstCover)
    }

    mutating func reset() { self = LossCounter() }
}
