import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// What a signal handler needs to put the terminal back, kept where it can reach it without
// locks or allocation.
nonisolated(unsafe) private var savedAttributes = termios()
nonisolated(unsafe) private var terminalIsRaw: sig_atomic_t = 0
/// Leave the alternate screen, show the cursor, reset colours.
private let leaveSequence: [UInt8] = Array("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l".utf8)

/// Puts the terminal back as it was: cooked mode, main screen, cursor shown. Safe in a signal
/// handler (only `tcsetattr` and `write`).
func restoreTerminalNow() {
    guard terminalIsRaw != 0 else { return }
    terminalIsRaw = 0
    _ = tcsetattr(STDIN_FILENO, TCSANOW, &savedAttributes)
    leaveSequence.withUnsafeBytes { _ = write(STDOUT_FILENO, $0.baseAddress, $0.count) }
}

/// The signals after which the terminal must not stay raw: the polite ones, and the crashes.
private let restoringSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT]

/// The process's terminal: raw input on the alternate screen, and its restoration on every way
/// out (leaving normally, `exit`, a signal, a crash).
///
/// `enter()`/`leave()` nest: the picker and a chat screen can both ask for it, and the terminal
/// goes back to cooked mode when the last one leaves. Output keeps `OPOST`, so "\n" still moves to
/// the start of the next line.
public final class TerminalScreen: @unchecked Sendable {
    /// The one terminal of the process.
    public static let shared = TerminalScreen()

    /// Whether standard input and output are both a terminal.
    public static var isInteractive: Bool { isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1 }

    private let lock = NIOLock()
    private var depth = 0
    private var handlersInstalled = false

    private init() {}

    /// Raw mode (no echo, no line editing, Ctrl-C as a key), alternate screen, cursor hidden.
    public func enter() {
        self.lock.withLock {
            self.depth += 1
            guard self.depth == 1, Self.isInteractive else { return }
            self.installHandlersLocked()
            var attributes = termios()
            guard tcgetattr(STDIN_FILENO, &attributes) == 0 else { return }
            savedAttributes = attributes
            attributes.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
            attributes.c_iflag &= ~tcflag_t(IXON | ICRNL | BRKINT | INPCK | ISTRIP)
            withUnsafeMutableBytes(of: &attributes.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            terminalIsRaw = 1
            _ = tcsetattr(STDIN_FILENO, TCSANOW, &attributes)
            self.writeLocked("\u{1B}[?1049h\u{1B}[?25l")
        }
    }

    /// Undoes one `enter()`; the last one restores the terminal.
    public func leave() {
        self.lock.withLock {
            guard self.depth > 0 else { return }
            self.depth -= 1
            if self.depth == 0 { restoreTerminalNow() }
        }
    }

    /// Rows and columns (24×80 when unknown).
    public var size: (rows: Int, columns: Int) {
        var window = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &window) == 0, window.ws_row > 0, window.ws_col > 0 else { return (24, 80) }
        return (Int(window.ws_row), Int(window.ws_col))
    }

    /// Writes text to standard output at once.
    public func write(_ text: String) {
        self.lock.withLock { self.writeLocked(text) }
    }

    private func writeLocked(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { systemWrite(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }

    private func installHandlersLocked() {
        guard !self.handlersInstalled else { return }
        self.handlersInstalled = true
        atexit { restoreTerminalNow() }
        // A program that handles the polite signals itself (to say goodbye first) restores the
        // terminal on its way out; a handler here would end it before its goodbyes.
        let polite = TerminationSignals.areHandled ? TerminationSignals.polite : []
        for signalNumber in restoringSignals where !polite.contains(signalNumber) {
            signal(signalNumber) { received in
                restoreTerminalNow()
                signal(received, SIG_DFL)
                raise(received)
            }
        }
    }
}

/// `write(2)`, under a name that `TerminalScreen.write` does not shadow.
private func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
