import Foundation
import NIOConcurrencyHelpers

/// The process's standard input, read by one thread for the life of the process and handed,
/// chunk by chunk on the main queue, to whoever listens now (the picker, then a chat screen…).
/// One reader for everyone means no byte is lost between two screens.
public final class StandardInput: @unchecked Sendable {
    /// What a listener receives.
    public enum Chunk: Sendable {
        case bytes([UInt8])
        case endOfInput
    }

    public static let shared = StandardInput()

    private let lock = NIOLock()
    private var listener: (@MainActor (Chunk) -> Void)?
    private var started = false
    /// What arrived while nobody listened, for the next listener.
    private var held: [Chunk] = []
    /// Counts `listen` calls, to notice a hand-over in the middle of a delivery.
    private var generation: UInt64 = 0
    /// Input has ended and a listener was told: every later listener is told too (the end of
    /// input is a state, not an event one screen may swallow).
    private var ended = false

    private init() {}

    /// Makes `listener` the one that receives input from now on (nil: input is held, in the
    /// order it came, for the next listener). After the end of input, a new listener hears it
    /// at once.
    public func listen(_ listener: (@MainActor (Chunk) -> Void)?) {
        let start = self.lock.withLock { () -> Bool in
            self.listener = listener
            self.generation &+= 1
            if listener != nil, self.ended, !self.held.contains(where: { if case .endOfInput = $0 { true } else { false } }) {
                self.held.append(.endOfInput)
            }
            defer { self.started = true }
            return !self.started
        }
        if start {
            let thread = Thread { self.readUntilEnd() }
            thread.name = "OpenGameKit standard input"
            thread.start()
        }
        if listener != nil {
            // What nobody heard goes to the new listener first.
            DispatchQueue.main.async { MainActor.assumeIsolated { self.deliver(nil) } }
        }
    }

    /// Hands `chunk` (after anything held) to the listener of the moment, or holds it.
    @MainActor
    private func deliver(_ chunk: Chunk?) {
        let (listener, generation, chunks) = self.lock.withLock { () -> ((@MainActor (Chunk) -> Void)?, UInt64, [Chunk]) in
            var chunks = self.held
            if let chunk { chunks.append(chunk) }
            self.held = []
            guard let listener = self.listener else {
                self.held = chunks
                return (nil, self.generation, [])
            }
            return (listener, self.generation, chunks)
        }
        guard let listener else { return }
        for (index, chunk) in chunks.enumerated() {
            if case .endOfInput = chunk { self.lock.withLock { self.ended = true } }
            listener(chunk)
            // The listener handed over (the picker to the chat screen): the rest is held for the
            // next one, whose own delivery is already queued.
            let handedOver = self.lock.withLock { () -> Bool in
                guard self.generation != generation else { return false }
                self.held = Array(chunks[(index + 1)...]) + self.held
                return true
            }
            if handedOver { return }
        }
    }

    private func readUntilEnd() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            let chunk: Chunk = count > 0 ? .bytes(Array(buffer[..<count])) : .endOfInput
            DispatchQueue.main.async { MainActor.assumeIsolated { self.deliver(chunk) } }
            if count <= 0 { return }
        }
    }
}

/// A key from a terminal in raw mode.
public enum TerminalKey: Hashable, Sendable {
    case up, down, left, right
    case enter, escape, backspace, tab
    /// Ctrl-C and Ctrl-D.
    case interrupt, endOfFile
    case character(Character)
}

/// Turns raw terminal bytes into keys: arrow sequences (`ESC [ A`, `ESC O A`…), Enter (CR or
/// LF), Backspace (DEL or BS), Esc alone (an ESC that ends its chunk), UTF-8 text. Unknown escape
/// sequences are skipped whole.
public struct TerminalKeyDecoder: Sendable {
    private var pending: [UInt8] = []

    public init() {}

    public mutating func keys(from bytes: [UInt8]) -> [TerminalKey] {
        let input = self.pending + bytes
        self.pending = []
        var keys: [TerminalKey] = []
        var index = 0
        while index < input.count {
            let byte = input[index]
            switch byte {
            case 0x1B:
                guard index + 1 < input.count else {
                    keys.append(.escape)
                    index += 1
                    continue
                }
                let next = input[index + 1]
                guard next == UInt8(ascii: "[") || next == UInt8(ascii: "O") else {
                    keys.append(.escape)
                    index += 1
                    continue
                }
                // A CSI or SS3 sequence: parameters, then a final byte in 0x40...0x7E.
                var end = index + 2
                while end < input.count, !(0x40...0x7E).contains(input[end]) { end += 1 }
                guard end < input.count else {
                    self.pending = Array(input[index...])  // the rest comes in the next chunk
                    return keys
                }
                switch input[end] {
                case UInt8(ascii: "A"): keys.append(.up)
                case UInt8(ascii: "B"): keys.append(.down)
                case UInt8(ascii: "C"): keys.append(.right)
                case UInt8(ascii: "D"): keys.append(.left)
                default: break
                }
                index = end + 1
            case 0x0D, 0x0A:
                keys.append(.enter)
                // CR LF is one Enter.
                index += byte == 0x0D && index + 1 < input.count && input[index + 1] == 0x0A ? 2 : 1
            case 0x7F, 0x08:
                keys.append(.backspace)
                index += 1
            case 0x09:
                keys.append(.tab)
                index += 1
            case 0x03:
                keys.append(.interrupt)
                index += 1
            case 0x04:
                keys.append(.endOfFile)
                index += 1
            case 0x00..<0x20:
                index += 1
            default:
                let length = byte < 0xC0 ? 1 : byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4
                guard index + length <= input.count else {
                    self.pending = Array(input[index...])
                    return keys
                }
                if let text = String(validating: input[index..<index + length], as: UTF8.self), let character = text.first {
                    keys.append(.character(character))
                }
                index += length
            }
        }
        return keys
    }
}

/// Cuts standard input into lines for the line-mode screens: bytes in, complete lines out
/// (trimmed), the unfinished rest kept for the next chunk.
public struct InputLines: Sendable {
    private var partial: [UInt8] = []

    public init() {}

    public mutating func lines(from bytes: [UInt8]) -> [String] {
        self.partial += bytes
        var lines: [String] = []
        while let newline = self.partial.firstIndex(of: UInt8(ascii: "\n")) {
            lines.append(String(decoding: self.partial[..<newline], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
            self.partial.removeSubrange(...newline)
        }
        return lines
    }
}

