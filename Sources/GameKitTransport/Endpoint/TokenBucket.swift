import NIOCore

/// A token bucket: `rate` tokens a second up to `burst`, one taken per permitted action. Refilled
/// lazily from the times it is asked at.
struct TokenBucket {
    let rate: Double
    let burst: Double
    private var tokens: Double
    private var updated: NIODeadline?

    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
        self.tokens = burst
    }

    /// Takes a token if there is one.
    mutating func take(now: NIODeadline) -> Bool {
        self.refill(now: now)
        guard self.tokens >= 1 else { return false }
        self.tokens -= 1
        return true
    }

    /// Whether a token could be taken now.
    mutating func hasTokens(now: NIODeadline) -> Bool {
        self.refill(now: now)
        return self.tokens >= 1
    }

    private mutating func refill(now: NIODeadline) {
        if let updated, now > updated {
            self.tokens = min(self.burst, self.tokens + self.rate * Double((now - updated).nanoseconds) / 1e9)
        }
        self.updated = now
    }
}
