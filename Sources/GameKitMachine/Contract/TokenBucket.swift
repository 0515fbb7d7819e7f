import NIOCore

/// A token bucket: `rate` tokens a second up to `burst`, one taken per permitted action. Refilled
/// lazily from the times it is asked at. Shared by every machine that limits a rate (the
/// transport's replies and liveness, the rendezvous's sources and rooms, the relay's senders).
package struct TokenBucket: Sendable {
    package let rate: Double
    package let burst: Double
    private var tokens: Double
    private var updated: NIODeadline?

    package init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
        self.tokens = burst
    }

    /// Takes a token if there is one.
    package mutating func take(now: NIODeadline) -> Bool {
        self.refill(now: now)
        guard self.tokens >= 1 else { return false }
        self.tokens -= 1
        return true
    }

    /// Takes `amount` tokens (bytes, say) if there are that many.
    package mutating func take(_ amount: Double, now: NIODeadline) -> Bool {
        self.refill(now: now)
        guard self.tokens >= amount else { return false }
        self.tokens -= amount
        return true
    }

    /// Whether the bucket has refilled to its burst (a limiter may then forget it).
    package mutating func isFull(now: NIODeadline) -> Bool {
        self.refill(now: now)
        return self.tokens >= self.burst
    }

    /// Whether a token could be taken now.
    package mutating func hasTokens(now: NIODeadline) -> Bool {
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
