import GameKitOnline

/// The peer picker's state machine, without I/O: user actions and session events in, a screen
/// and effects (session calls, delegate calls) out. `GKPeerPickerController` performs the effects;
/// tests drive it directly. Every transition is listed in docs/PROTOCOL.md §15.
struct PeerPickerModel: Sendable {
    /// What the controller must do.
    enum Effect: Hashable, Sendable {
        /// Tell the delegate which type the user chose.
        case selectedConnectionType(GKPeerPickerConnectionType)
        /// Get the session (from the delegate, or a default one) and make it available.
        case startSession
        /// Make the session available again (retry after no network).
        case retrySession
        case connect(String)
        case cancelConnect(String)
        case accept(String)
        case deny(String)
        /// Hand the session to the application: this peer is connected.
        case connected(GKPeerPickerPeer)
        /// The user cancelled: dismiss and tell the delegate.
        case cancelled
        /// Get a session for an online room (the delegate's `sessionFor(.online)`, or a default
        /// one), put it in this room and make it available.
        case startOnlineSession(GKSession.Configuration.Online.Room)
        /// Let go of the session that could not join its room (closed if the picker made it).
        case discardSession
    }

    /// The longest room code the user may type (a code is twelve characters; hyphens and
    /// spaces may be typed between them).
    static let longestTypedCode = 20

    private(set) var screen: GKPeerPickerScreen
    private var effects: [Effect] = []
    private let connectionTypes: GKPeerPickerConnectionType
    /// Whether the session in use is in an online room.
    private var isOnline = false

    init(connectionTypes: GKPeerPickerConnectionType) {
        self.connectionTypes = connectionTypes
        self.screen = GKPeerPickerScreen(phase: .finished)
    }

    /// The oldest effect not yet taken.
    mutating func takeEffect() -> Effect? {
        self.effects.isEmpty ? nil : self.effects.removeFirst()
    }

    mutating func takeEffects() -> [Effect] {
        defer { self.effects.removeAll() }
        return self.effects
    }

    /// `show()`: ask for the type when online is offered too, else start searching nearby (the
    /// controller refuses a mask without `.nearby`, as Game Kit does).
    mutating func start() {
        if self.connectionTypes.contains(.online) {
            self.screen = GKPeerPickerScreen(phase: .choosingConnectionType([.nearby, .online]))
        } else {
            self.screen = GKPeerPickerScreen(phase: .searching)
            self.effects.append(.startSession)
        }
    }

    /// The session's online room has its code: shown from now on.
    mutating func roomReady(code: String) {
        self.screen.roomCode = code
    }

    // MARK: - User actions

