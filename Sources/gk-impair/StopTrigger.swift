import Dispatch
import Foundation

/// The moment `gk-impair` should stop: SIGINT, SIGTERM or the end of `--duration`.
///
/// The default signal actions would kill the process before it prints its statistics, so
/// both signals are ignored and observed through dispatch sources instead. The trigger is
/// armed before the `listening` line is printed, so a script that signals as soon as it reads
/// that line still gets the report. Signals stay ignored afterwards, so a second Ctrl-C
/// during shutdown cannot cut the report short.
final class StopTrigger {
    private let events: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private var sources: [any DispatchSourceSignal] = []
    private var timer: Task<Void, Never>?

    /// Starts watching for SIGINT and SIGTERM, and for `seconds` to pass if given.
    init(seconds: Double?) {
        (self.events, self.continuation) = AsyncStream.makeStream(of: Void.self)
        let continuation = self.continuation
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield() }
            source.resume()
            self.sources.append(source)
        }
        if let seconds {
            self.timer = Task {
                try? await Task.sleep(for: .seconds(seconds))
                continuation.yield()
            }
        }
    }

    /// Returns once a signal has arrived or the duration has passed.
    func wait() async {
        var iterator = self.events.makeAsyncIterator()
        _ = await iterator.next()
        self.timer?.cancel()
        for source in self.sources {
            source.cancel()
        }
        self.continuation.finish()
    }
}
