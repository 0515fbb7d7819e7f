import Foundation
import OpenGameKit

/// The chat's screen: a log of "Name: text" and system lines, and an input line.
@MainActor
class ChatScreen {
    /// A line the user entered.
    var onLine: ((String) -> Void)?
    /// Ctrl-C, Ctrl-D or end of input.
    var onQuit: (() -> Void)?

    /// The full-screen version on a terminal, plain lines otherwise.
    static func make(title: String) -> ChatScreen {
        TerminalScreen.isInteractive ? TerminalChatScreen(title: title) : LineChatScreen()
    }

    func open() {}
    func close() {}
    func message(from name: String, _ text: String) { self.append("\(name): \(text)") }
    func system(_ text: String) { self.append("* \(text)") }
    func append(_ line: String) {}
}

/// Plain lines on standard output; each input line is a message or a command.
@MainActor
final class LineChatScreen: ChatScreen {
    private var lines = InputLines()
    private var isOpen = false

    override func open() {
        self.isOpen = true
        StandardInput.shared.listen { [weak self] chunk in self?.input(chunk) }
    }

    override func close() {
        guard self.isOpen else { return }
        self.isOpen = false
        StandardInput.shared.listen(nil)
    }

    override func append(_ line: String) {
        TerminalScreen.shared.write("chat: \(line)\n")
    }

    private func input(_ chunk: StandardInput.Chunk) {
        guard case .bytes(let bytes) = chunk else { return self.onQuit?() ?? () }
        for line in self.lines.lines(from: bytes) where self.isOpen {
            self.onLine?(line)
        }
    }
}

/// Full screen: the log scrolls above a separator with the keys, the input line is at the bottom.
@MainActor
final class TerminalChatScreen: ChatScreen {
    private static let logLimit = 1_000

    private let title: String
    private var log: [String] = []
    private var typing = ""
    private var decoder = TerminalKeyDecoder()
    private var resizes: DispatchSourceSignal?
    private var isOpen = false

    init(title: String) { self.title = title }

    override func open() {
        self.isOpen = true
        TerminalScreen.shared.enter()
        StandardInput.shared.listen { [weak self] chunk in self?.input(chunk) }
        self.resizes = TerminalResize.watch { [weak self] in self?.draw() }
        self.draw()
    }

    override func close() {
        guard self.isOpen else { return }
        self.isOpen = false
        self.resizes?.cancel()
        self.resizes = nil
        StandardInput.shared.listen(nil)
        TerminalScreen.shared.leave()
    }

    override func append(_ line: String) {
        self.log.append(line)
        if self.log.count > Self.logLimit { self.log.removeFirst(self.log.count - Self.logLimit) }
        self.draw()
    }

    private func input(_ chunk: StandardInput.Chunk) {
        guard case .bytes(let bytes) = chunk else { return self.onQuit?() ?? () }
        for key in self.decoder.keys(from: bytes) {
            guard self.isOpen else { return }
            switch key {
            case .character(let character):
                self.typing.append(character)
            case .backspace:
                if !self.typing.isEmpty { self.typing.removeLast() }
            case .enter:
                let line = self.typing
                self.typing = ""
                self.draw()
                self.onLine?(line)
                continue
            case .interrupt, .endOfFile:
                self.onQuit?()
                return
            default:
                continue
            }
            self.draw()
        }
    }

    private func draw() {
        guard self.isOpen else { return }
        let (rows, columns) = TerminalScreen.shared.size
        func fit(_ text: String) -> String { String(text.prefix(max(columns - 1, 1))) }
        // The log, wrapped to the width, newest at the bottom.
        var wrapped: [String] = []
        for line in self.log {
            var rest = Substring(line)
            repeat {
                wrapped.append(String(rest.prefix(max(columns - 1, 1))))
                rest = rest.dropFirst(max(columns - 1, 1))
            } while !rest.isEmpty
        }
        let logRows = max(rows - 3, 1)
        var output = "\u{1B}[H\u{1B}[2J\u{1B}[1m" + fit(" \(self.title)") + "\u{1B}[0m"
        for (index, line) in wrapped.suffix(logRows).enumerated() {
            output += "\u{1B}[\(index + 2);1H" + line
        }
        output += "\u{1B}[\(rows - 1);1H\u{1B}[2m" + fit(String(repeating: "─", count: 2) + " Enter sends · /leave returns to the picker · /quit or Ctrl-C quits ") + "\u{1B}[0m"
        let prompt = "> "
        let visible = String(self.typing.suffix(max(columns - prompt.count - 1, 1)))
        output += "\u{1B}[\(rows);1H" + prompt + visible + "\u{1B}[?25h"
        TerminalScreen.shared.write(output)
    }
}
