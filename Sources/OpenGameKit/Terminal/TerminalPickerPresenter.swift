import Foundation

/// The picker as a full-screen terminal interface: raw mode on the alternate screen, a live list
/// with the highlighted row in reverse video, a spinner while searching or waiting, a clean redraw
/// when the window is resized; ↑/↓ or j/k, Enter, Esc or q, a/d for invitations, r to retry;
/// while a room code is typed, keys are text (Backspace erases, Enter joins, Esc goes back).
/// The terminal is restored when the picker is dismissed, and on exit, Ctrl-C or a crash.
@MainActor
public final class TerminalPickerPresenter: GKPeerPickerPresenter {
    private static let spinner: [Character] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

    private var screen = GKPeerPickerScreen(phase: .finished)
    private var actions: (@MainActor (GKPeerPickerAction) -> Void)?
    private var decoder = TerminalKeyDecoder()
    private var ticker: DispatchSourceTimer?
    private var resizes: DispatchSourceSignal?
    private var frame = 0
    private let gate = PickerInputGate<TerminalKey> { key, screen in
        TerminalPickerPresenter.action(for: key, in: screen.phase).map { [$0] } ?? []
    }

    public init() {}

    public func present(_ screen: GKPeerPickerScreen, actions: @escaping @MainActor (GKPeerPickerAction) -> Void) {
        self.screen = screen
        self.actions = actions
        self.gate.reset()
        TerminalScreen.shared.enter()
        StandardInput.shared.listen { [weak self] chunk in self?.input(chunk) }
        let ticker = DispatchSource.makeTimerSource(queue: .main)
        ticker.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(100))
        ticker.setEventHandler { [weak self] in
            MainActor.assumeIsolated {
                guard let self else { return }
                self.frame += 1
                if self.isBusy { self.draw() }
            }
        }
        ticker.resume()
        self.ticker = ticker
        self.resizes = TerminalResize.watch { [weak self] in self?.draw() }
        self.draw()
    }

    public func update(_ screen: GKPeerPickerScreen) {
        self.screen = screen
        self.draw()
        self.gate.screenShown(screen: { self.screen }, perform: self.perform)
    }

    public func dismiss() {
        guard self.actions != nil else { return }
        self.actions = nil
        self.gate.reset()
        self.ticker?.cancel()
        self.ticker = nil
        self.resizes?.cancel()
        self.resizes = nil
        StandardInput.shared.listen(nil)
        TerminalScreen.shared.leave()
    }

    private var isBusy: Bool {
        switch self.screen.phase {
        case .searching, .inviting, .accepting: true
        default: false
        }
    }

    private func input(_ chunk: StandardInput.Chunk) {
        guard let actions = self.actions else { return }
        guard case .bytes(let bytes) = chunk else { return actions(.close) }
        self.gate.feed(self.decoder.keys(from: bytes), screen: { self.screen }, perform: self.perform)
    }

    /// Passes an action on; false once the picker is gone (dismissed by an earlier action).
    private func perform(_ action: GKPeerPickerAction) -> Bool {
        guard let actions = self.actions else { return false }
        actions(action)
        return true
    }

    /// The picker's keys in `phase`: commands, or text while a room code is typed.
    nonisolated static func action(for key: TerminalKey, in phase: GKPeerPickerPhase = .searching) -> GKPeerPickerAction? {
        if case .enteringCode = phase {
            switch key {
            case .character(let character): return .type(String(character))
            case .backspace: return .erase
            case .enter: return .choose
            case .escape: return .cancel
            case .interrupt, .endOfFile: return .close
            default: return nil
            }
        }
        return switch key {
        case .up, .character("k"): .moveUp
        case .down, .character("j"), .tab: .moveDown
        case .enter, .character("r"), .character("R"): .choose
        case .escape, .character("q"), .character("Q"): .cancel
        case .interrupt, .endOfFile: .close
        case .character("a"), .character("A"): .accept
        case .character("d"), .character("D"): .decline
        default: nil
        }
    }

    private func draw() {
        guard self.actions != nil else { return }
        let (rows, columns) = TerminalScreen.shared.size
        func fit(_ text: String) -> String { String(text.prefix(max(columns - 1, 1))) }
        var lines: [String] = []
        lines.append("\u{1B}[1m" + fit(" OpenGameKit — peer picker") + "\u{1B}[0m")
        lines.append("")
        let spin = self.isBusy ? "\(Self.spinner[self.frame % Self.spinner.count]) " : ""
        lines.append(fit(" \(spin)\(PeerPickerText.status(of: self.screen))"))
        lines.append("")
        let list = PeerPickerText.rows(of: self.screen)
        let listShown: Bool
        switch self.screen.phase {
        case .choosingConnectionType, .choosingRoom, .searching: listShown = true
        default: listShown = false
        }
        if listShown {
            // As many rows as fit, scrolled to keep the highlighted one in view.
            let room = max(rows - 8, 1)
            let first = max(0, min(self.screen.selection - room + 1, list.count - room))
            for (index, row) in list.enumerated().dropFirst(first).prefix(room) {
                let text = fit("   \(row)")
                lines.append(index == self.screen.selection ? "\u{1B}[7m" + text + "\u{1B}[0m" : text)
            }
        }
        if let notice = PeerPickerText.notice(of: self.screen) {
            lines.append("")
            lines.append("\u{1B}[33m" + fit(" \(notice)") + "\u{1B}[0m")
        }
        var output = "\u{1B}[H\u{1B}[2J" + lines.prefix(max(rows - 1, 1)).joined(separator: "\r\n")
        output += "\u{1B}[\(rows);1H\u{1B}[2m" + fit(" \(PeerPickerText.help(of: self.screen))") + "\u{1B}[0m"
        TerminalScreen.shared.write(output)
    }
}

/// Window-size changes (SIGWINCH), delivered on the main queue; cancel the source to stop.
public enum TerminalResize {
    @MainActor
    public static func watch(_ handler: @escaping @MainActor () -> Void) -> DispatchSourceSignal {
        signal(SIGWINCH, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .main)
        source.setEventHandler { MainActor.assumeIsolated { handler() } }
        source.resume()
        return source
    }
}
