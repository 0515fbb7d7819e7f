/// Shortens or lengthens a frame of speech by one pitch period, without an audible jump: the
/// period is found by autocorrelation and the cut (or the repeat) is cross-faded over a whole
/// period, so the waveform stays continuous. This is how the jitter buffer drains excess delay
/// (accelerate) and adds delay (expand) — the same idea as WebRTC NetEQ's, kept small.
struct TimeStretch {
    /// Shortest period searched: 2.5 ms (400 Hz).
    static let minimumLag = 40
    /// Correlation above which a frame is periodic enough to cut.
    static let periodicity: Float = 0.6
    /// Below this mean square (about −50 dBFS) any cut is inaudible.
    static let quiet: Float = 1e-5 * 32768 * 32768

    /// The best period of `frame` and how periodic it is (normalised correlation, −1…1).
    static func period(of frame: [Int16]) -> (lag: Int, correlation: Float, meanSquare: Float) {
        let maximumLag = frame.count / 2
        let window = frame.count - maximumLag
        var energy: Float = 0
        for index in 0..<frame.count { energy += Float(frame[index]) * Float(frame[index]) }
        let meanSquare = energy / Float(frame.count)
        var best = (lag: maximumLag, correlation: Float(-1))
        var head: Float = 0
        for index in 0..<window { head += Float(frame[index]) * Float(frame[index]) }
        for lag in minimumLag...maximumLag {
            var cross: Float = 0
            var tail: Float = 0
            for index in 0..<window {
                let a = Float(frame[index])
                let b = Float(frame[index + lag])
                cross += a * b
                tail += b * b
            }
            let norm = (head * tail).squareRoot()
            let correlation = norm > 0 ? cross / norm : 0
            if correlation > best.correlation { best = (lag, correlation) }
        }
        return (best.lag, best.correlation, meanSquare)
    }

    /// The frame one period shorter, or nil when it is neither periodic nor quiet (a cut there
    /// could be heard; the caller tries again on a later frame). `force` cuts at the best lag
    /// whatever the signal: for when the buffer has run far over its target.
    static func accelerate(_ frame: [Int16], force: Bool = false) -> [Int16]? {
        guard frame.count >= 4 * minimumLag else { return nil }
        let (lag, correlation, meanSquare) = period(of: frame)
        guard force || correlation >= periodicity || meanSquare < quiet else { return nil }
        var out = [Int16]()
        out.reserveCapacity(frame.count - lag)
        for index in 0..<lag {
            let fadeIn = Float(index) / Float(lag)
            out.append(mix(frame[index], frame[index + lag], fadeIn))
        }
        out.append(contentsOf: frame[(2 * lag)...])
        return out
    }

    /// The frame one period longer, or nil when it is neither periodic nor quiet.
    static func expand(_ frame: [Int16]) -> [Int16]? {
        guard frame.count >= 4 * minimumLag else { return nil }
        let (lag, correlation, meanSquare) = period(of: frame)
        guard correlation >= periodicity || meanSquare < quiet else { return nil }
        var out = Array(frame[0..<lag])
        out.reserveCapacity(frame.count + lag)
        for index in 0..<lag {
            let fadeIn = Float(index) / Float(lag)
            out.append(mix(frame[lag + index], frame[index], fadeIn))
        }
        out.append(contentsOf: frame[lag...])
        return out
    }

    private static func mix(_ from: Int16, _ to: Int16, _ fadeIn: Float) -> Int16 {
        let value = Float(from) * (1 - fadeIn) + Float(to) * fadeIn
        return Int16(max(-32768, min(32767, value.rounded())))
    }
}
