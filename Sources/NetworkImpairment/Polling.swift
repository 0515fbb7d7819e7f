import NIOCore

/// Polls `condition` every `interval` (20 ms by default) for at most `seconds`, on the caller's
/// actor, without blocking a thread; returns whether it held. The one wait of the tests and
/// benchmarks for what has no event to wait on (a bound, never a timing requirement: the
/// condition is checked once more at the end). Measured on the monotonic clock.
public func waitUntil(
    seconds: Double, every interval: TimeAmount = .milliseconds(20), isolation: isolated (any Actor)? = #isolation, _ condition: () -> Bool
) async -> Bool {
    let deadline = NIODeadline.now() + .nanoseconds(Int64(seconds * 1e9))
    while NIODeadline.now() < deadline {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: UInt64(max(interval.nanoseconds, 0)))
    }
    return condition()
}
