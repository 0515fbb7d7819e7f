import Foundation

/// The picker in plain lines, for when standard input or output is not a terminal (a pipe, a
/// test, a log): every change of status, list or notice is printed as a `picker:` line, and each
/// input line is a command — a peer's number to invite it (an empty line invites the first),
/// `a`/`d` to accept or decline, `c` or `q` to cancel, `r` to retry; online, `1` creates a room and
/// `2` asks for a code, and the next line is the code. End of input closes the picker whatever it
/// shows.
@MainActor
public final class LinePickerPresenter: GKPeerPickerPresenter {
    private var screen = GKPeerPickerScreen(phase: .finished)
    private var actions: (@MainActor (GKPeerPickerAction) -> Void)?
    private var lines = InputLines()
    private var printed: (status: String, rows: [String], notice: String?) = ("", [], nil)
    private let gate = PickerInputGate<String> { line, screen in LinePickerPresenter.actions(for: line, on: screen) }

    public init() {}

    public func present(_ screen: GKPeerPickerScreen, actions: @escaping @MainActor (GKPeerPickerAction) -> Void) {
        self.actions = actions
        self.gate.reset()
        self.printed = ("", [], nil)
        StandardInput.shared.listen { [weak self] chunk in self?.input(chunk) }
        self.update(screen)
    }

    public func update(_ screen: GKPeerPickerScreen) {
        self.screen = screen
        guard self.actions != nil else { return }
        var out = ""
        let status = PeerPickerText.status(of: screen)
        if status != self.printed.status { out += "picker: \(status)\n" }
        let rows = PeerPickerText.rows(of: screen)
        if rows != self.printed.rows {
            out += "picker: list: " + (rows.isEmpty ? "(none)" : rows.enumerated().map { "\($0.offset + 1)) \($0.element)" }.joined(separator: ", ")) + "\n"
        }
        let notice = PeerPickerText.notice(of: screen)
        if let notice, notice != self.printed.notice { out += "picker: \(notice)\n" }
        self.printed = (status, rows, notice)
        if !out.isEmpty { TerminalScreen.shared.write(out) }
        self.gate.screenShown(screen: { self.screen }, perform: self.perform)
    }

    public func dismiss() {
        guard self.actions != nil else { return }
        self.actions = nil
        self.gate.reset()
        StandardInput.shared.listen(nil)
    }

    private func input(_ chunk: StandardInput.Chunk) {
        guard case .bytes(let bytes) = chunk else {
            self.actions?(.close)
            return
        }
        self.gate.feed(self.lines.lines(from: bytes), screen: { self.screen }, perform: self.perform)
    }

    /// Passes an action on; false once the picker is gone (dismissed by an earlier action).
    private func perform(_ action: GKPeerPickerAction) -> Bool {
        guard let actions = self.actions else { return false }
        actions(action)
        return true
    }

    /// What one input line means on `screen`.
    nonisolated static func actions(for line: String, on screen: GKPeerPickerScreen = GKPeerPickerScreen(phase: .searching)) -> [GKPeerPickerAction] {
        switch screen.phase {
        case .enteringCode(let typed):
            // The line is the code; `c` or `q` alone goes back (a code has twelve characters).
            if ["c", "q", "cancel", "quit"].contains(line.lowercased()) { return [.cancel] }
            return Array(repeating: .erase, count: typed.count) + [.type(line), .choose]
        case .choosingRoom:
            switch line.lowercased() {
            case "create": return [.highlight(GKPeerPickerRoomChoice.create.index), .choose]
            case "join": return [.highlight(GKPeerPickerRoomChoice.join.index), .choose]
            default: break
            }
        default:
            break
        }
        return switch line.lowercased() {
        case "": [.choose]
        case "a", "accept": [.accept]
        case "d", "decline": [.decline]
        case "c", "q", "cancel", "quit": [.cancel]
        case "r", "retry": [.choose]
        default:
            if let number = Int(line), number >= 1 { [.highlight(number - 1), .choose] } else { [] }
        }
    }
}
