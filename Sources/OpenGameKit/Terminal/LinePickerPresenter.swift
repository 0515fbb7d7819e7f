import Foundation

/// The picker in plain lines, for when standard input or output is not a terminal (a pipe, a
/// test, a log): every change of status, list or notice is printed as a `picker:` line, and each
/// input line is a command — a peer's number to invite it (an empty line invites the first),
/// `a`/`d` to accept or decline, `c` or `q` to cancel, `r` to retry. End of input closes the
/// picker whatever it shows.
@MainActor
public final class LinePickerPresenter: GKPeerPickerPresenter {
    private var screen = GKPeerPickerScreen(phase: .finished)
    private var actions: (@MainActor (GKPeerPickerAction) -> Void)?
    private var lines = InputLines()
    private var printed: (status: String, rows: [String], notice: String?) = ("", [], nil)

    public init() {}

    public func present(_ screen: GKPeerPickerScreen, actions: @escaping @MainActor (GKPeerPickerAction) -> Void) {
        self.actions = actions
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
    }

    public func dismiss() {
        guard self.actions != nil else { return }
        self.actions = nil
        StandardInput.shared.listen(nil)
    }

    private func input(_ chunk: StandardInput.Chunk) {
        guard case .bytes(let bytes) = chunk else {
            self.actions?(.close)
            return
        }
        for line in self.lines.lines(from: bytes) {
            guard let actions = self.actions else { return }
            for action in Self.actions(for: line) {
                actions(action)
                if self.actions == nil { return }
            }
        }
    }

    /// What one input line means.
    nonisolated static func actions(for line: String) -> [GKPeerPickerAction] {
        switch line.lowercased() {
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
