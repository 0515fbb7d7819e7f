import NIOConcurrencyHelpers

/// The readers of an async sequence that an object feeds: each reader's stream continuation,
/// under a lock of its own, which nothing is yielded under.
///
/// A reader's `onTermination` removes it and takes this lock. Swift runs that handler on the
/// thread that cancels the reading task, while that thread holds the task's status lock; a
/// `yield` that resumes the same task waits for that status lock. Yielding under the lock
/// `onTermination` takes is therefore a deadlock waiting for a cancellation to meet a yield: a
/// group voice chat's `stop()` (cancelling the task that read its session's peer changes) met the
/// session's event loop yielding a peer change, and both waited for ever (gdb's stacks, issue 27).
/// So ``yield(_:)`` copies the continuations out and yields with the lock released. A caller that
/// needs its readers to see events in the order its state changed keeps its own lock around
/// `yield`: that lock is not one a reader's termination takes.
package final class StreamSubscribers<Element: Sendable>: Sendable {
    private struct State {
        var nextToken: UInt64 = 0
        var continuations: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var finished = false
    }

    private let state = NIOLockedValueBox(State())

    package init() {}

    /// A new reader's sequence: every element yielded from now on, until ``finish()`` (after it,
    /// a sequence that is already finished).
    package func makeStream(
        bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: bufferingPolicy)
        let token = self.state.withLockedValue { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextToken += 1
            state.continuations[state.nextToken] = continuation
            return state.nextToken
        }
        guard let token else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLockedValue { $0.continuations.removeValue(forKey: token) }
        }
        return stream
    }

    /// Whether nobody reads (to skip making elements nobody would get).
    package var isEmpty: Bool { self.state.withLockedValue { $0.continuations.isEmpty } }

    /// Hands `elements`, in order, to every reader, with the lock released.
    package func yield(_ elements: [Element]) {
        guard !elements.isEmpty else { return }
        let readers = self.state.withLockedValue { Array($0.continuations.values) }
        for reader in readers {
            for element in elements { reader.yield(element) }
        }
    }

    /// Ends every reader's sequence, and every later one's.
    package func finish() {
        let readers = self.state.withLockedValue { state -> [AsyncStream<Element>.Continuation] in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for reader in readers { reader.finish() }
    }
}
