import Foundation

/// A child process whose standard output is collected as it arrives, so that the parent can wait
/// for a line ("ready") and read the final JSON line. Every wait has a deadline; `terminate()`
/// stops a process that overstays.
///
/// With `input: true` the child reads a pipe that `closeInput()` closes, for programs that stop
/// at end of input (the discovery peers withdraw their service then). With `captureErrors: true`
/// its standard error is kept (`errorTail`) instead of going to ours.
final class ChildProcess: @unchecked Sendable {
    private let process = Process()
    private let output = Pipe()
    private let input: Pipe?
    private let errors: Pipe?
    private let lock = NSLock()
    private var collected = Data()
    private var collectedErrors = Data()
    let name: String

    init(_ executable: String, _ arguments: [String], name: String, input: Bool = false, captureErrors: Bool = false) {
        self.name = name
        self.input = input ? Pipe() : nil
        self.errors = captureErrors ? Pipe() : nil
        self.process.executableURL = URL(fileURLWithPath: executable)
        self.process.arguments = arguments
        self.process.standardOutput = self.output
        if let pipe = self.input { self.process.standardInput = pipe }
        if let pipe = self.errors { self.process.standardError = pipe }
        self.output.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.lock()
            self.collected.append(data)
            self.lock.unlock()
        }
        self.errors?.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.lock()
            self.collectedErrors.append(data)
            self.lock.unlock()
        }
    }

    func start() throws {
        try self.process.run()
    }

    /// The exit status (once exited).
    var exitStatus: Int32 { self.process.terminationStatus }

    /// The child's process ID (once started).
    var processIdentifier: Int32 { self.process.processIdentifier }

    /// Sends `signal` to the child.
    func send(_ signal: Int32) {
        kill(self.process.processIdentifier, signal)
    }

    /// Closes the child's standard input (it sees end of file); only with `input: true`.
    func closeInput() {
        try? self.input?.fileHandleForWriting.close()
    }

    /// The last line the child wrote on standard error (with `captureErrors: true`).
    var errorTail: String? {
        self.lock.lock()
        defer { self.lock.unlock() }
        return String(decoding: self.collectedErrors, as: UTF8.self).split(separator: "\n").last.map(String.init)
    }

    /// The lines printed so far that parse as JSON objects, in order.
    var objects: [[String: Any]] {
        self.lines.compactMap { line in
            guard line.hasPrefix("{"), let data = line.data(using: .utf8) else { return nil }
            return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        }
    }

    /// Waits until the child has printed a JSON object that `matches`, and returns the first such
    /// object; nil on timeout or if the child exits without printing one.
    func waitForObject(timeout: Double, where matches: ([String: Any]) -> Bool) -> [String: Any]? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let object = self.objects.first(where: matches) { return object }
            if !self.process.isRunning {
                // Let the last output arrive.
                Thread.sleep(forTimeInterval: 0.05)
                return self.objects.first(where: matches)
            }
            if Date() >= deadline { return nil }
            Thread.sleep(forTimeInterval: 0.005)
        }
    }

    var lines: [String] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return String(decoding: self.collected, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Waits until a line equal to `line` was printed; false on timeout or exit.
    func waitForLine(_ line: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if self.lines.contains(line) { return true }
            if !self.process.isRunning { return self.lines.contains(line) }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return false
    }

    /// Waits for the process to exit; false on timeout.
    func waitForExit(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while self.process.isRunning {
            if Date() >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        // Let the last output arrive.
        Thread.sleep(forTimeInterval: 0.05)
        return true
    }

    func terminate() {
        if self.process.isRunning { self.process.terminate() }
        _ = self.waitForExit(timeout: 2)
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
    }

    /// The last line of output that parses as a JSON object.
    var lastJSONObject: [String: Any]? {
        for line in self.lines.reversed() {
            if let data = line.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
                return object
            }
        }
        return nil
    }
}

/// Where the project's scripts and anchor programs are: found by walking up from the executable.
enum ProjectLayout {
    static var root: URL? {
        var directory = URL(fileURLWithPath: Self.executable).deletingLastPathComponent()
        for _ in 0..<8 {
            if FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("scripts/sandbox").path) {
                return directory
            }
            directory.deleteLastPathComponent()
        }
        let current = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        return FileManager.default.isExecutableFile(atPath: current.appendingPathComponent("scripts/sandbox").path) ? current : nil
    }

    /// This program's own path (from /proc on Linux, so that a PATH lookup does not matter).
    static var executable: String {
        let proc = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        if proc.path != "/proc/self/exe", FileManager.default.isExecutableFile(atPath: proc.path) {
            return proc.path
        }
        return URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
    }
}
