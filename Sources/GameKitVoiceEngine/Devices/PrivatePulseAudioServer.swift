import Foundation

/// A PulseAudio server of one's own, headless, for tests, benchmarks and demos on machines with
/// no sound card: `pulseaudio` (Debian's package) started with no configuration file, listening
/// only on a Unix socket in a fresh directory, with null sinks loaded by name. It is stopped by
/// `stop()` or when the object goes away.
///
/// Null sinks run at 16 kHz mono, so no resampling happens between them and the engine.
public final class PrivatePulseAudioServer: @unchecked Sendable {
    /// The server address to give `PulseAudioDevice` (`unix:/…/native`).
    public let address: String
    /// The directory holding the socket and the server's state.
    public let directory: String
    private let process: ChildProgram

    /// Starts a server with a null sink for each name in `nullSinks` (each also gives a source
    /// `NAME.monitor`), plus `extraModules` (each a `pactl load-module` argument string).
    public init(nullSinks: [String], extraModules: [String] = [], startTimeoutSeconds: Double = 10) throws(VoiceEngineError) {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-pulse-\(UUID().uuidString.prefix(8))").path
        do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
            throw .device("cannot create \(directory): \(error)")
        }
        let socket = "\(directory)/native"
        address = "unix:\(socket)"
        var arguments = [
            "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--disable-shm=yes",
            "--log-target=file:\(directory)/log", "-L", "module-native-protocol-unix socket=\(socket) auth-anonymous=1",
        ]
        for sink in nullSinks {
            arguments += ["-L", "module-null-sink sink_name=\(sink) rate=\(VoiceFormat.sampleRate) channels=1"]
        }
        for module in extraModules { arguments += ["-L", module] }
        do {
            process = try ChildProgram(
                "/usr/bin/pulseaudio", arguments,
                environment: ["HOME": directory, "XDG_RUNTIME_DIR": directory, "XDG_CONFIG_HOME": directory])
        } catch {
            throw .device("cannot start pulseaudio (install Debian's pulseaudio): \(error)")
        }
        let deadline = Date().addingTimeInterval(startTimeoutSeconds)
        while Date() < deadline {
            if !process.isRunning { break }
            if FileManager.default.fileExists(atPath: socket), (try? PulseAudioDevice(.playback, device: nullSinks.first, server: address)).map({ $0.close(); return true }) == true {
                return
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        stop()
        let log = (try? String(contentsOfFile: "\(directory)/log", encoding: .utf8)) ?? ""
        throw .device("pulseaudio did not come up: \(log.suffix(400))")
    }

    /// Starts a PulseAudio command-line tool (`pactl`, `paplay`, `parecord`) against this server.
    public func launch(_ tool: String, _ arguments: [String]) throws(VoiceEngineError) -> ChildProgram {
        try ChildProgram("/usr/bin/\(tool)", arguments, environment: ["PULSE_SERVER": address, "HOME": directory, "XDG_RUNTIME_DIR": directory])
    }

    /// Stops the server and removes its directory.
    public func stop() {
        process.signal(SIGTERM)
        process.wait(seconds: 5)
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}

/// A child program started with posix_spawn, with every signal unblocked and at its default.
///
/// Not Foundation's `Process`: a child inherits the signal mask of the thread that spawns it
/// (Dispatch's and test runners' threads block nearly every signal, so a pulseaudio or parecord
/// would ignore the SIGTERM or SIGINT that stops it), and `Process` reaps children through a
/// SIGCHLD those same threads block. Here the mask is set for the child and `wait` reaps it.
public final class ChildProgram: @unchecked Sendable {
    /// The child's process ID.
    public let pid: pid_t
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `path` with `arguments`, adding `environment` to this process's environment;
    /// standard output and error go to /dev/null.
    public init(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws(VoiceEngineError) {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var merged = ProcessInfo.processInfo.environment
        merged.merge(environment) { $1 }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw .device("cannot start \(path): \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    /// Whether the child is still running (reaps it if it has ended).
    public var isRunning: Bool {
        lock.withLock {
            guard status == nil else { return false }
            var value: Int32 = 0
            if waitpid(pid, &value, WNOHANG) == pid { status = value }
            return status == nil
        }
    }

    /// Sends `signal`.
    public func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits up to `seconds` for the child to end; kills it (SIGKILL) if it has not by then.
    /// Returns whether it ended by itself.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning {
            if Date() >= deadline {
                kill(pid, SIGKILL)
                lock.withLock {
                    var value: Int32 = 0
                    waitpid(pid, &value, 0)
                    status = value
                }
                return false
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return true
    }
}
