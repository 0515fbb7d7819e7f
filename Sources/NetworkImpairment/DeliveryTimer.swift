import NIOCore

/// The one event loop timer of one relay direction.
///
/// A relay forwarding 10,000 datagrams a second with jitter must not schedule 10,000 timers
/// a second. Each direction keeps a single timer armed at its model's next delivery time:
/// it is moved earlier when a new datagram is due sooner, left alone when the new one is due
/// later, and re-armed by the pump that runs when it fires.
struct DeliveryTimer {
    private var scheduled: Scheduled<Void>?
    private var deadline: NIODeadline?

    /// Makes sure `fire` runs at `next` (or earlier), or cancels the timer if `next` is `nil`.
    /// Must be called on `loop`.
    mutating func arm(at next: NIODeadline?, on loop: any EventLoop, _ fire: @escaping () -> Void) {
        guard let next else {
            self.cancel()
            return
        }
        if let deadline = self.deadline, deadline <= next {
            return
        }
        self.cancel()
        self.deadline = next
        self.scheduled = loop.assumeIsolated().scheduleTask(deadline: next, fire)
    }

    /// Forgets the timer that just fired, so that the next ``arm(at:on:_:)`` schedules anew.
    mutating func fired() {
        self.scheduled = nil
        self.deadline = nil
    }

    /// Cancels the pending timer, if any.
    mutating func cancel() {
        self.scheduled?.cancel()
        self.scheduled = nil
        self.deadline = nil
    }
}
