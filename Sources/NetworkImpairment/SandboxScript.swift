import Foundation

/// Runs a bash script in a fresh nested network namespace (scripts/sandbox), with the built
/// executables (gk-link, gk-impair, gk-mdns) on PATH and `PEER_PYTHON` naming the test peers'
/// Python (the repository's .venv), and returns its standard output lines. Used by the
/// multi-process tests of every module: each process they start lives and dies inside that
/// namespace.
public enum SandboxScript {
    /// The package's root directory (this file is Sources/NetworkImpairment/SandboxScript.swift).
    public static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The directory holding the test bundle, which is where SwiftPM puts the executables too.
    public static var binaries: URL {
        URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// The Python interpreter of the test peers' virtual environment (made by scripts/peers-venv).
    public static var peerPython: URL {
        self.packageRoot.appendingPathComponent(".venv/bin/python")
    }

    public struct Result: Sendable {
        public var lines: [String]
        public var status: Int32

        /// Lines that parse as JSON objects.
        public var objects: [[String: Any]] {
            self.lines.compactMap { line in
                guard line.hasPrefix("{"), let data = line.data(using: .utf8) else { return nil }
                return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            }
        }

        /// The lines a program tagged `tag` printed (scripts prefix each program's output with
        /// its tag), without the tag.
        public func lines(tagged tag: String) -> [String] {
            self.lines.filter { $0.hasPrefix("\(tag) ") }.map { String($0.dropFirst(tag.count + 1)) }
        }

        /// JSON lines carrying `"tag": tag` (scripts prefix each program's output with its tag).
        public func objects(tagged tag: String) -> [[String: Any]] {
            self.lines.compactMap { line in
                guard line.hasPrefix("\(tag) "), let data = line.dropFirst(tag.count + 1).data(using: .utf8) else { return nil }
                return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            }
        }
    }

    /// Runs `script` from the package root; `loss` adds the kernel drop rule. The script is killed after `timeout`
    /// seconds (a bound so a broken run cannot hang the suite, not a performance requirement).
    ///
    /// The wait happens on a thread of its own, never on the concurrency pool: on a two-core machine that pool
    /// has two threads, and a test blocking one for the length of a script starves every other test.
    public static func run(_ script: String, loss: Double = 0, timeout: Double = 120) async throws -> Result {
        try NetworkSandbox.requireIsolation()
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Swift.Result { try self.runBlocking(script, loss: loss, timeout: timeout) })
            }
            thread.name = "SandboxScript"
            thread.start()
        }
    }

    private static func runBlocking(_ script: String, loss: Double, timeout: Double) throws -> Result {
        // Test runners block most signals in their threads, and a spawned process inherits the
        // spawning thread's mask: programs that live on signals (tmux waits for SIGCHLD, a
        // terminal program for SIGWINCH) would hang. This thread is ours: unblock everything.
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        let process = Process()
        process.executableURL = self.packageRoot.appendingPathComponent("scripts/sandbox")
        var arguments = loss > 0 ? ["--loss", "\(loss)"] : []
        arguments += ["--", "bash", "-c", "set -u\n" + script]
        process.arguments = arguments
        process.currentDirectoryURL = self.packageRoot
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = self.binaries.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["PEER_PYTHON"] = self.peerPython.path
        environment["PEERS"] = self.packageRoot.appendingPathComponent("Tests/Peers").path
        process.environment = environment
        let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
        let data = try process.runCollectingOutput {
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        }
        process.waitUntilExit()
        killer.cancel()
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        return Result(lines: lines, status: process.terminationStatus)
    }

    /// Bash that waits (at most 20 s) until `file` has `count` lines containing `text`, a fixed
    /// string (not a pattern).
    public static func awaitText(_ text: String, in file: String, count: Int = 1) -> String {
        "for i in $(seq 400); do [ $(cat \(file) 2>/dev/null | grep -cF -- '\(text)') -ge \(count) ] && break; sleep 0.05; done"
    }

    /// Bash that waits until `file` contains a "listening" line (at most 10 s).
    public static func awaitListening(_ file: String) -> String {
        "for i in $(seq 200); do grep -q 'listening' \(file) 2>/dev/null && break; sleep 0.05; done"
    }
}
