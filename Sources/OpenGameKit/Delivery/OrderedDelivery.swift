import Dispatch
import NIOConcurrencyHelpers

/// Runs an object's callbacks on a serial queue, in the order they were asked for: at once when
/// the caller already runs on that queue and nothing of this object's waits there, else queued
/// behind what waits.
///
/// Running at once is what makes Game Kit code behave as it did on the iPhone: a call made on the
/// main queue (the picker's `show()`, the voice service's `stopVoiceChat`) has its effects,
/// callbacks included, before it returns. The lecture's voice demo relies on that: it stops the
/// chat and then drops its session, and the hang-up must go out through the session first.
/// Counting what waits keeps the order when callbacks also come from other threads.
package final class OrderedDelivery: @unchecked Sendable {
    private let waiting = NIOLockedValueBox(0)

    package init() {}

    /// Runs `body` on `queue`, now if the caller is on it and nothing waits, else after what waits.
    package func run(on queue: DispatchQueue, _ body: @escaping @Sendable () -> Void) {
        let now = self.waiting.withLockedValue { $0 == 0 } && queue.isCurrent
        if now {
            body()
            return
        }
        self.waiting.withLockedValue { $0 += 1 }
        queue.async {
            self.waiting.withLockedValue { $0 -= 1 }
            body()
        }
    }
}