    mutating func handle(_ action: GKPeerPickerAction) {
        switch (self.screen.phase, action) {
        case (.choosingConnectionType(let options), .moveUp), (.choosingConnectionType(let options), .moveDown),
            (.choosingConnectionType(let options), .highlight):
            self.move(action, count: options.count)
        case (.choosingConnectionType(let options), .choose):
            let type = options[min(self.screen.selection, options.count - 1)]
            self.effects.append(.selectedConnectionType(type))
            if type == .online {
                // The application may dismiss the picker in `didSelect` and show its own
                // interface (Game Kit's contract); if it does not, the picker asks which room.
                self.screen = GKPeerPickerScreen(phase: .choosingRoom)
            } else {
                self.screen = GKPeerPickerScreen(phase: .searching)
                self.effects.append(.startSession)
            }
        case (.choosingRoom, .moveUp), (.choosingRoom, .moveDown), (.choosingRoom, .highlight):
            self.move(action, count: GKPeerPickerRoomChoice.allCases.count)
        case (.choosingRoom, .choose):
            switch GKPeerPickerRoomChoice.allCases[min(self.screen.selection, GKPeerPickerRoomChoice.allCases.count - 1)] {
            case .create: self.startOnline(.create)
            case .join: self.screen = GKPeerPickerScreen(phase: .enteringCode(""))
            }
        case (.choosingRoom, .cancel):
            self.screen = GKPeerPickerScreen(phase: .choosingConnectionType([.nearby, .online]), selection: 1)
        case (.enteringCode(let text), .type(let typed)):
            let kept = typed.uppercased().filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == " ") }
            self.screen.phase = .enteringCode(String((text + kept).prefix(Self.longestTypedCode)))
            self.screen.notice = nil
        case (.enteringCode(let text), .erase):
            self.screen.phase = .enteringCode(String(text.dropLast()))
            self.screen.notice = nil
        case (.enteringCode(let text), .choose):
            if RoomInvitation(text) != nil {
                self.startOnline(.join(code: text))
            } else {
                self.screen.notice = .invalidRoomCode(text)
            }
        case (.enteringCode, .cancel):
            self.screen = GKPeerPickerScreen(phase: .choosingRoom, selection: GKPeerPickerRoomChoice.join.index)
        case (.searching, .moveUp), (.searching, .moveDown), (.searching, .highlight):
            self.move(action, count: self.screen.peers.count)
        case (.searching, .choose):
            guard let peer = self.screen.selectedPeer else { return }
            self.screen.phase = .inviting(peer)
            self.screen.notice = nil
            self.effects.append(.connect(peer.peerID))
        case (.inviting(let peer), .cancel):
            // The failure the session reports next (cancelled) needs no notice.
            self.screen.phase = .searching
            self.effects.append(.cancelConnect(peer.peerID))
        case (.invited(let peer), .accept), (.invited(let peer), .choose):
            self.screen.phase = .accepting(peer)
            self.effects.append(.accept(peer.peerID))
        case (.invited(let peer), .decline), (.invited(let peer), .cancel):
            self.screen.phase = .searching
            self.effects.append(.deny(peer.peerID))
        case (.noNetwork, .choose):
            self.screen.phase = .searching
            self.effects.append(.retrySession)
        case (.choosingConnectionType, .cancel), (.searching, .cancel), (.noNetwork, .cancel), (.accepting, .cancel):
            if case .accepting(let peer) = self.screen.phase { self.effects.append(.deny(peer.peerID)) }
            self.screen = GKPeerPickerScreen(phase: .finished)
            self.effects.append(.cancelled)
        case (.connected, .close), (.finished, .close):
            break
        case (let phase, .close):
            switch phase {
            case .inviting(let peer): self.effects.append(.cancelConnect(peer.peerID))
            case .invited(let peer), .accepting(let peer): self.effects.append(.deny(peer.peerID))
            default: break
            }
            self.screen = GKPeerPickerScreen(phase: .finished)
            self.effects.append(.cancelled)
        default:
            break  // an action that means nothing here
        }
    }

    private mutating func startOnline(_ room: GKSession.Configuration.Online.Room) {
        self.screen = GKPeerPickerScreen(phase: .searching)
        self.isOnline = true
        self.effects.append(.startOnlineSession(room))
    }

    private mutating func move(_ action: GKPeerPickerAction, count: Int) {
        guard count > 0 else { return }
        switch action {
        case .moveUp: self.screen.selection = max(0, self.screen.selection - 1)
        case .moveDown: self.screen.selection = min(count - 1, self.screen.selection + 1)
        case .highlight(let index): self.screen.selection = min(max(0, index), count - 1)
        default: break
        }
    }

    // MARK: - Session events

    /// A peer's state changed (`session(_:peer:didChange:)`); `name` is its display name.
    mutating func peerChanged(_ peer: GKPeerPickerPeer, to state: GKPeerConnectionState) {
        switch state {
        case .stateAvailable:
            if !self.screen.peers.contains(where: { $0.peerID == peer.peerID }) {
                let highlighted = self.screen.selectedPeer
                self.screen.peers.append(peer)
                self.screen.peers.sort { ($0.displayName, $0.peerID) < ($1.displayName, $1.peerID) }
                self.keepHighlight(on: highlighted)
            }
        case .stateConnected:
            switch self.screen.phase {
            case .inviting(let invited) where invited.peerID == peer.peerID,
                .accepting(let invited) where invited.peerID == peer.peerID:
                self.screen = GKPeerPickerScreen(phase: .connected(invited))
                self.effects.append(.connected(invited))
            default:
                // Connected otherwise (its own invitation accepted elsewhere, or through a
                // server): nothing to invite.
                self.remove(peer.peerID)
            }
        case .stateUnavailable, .stateDisconnected:
            // No longer available, or gone: not on the list to invite.
            self.remove(peer.peerID)
        case .stateConnecting:
            break  // our own attempt, or theirs: the list stays as it is
        }
    }

    /// `session(_:didReceiveConnectionRequestFromPeer:)`.
    mutating func connectionRequested(by peer: GKPeerPickerPeer) {
        switch self.screen.phase {
        case .searching:
            self.screen.phase = .invited(by: peer)
            self.screen.notice = nil
        case .inviting(let invited) where invited.peerID == peer.peerID:
            // Both invited each other at once and theirs went ahead: they want what we want.
            self.screen.phase = .accepting(peer)
            self.effects.append(.accept(peer.peerID))
        default:
            // Busy: one invitation at a time.
            self.effects.append(.deny(peer.peerID))
        }
    }

    /// `session(_:connectionWithPeerFailed:withError:)`.
    mutating func connectionFailed(with peer: GKPeerPickerPeer, error: any Error) {
        let code = (error as? GKSessionError)?.code
        switch self.screen.phase {
        case .inviting(let invited) where invited.peerID == peer.peerID:
            // In progress: they asked us at the same moment; their request comes next.
            if code == .inProgressError { return }
            self.screen.phase = .searching
            self.screen.notice = Self.notice(for: peer, code: code, error: error)
        case .invited(let inviter) where inviter.peerID == peer.peerID,
            .accepting(let inviter) where inviter.peerID == peer.peerID:
            self.screen.phase = .searching
            self.screen.notice = code == .cancelledError || code == .timedOutError ? .withdrawn(peer) : Self.notice(for: peer, code: code, error: error)
        default:
            break  // an attempt the user no longer looks at (cancelled by them)
        }
    }

    /// `session(_:didFailWithError:)`: the session cannot be made available; `reason` says
    /// why. An online session goes back to the room choice with the reason (a wrong code, no
    /// rendezvous): the next choice gets a new session.
    mutating func sessionFailed(reason: String = "") {
        switch self.screen.phase {
        case .finished, .connected:
            return
        default:
            if self.isOnline {
                self.isOnline = false
                self.screen = GKPeerPickerScreen(phase: .choosingRoom, notice: .roomUnavailable(reason: reason))
                self.effects.append(.discardSession)
            } else {
                self.screen = GKPeerPickerScreen(phase: .noNetwork, notice: .sessionUnavailable(reason: reason))
            }
        }
    }

    private static func notice(for peer: GKPeerPickerPeer, code: GKSessionError.Code?, error: any Error) -> GKPeerPickerNotice {
        switch code {
        case .declinedError?: .declined(peer)
        case .timedOutError?: .noAnswer(peer)
        case .cancelledError?: .withdrawn(peer)
        default: .failed(peer, reason: "\(error)")
        }
    }

    private mutating func remove(_ peerID: String) {
        let highlighted = self.screen.selectedPeer
        self.screen.peers.removeAll { $0.peerID == peerID }
        self.keepHighlight(on: highlighted)
    }

    /// Keeps the same peer highlighted as the list changes (or the nearest row if it left).
    private mutating func keepHighlight(on peer: GKPeerPickerPeer?) {
        if let peer, let index = self.screen.peers.firstIndex(of: peer) {
            self.screen.selection = index
        } else {
            self.screen.selection = min(self.screen.selection, max(0, self.screen.peers.count - 1))
        }
    }
}
