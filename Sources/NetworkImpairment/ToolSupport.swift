import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

// What the project's command-line tools (gk-link, gk-mdns, gk-session) share: JSON-line output
// and a stop condition.

/// One JSON object per line on standard output, written at once, each with `mono_ns`
/// (CLOCK_MONOTONIC, the clock of `NIODeadline.now()` and Python's `time.monotonic_ns()`).
public enum JSONLines {
    private static let lock = NSLock()

    /// Writes `fields` and `mono_ns` as one line.
    public static func line(_ fields: [String: Any]) {
        var fields = fields
        fields["mono_ns"] = Int(NIODeadline.now().uptimeNanoseconds)
        let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        lock.lock()
        FileHandle.standardOutput.write(data + Data("\n".utf8))
        lock.unlock()
    }
}

/// Resumes once: when a condition is signalled, a signal arrives or a deadline passes.
public final class StopCondition: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<String, Never>?
    private var reason: String?
    private var stoppingSignal: Int32?
    private var sources: [DispatchSourceSignal] = []

    /// Stops on these signals too (they are ignored otherwise while it lives).
    public init(signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]) {
        for number in signals {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.fire(signal: number) }
            source.resume()
            self.sources.append(source)
        }
    }

    /// The signal that stopped it, if one did.
    public var signal: Int32? { self.lock.withLock { self.stoppingSignal } }

    /// Stops because `number` arrived (reason "signal").
    public func fire(signal number: Int32) {
        self.fire("signal", signal: number)
    }

    /// Stops, for `why`; later calls change nothing.
    public func fire(_ why: String) {
        self.fire(why, signal: nil)
    }

    private func fire(_ why: String, signal number: Int32?) {
        self.lock.lock()
        guard self.reason == nil else {
            self.lock.unlock()
            return
        }
        self.reason = why
        self.stoppingSignal = number
        let continuation = self.continuation
        self.continuation = nil
        self.lock.unlock()
        continuation?.resume(returning: why)
    }

    /// Waits for `fire` (or `seconds`, when given); returns why it stopped. Without a limit (nil)
    /// it waits for a signal or `fire` alone: a server's default is to run until stopped.
    public func wait(seconds: Double?) async -> String {
        let timer = seconds.map { seconds in
            Task {
                // A limit beyond what a UInt64 of nanoseconds holds is no limit.
                guard seconds.isFinite, seconds * 1e9 < Double(UInt64.max) else { return }
                try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))
                self.fire("duration")
            }
        }
        defer { timer?.cancel() }
        return await withCheckedContinuation { continuation in
            self.lock.lock()
            if let reason = self.reason {
                self.lock.unlock()
                continuation.resume(returning: reason)
            } else {
                self.continuation = continuation
                self.lock.unlock()
            }
        }
    }
}
