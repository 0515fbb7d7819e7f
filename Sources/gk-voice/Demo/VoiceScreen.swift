import Foundation
import OpenGameKit

/// What the voice screen shows.
struct VoiceStatus {
    var title = ""
    var status = ""
    var path = ""
    var inputLevel: Float = -100
    var outputLevel: Float = -100
    var peerName = "Peer"
    var muted = false
    var volume: Float = 1
}

/// The demo's screen during a chat: status, live meters, the keys. Full screen on a terminal,
/// a line a second otherwise. Keys (or lines, without a terminal): m, +, -, q.
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
        let output = String(format: "%4.0f dB", s.outputLevel)
        guard self.interactive else {
            // One line a second, and whenever the status text changes.
            guard Date().timeIntervalSince(self.lastLine) >= 1 else { return }
            self.lastLine = Date()
            TerminalScreen.shared.write("voice: \(s.status) · path \(s.path) · you \(input) · \(s.peerName) \(output) · volume \(Int(s.volume * 100))%\n")
            return
        }
        let (_, columns) = TerminalScreen.shared.size
        let width = max(10, min(40, columns - 24))
        var out = "\u{1B}[H\u{1B}[2J\u{1B}[1m \(s.title)\u{1B}[0m"
        out += "\u{1B}[3;2H\(s.status)"
        out += "\u{1B}[4;2H\u{1B}[2mpath: \(s.path)\u{1B}[0m"
        out += "\u{1B}[6;2H" + "You".padding(toLength: 10, withPad: " ", startingAt: 0) + " " + (s.muted ? String(repeating: " ", count: width) : Self.bar(s.inputLevel, width: width)) + " \(input)"
        out += "\u{1B}[7;2H" + String(s.peerName.prefix(10)).padding(toLength: 10, withPad: " ", startingAt: 0) + " " + Self.bar(s.outputLevel, width: width) + " \(output)"
        out += "\u{1B}[9;2HMicrophone \(s.muted ? "muted" : "on") · volume \(Int((s.volume * 100).rounded()))%"
        out += "\u{1B}[11;2H\u{1B}[2mm mute · + / - volume · q hang up · Ctrl-C quit\u{1B}[0m\u{1B}[?25l"
        TerminalScreen.shared.write(out)
    }

    /// Forces the next plain line (a status change).
    func announce() { self.lastLine = .distantPast }
}
