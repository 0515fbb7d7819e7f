import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The polite requests to stop (Ctrl-C's SIGINT, `kill`'s and service managers' SIGTERM, a
/// closed terminal's SIGHUP) turned into a call on a queue, so that a program can say goodbye
/// before it ends, and the conventional way to end afterwards. The project's tools use it;
/// an application may too, or handle signals its own way and call ``GKSession/closeAll(timeout:)``.
///
/// ```swift
/// TerminationSignals.handle { _ in game.quit() }   // on the main queue
/// await game.run()                                  // returns once game.quit() has closed the session
/// if let signal = TerminationSignals.received { TerminationSignals.exit(as: signal) }
/// ```
public enum TerminationSignals {
    /// SIGINT, SIGTERM and SIGHUP.
    public static let polite: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    private static let state = NIOLockedValueBox<(handled: Bool, received: Int32?)>((false, nil))
    /// The signal sources, kept for the life of the process (changed only under `state`'s lock).
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// Whether ``handle(on:_:)`` has taken the polite signals (``TerminalScreen`` then leaves
    /// them alone and restores the terminal when the program leaves it).
    public static var areHandled: Bool { Self.state.withLockedValue { $0.handled } }

    /// The first polite signal that arrived since ``handle(on:_:)``, if any.
    public static var received: Int32? { Self.state.withLockedValue { $0.received } }

    /// How long the program has to say goodbye after the first signal before it is ended anyway.
    public static let gracePeriod = 5.0

    /// Calls `handler` on `queue` with the first polite signal that arrives; the program then
    /// says its goodbyes and ends (``exit(as:)``). A second SIGINT means the user insists
    /// (Ctrl-C pressed again): the process ends at once. Repeated SIGTERMs and SIGHUPs are not
    /// insisting (a closed terminal sends SIGHUP twice: to the foreground job, and again through
    /// the shell) and change nothing. If the program has not ended ``gracePeriod`` seconds after
    /// the first signal, it is ended as that signal would have ended it. Call it once, early
    /// (before anything else sets these signals' dispositions).
    public static func handle(on queue: DispatchQueue = .main, _ handler: @escaping @Sendable (Int32) -> Void) {
        for number in Self.polite {
            // Until the source is registered, a signal is ignored rather than fatal.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let first = Self.state.withLockedValue { state -> Int32? in
                    defer { state.received = state.received ?? number }
                    return state.received
                }
                switch first {
                case nil:
                    DispatchQueue.global().asyncAfter(deadline: .now() + Self.gracePeriod) { Self.exit(as: number) }
                    queue.async { handler(number) }
                case SIGINT? where number == SIGINT:
                    Self.exit(as: number)
                default:
                    break
                }
            }
            source.resume()
            Self.state.withLockedValue { state in
                state.handled = true
                Self.sources.append(source)
            }
        }
    }

    /// Ends the process as `signal` would have ended it had nobody handled it (a shell shows
    /// status 128 + the signal's number), after the program has said its goodbyes. Exits with
    /// that status if the signal cannot end it (its default action ignored or blocked elsewhere).
    public static func exit(as signalNumber: Int32) -> Never {
        restoreTerminalNow()
        signal(signalNumber, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signalNumber)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(signalNumber)
        systemExit(128 + signalNumber)
    }
}

/// `exit(3)`, under a name that ``TerminationSignals/exit(as:)`` does not shadow.
private func systemExit(_ status: Int32) -> Never {
    exit(status)
}
