import GameKitOnline

/// The words of the picker, shared by the terminal and line presenters (and a GUI could use them).
public enum PeerPickerText {
    /// The one-line status of a screen: what is happening and what the user can do.
    public static func status(of screen: GKPeerPickerScreen) -> String {
        switch screen.phase {
        case .choosingConnectionType:
            return "How do you want to connect?"
        case .choosingRoom:
            return "Online: create a room, or join a friend's with its code?"
        case .enteringCode(let text):
            return "Room code: \(text)_"
        case .searching:
            if let room = screen.roomCode {
                return screen.peers.isEmpty ? "Room \(room): waiting for others (they join with this code)…" : "Room \(room): choose a peer to invite"
            }
            return screen.peers.isEmpty ? "Searching for nearby peers…" : "Choose a peer to invite"
        case .inviting(let peer):
            return "Waiting for \(peer.displayName) to accept… (Esc cancels)"
        case .invited(let peer):
            return "\(peer.displayName) wants to connect — [A]ccept / [D]ecline"
        case .accepting(let peer):
            return "Connecting to \(peer.displayName)…"
        case .noNetwork:
            return "The session could not start — [R]etry / Esc"
        case .connected(let peer):
            return "Connected to \(peer.displayName)"
        case .finished:
            return "Closed"
        }
    }

    /// The notice, if any, as a sentence.
    public static func notice(of screen: GKPeerPickerScreen) -> String? {
        switch screen.notice {
        case .declined(let peer)?: "\(peer.displayName) declined."
        case .noAnswer(let peer)?: "\(peer.displayName) did not answer."
        case .withdrawn(let peer)?: "\(peer.displayName) withdrew the invitation."
        case .failed(let peer, let reason)?: "Could not connect to \(peer.displayName): \(reason)"
        case .invalidRoomCode(let text)?: RoomInvitation.problem(typed: text) ?? "'\(text)' was refused as a room code."
        case .roomUnavailable(let reason)?: reason.isEmpty ? "Could not join the room." : "Could not join the room: \(reason)"
        case .sessionUnavailable(let reason)?: reason.isEmpty ? "No usable network interface." : reason
        case nil: nil
        }
    }

    /// The rows of the list: connection types or room choices while choosing one, nothing while
    /// a code is typed, peers otherwise.
    public static func rows(of screen: GKPeerPickerScreen) -> [String] {
        switch screen.phase {
        case .choosingConnectionType(let options):
            return options.map { $0 == .online ? "Online" : "Nearby" }
        case .choosingRoom:
            return GKPeerPickerRoomChoice.allCases.map { $0 == .create ? "Create a room" : "Join with a code" }
        case .enteringCode:
            return []
        default:
            return screen.peers.map(\.displayName)
        }
    }

    /// The keys that work now.
    public static func help(of screen: GKPeerPickerScreen) -> String {
        switch screen.phase {
        case .choosingConnectionType: "↑/↓ or j/k, Enter to choose, Esc or q to cancel"
        case .choosingRoom: "↑/↓ or j/k, Enter to choose, Esc or q to go back"
        case .enteringCode: "type the code, Backspace erases, Enter joins, Esc goes back"
        case .searching: screen.peers.isEmpty ? "Esc or q to cancel" : "↑/↓ or j/k, Enter to invite, Esc or q to cancel"
        case .inviting: "Esc cancels the invitation"
        case .invited: "a accepts, d declines"
        case .accepting: "Esc cancels"
        case .noNetwork: "r retries, Esc or q cancels"
        case .connected, .finished: ""
        }
    }}

extension GKPeerPickerScreen {
    /// Whether `action` on this screen may lead into typing a room code or out of it, so that a
    /// presenter reads what the user types next as the screen that follows expects (keys or
    /// text): it holds input until that screen arrives.
    func mayStartOrEndTyping(after action: GKPeerPickerAction) -> Bool {
        switch (self.phase, action) {
        case (.choosingRoom, .choose), (.enteringCode, .choose), (.enteringCode, .cancel): true
        default: false
        }
    }
}
