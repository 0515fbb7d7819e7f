import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every session of the process not yet closed, so that one call can end them all with their
/// goodbyes (``GKSession/closeAll(timeout:)``), and so that `exit()` does.
///
/// A session is entered when it is made and leaves when its shutdown has finished. Entries hold
/// a closing action rather than the session object: a session whose last reference went away is
/// still closed by its core.
final class LiveSessions: Sendable {
    static let shared = LiveSessions()

    private let entries = NIOLockedValueBox<[ObjectIdentifier: @Sendable () async -> Void]>([:])
    private let exitHook = NIOLockedValueBox(false)

    /// How long `exit()` waits for the goodbyes of sessions still open.
    static let exitTimeout = 0.5

    /// Enters a session: `close` ends it as `GKSession.close()` does.
    func add(_ core: SessionCore, close: @escaping @Sendable () async -> Void) {
        self.entries.withLockedValue { $0[ObjectIdentifier(core)] = close }
        let install = self.exitHook.withLockedValue { installed in
            defer { installed = true }
            return !installed
        }
        if install {
            atexit { _ = LiveSessions.shared.closeAll(timeout: LiveSessions.exitTimeout) }
        }
    }

    /// A session whose shutdown has finished.
    func remove(_ core: SessionCore) {
        self.entries.withLockedValue { $0[ObjectIdentifier(core)] = nil }
    }

    /// Closes every session at once and waits for all of them, at most `timeout` seconds; true
    /// when all finished in time. Blocks the calling thread: the work runs on other threads
    /// (the sessions' event loops and the concurrency pool), never on the caller's queue.
    func closeAll(timeout: Double) -> Bool {
        let closers = self.entries.withLockedValue { Array($0.values) }
        guard !closers.isEmpty else { return true }
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await withTaskGroup(of: Void.self) { group in
                for close in closers { group.addTask { await close() } }
            }
            done.signal()
        }
        let seconds = timeout.isFinite ? max(0, min(timeout, 3600)) : 3600
        return done.wait(timeout: .now() + seconds) == .success
    }
}
