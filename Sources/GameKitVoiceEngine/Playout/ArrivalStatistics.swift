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

/// Loss counted from sequence numbers, per reporting interval.
struct LossCounter {
    private var highest: Int64?
    private var received = 0
    private var intervalStartHighest: Int64 = 0
    private(set) var lastIntervalLossPercent = 0

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
        intervalStartHighest = highest
        received = 0
        return lastIntervalLossPercent
    }

    mutating func reset() { self = LossCounter() }
}
