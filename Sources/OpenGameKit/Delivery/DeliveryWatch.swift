import Dispatch
import NIOConcurrencyHelpers

/// Notices a delegate queue that does not run. A program that never runs its main queue (no
/// `RunLoop.main.run()`, `dispatchMain()` or async `main`) gets no delegate calls, accepts no
/// request and connects nothing, silently; this says so, once, when a batch queued for the
/// delegate has waited ``limit`` seconds. One check is pending at a time, however many batches
/// are queued.
final class DeliveryWatch: Sendable {
    /// How long a batch may wait before the warning.
    static let limit = 5.0

    private struct State {
        var queued: UInt64 = 0
        var delivered: UInt64 = 0
        var checking = false
        var warned = false
    }

    private let state = NIOLockedValueBox(State())
    private let warn: @Sendable () -> Void

    /// `warn` is called at most once.
    init(warn: @escaping @Sendable () -> Void) {
        self.warn = warn
    }

    /// A batch was queued for the delegate.
    func queued() {
        let check = self.state.withLockedValue { state -> UInt64? in
            state.queued += 1
            guard !state.checking, !state.warned else { return nil }
            state.checking = true
            return state.queued
        }
        if let check { self.schedule(check) }
    }

    /// A batch reached the delegate queue.
    func delivered() {
        self.state.withLockedValue { $0.delivered += 1 }
    }

    private func schedule(_ batch: UInt64) {
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.limit) { [weak self] in self?.check(batch) }
    }

    private func check(_ batch: UInt64) {
        let (late, next) = self.state.withLockedValue { state -> (Bool, UInt64?) in
            if state.delivered < batch, !state.warned {
                state.warned = true
                state.checking = false
                return (true, nil)
            }
            // Batches queued since: check the newest of them in turn.
            guard state.queued > state.delivered, !state.warned else {
                state.checking = false
                return (false, nil)
            }
            return (false, state.queued)
        }
        if late { self.warn() }
        if let next { self.schedule(next) }
    }
}
