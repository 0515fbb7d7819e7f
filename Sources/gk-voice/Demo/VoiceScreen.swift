import Foundation
import OpenGameKit

/// What the voice screen shows.
struct VoiceStatus {
    /// One participant's line: name, level, and a mark ("speaking", "active").
    struct Meter: Equatable {
        var name: String
        var level: Float
        var mark = ""
    }

    var title = ""
    var status = ""
    /// The media path (two-party calls); nil hides the line.
    var path: String?
    var inputLevel: Float = -100
    var muted = false
    /// The far side's volume (two-party calls); nil hides it.
    var volume: Float?
    /// The others, one line each.
    var meters: [Meter] = []
    /// The keys line.
    var help = "m mute · + / - volume · q hang up · Ctrl-C quit"
}

/// The demo's screen during a chat (`gk-voice demo`, `gk-voice group`): status, live meters, the
/// keys. Full screen on a terminal, a line a second otherwise. Keys (or lines, without a
/// terminal) are the caller's; end of input and Ctrl-C quit.
@MainActor
final class VoiceScreen {
    var onKey: ((Character) -> Void)?
    var onQuit: (() -> Void)?
    var status = VoiceStatus() { didSet { self.draw() } }

    private let interactive = TerminalScreen.isInteractive
    private var decoder = TerminalKeyDecoder()
    private var lines = InputLines()
    private var resizes: DispatchSourceSignal?
    private var isOpen = false
    private var lastLine = Date.distantPast

    func open() {
        self.isOpen = true
        if self.interactive {
            TerminalScreen.shared.enter()
            self.resizes = TerminalResize.watch { [weak self] in self?.draw() }
        }
        StandardInput.shared.listen { [weak self] chunk in self?.input(chunk) }
        self.draw()
    }

    func close() {
        guard self.isOpen else { return }
        self.isOpen = false
        self.resizes?.cancel()
        self.resizes = nil
        StandardInput.shared.listen(nil)
        if self.interactive { TerminalScreen.shared.leave() }
    }

    private func input(_ chunk: StandardInput.Chunk) {
        guard case .bytes(let bytes) = chunk else { return self.onQuit?() ?? () }
        if self.interactive {
            for key in self.decoder.keys(from: bytes) {
                switch key {
                case .character(let character): self.onKey?(character)
                case .interrupt, .endOfFile: return self.onQuit?() ?? ()
                default: break
                }
            }
        } else {
            for line in self.lines.lines(from: bytes) {
                if let character = line.trimmingCharacters(in: .whitespaces).first { self.onKey?(character) }
            }
        }
    }

    /// A meter bar for a level in dB (−60 … 0).
    static func bar(_ level: Float, width: Int) -> String {
        let filled = Int((max(0, min(60, level + 60)) / 60 * Float(width)).rounded())
        return String(repeating: "█", count: filled) + String(repeating: "·", count: max(0, width - filled))
    }

    private func draw() {
        guard self.isOpen else { return }
        let s = self.status
        let input = s.muted ? "muted" : String(format: "%4.0f dB", s.inputLevel)
        let level = { (value: Float) in String(format: "%4.0f dB", value) }
        guard self.interactive else {
            // One line a second, and whenever the status text changes.
            guard Date().timeIntervalSince(self.lastLine) >= 1 else { return }
            self.lastLine = Date()
            var line = "voice: \(s.status)"
            if let path = s.path { line += " · path \(path)" }
            line += " · you \(input)"
            for meter in s.meters { line += " · \(meter.name) \(level(meter.level))\(meter.mark.isEmpty ? "" : " \(meter.mark)")" }
            if let volume = s.volume { line += " · volume \(Int(volume * 100))%" }
            TerminalScreen.shared.write(line + "\n")
            return
        }
        let (rows, columns) = TerminalScreen.shared.size
        let width = max(10, min(40, columns - 34))
        let name = { (text: String) in String(text.prefix(10)).padding(toLength: 10, withPad: " ", startingAt: 0) }
        var out = "\u{1B}[H\u{1B}[2J\u{1B}[1m \(s.title)\u{1B}[0m"
        out += "\u{1B}[3;2H\(s.status)"
        if let path = s.path { out += "\u{1B}[4;2H\u{1B}[2mpath: \(path)\u{1B}[0m" }
        out += "\u{1B}[6;2H" + name("You") + " " + (s.muted ? String(repeating: " ", count: width) : Self.bar(s.inputLevel, width: width)) + " \(input)"
        // As many participants as the terminal has room for.
        let shown = s.meters.prefix(max(1, rows - 11))
        for (index, meter) in shown.enumerated() {
            out += "\u{1B}[\(7 + index);2H" + name(meter.name) + " " + Self.bar(meter.level, width: width) + " \(level(meter.level)) \(meter.mark)"
        }
        let below = 8 + shown.count
        var settings = "Microphone \(s.muted ? "muted" : "on")"
        if let volume = s.volume { settings += " · volume \(Int((volume * 100).rounded()))%" }
        out += "\u{1B}[\(below);2H\(settings)"
        out += "\u{1B}[\(below + 2);2H\u{1B}[2m\(s.help)\u{1B}[0m\u{1B}[?25l"
        TerminalScreen.shared.write(out)
    }

    /// Forces the next plain line (a status change).
    func announce() { self.lastLine = .distantPast }
}
