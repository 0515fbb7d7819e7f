/// The kinds of connection a peer picker offers (Game Kit's `GKPeerPickerConnectionType`).
public struct GKPeerPickerConnectionType: OptionSet, Sendable, Hashable {
    /// The bits: online 1 << 0, nearby 1 << 1, as in Game Kit.
    public let rawValue: UInt

    /// A mask from its bits.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Over the Internet: the application may take over when told of the choice (Game Kit's
    /// contract); otherwise the picker offers to create an online room or join one by its code.
    public static let online = GKPeerPickerConnectionType(rawValue: 1 << 0)
    /// Peers on the local network, found with Bonjour: the picker does everything.
    public static let nearby = GKPeerPickerConnectionType(rawValue: 1 << 1)
}

/// What a peer picker tells its application (Game Kit's `GKPeerPickerControllerDelegate`). Every
/// method has a default, as Game Kit's are optional, so an application implements only what it
/// needs. The picker calls it on its ``GKPeerPickerController/delegateQueue``: the main queue
/// unless changed, like Game Kit's.
public protocol GKPeerPickerControllerDelegate: AnyObject {
    /// The user chose a connection type (asked only when `connectionTypesMask` has more than one).
    /// For `.online`, an application with an interface of its own dismisses the picker here, as
    /// Game Kit asked; if the picker is still shown when this returns, it asks whether to create
    /// an online room or join one with its code (``GKPeerPickerController/rendezvous``), then
    /// lists the room's members like nearby peers.
    func peerPickerController(_ picker: GKPeerPickerController, didSelect type: GKPeerPickerConnectionType)
    /// The session the picker should use. The picker sets itself as the session's delegate while
    /// it is visible and makes the session available. The default, as in Game Kit, is a new
    /// `.peer` session with the default session ID and display name, which the picker closes if
    /// it is dismissed before a peer connects. For `.online`, a session that has not been made
    /// available yet is put in the room the user chose (one already available cannot be).
    func peerPickerController(_ picker: GKPeerPickerController, sessionFor type: GKPeerPickerConnectionType) -> GKSession
    /// A peer is connected: the application takes the session over (its delegate and data
    /// handler are the application's to set) and the picker has dismissed itself. A delegate the
    /// application sets on the session here then hears `.stateConnected` for this peer.
    func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession)
    /// The user cancelled; the picker has dismissed itself.
    func peerPickerControllerDidCancel(_ picker: GKPeerPickerController)
}

extension GKPeerPickerControllerDelegate {
    /// Does nothing.
    public func peerPickerController(_ picker: GKPeerPickerController, didSelect type: GKPeerPickerConnectionType) {}
    /// A new `.peer` session with the default session ID and display name, owned by the picker
    /// until it is handed over.
    public func peerPickerController(_ picker: GKPeerPickerController, sessionFor type: GKPeerPickerConnectionType) -> GKSession {
        picker.makeDefaultSession()
    }
    /// Does nothing.
    public func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession) {}
    /// Does nothing.
    public func peerPickerControllerDidCancel(_ picker: GKPeerPickerController) {}
}

/// A peer as the picker lists it.
public struct GKPeerPickerPeer: Hashable, Sendable {
    public let peerID: String
    public let displayName: String

    public init(peerID: String, displayName: String) {
        self.peerID = peerID
        self.displayName = displayName
    }
}

/// Where the picker's flow is.
public enum GKPeerPickerPhase: Hashable, Sendable {
    /// Asking which kind of connection; the options, in order.
    case choosingConnectionType([GKPeerPickerConnectionType])
    /// Online: create a room or join one with its code; the options are
    /// the cases of ``GKPeerPickerRoomChoice``, in order.
    case choosingRoom
    /// Online: the user types the room's code (what is typed so far).
    case enteringCode(String)
    /// Listing the available peers (nearby ones, and an online room's members).
    case searching
    /// Our invitation to this peer is waiting for its answer.
    case inviting(GKPeerPickerPeer)
    /// This peer invites us: accept or decline.
    case invited(by: GKPeerPickerPeer)
    /// We accepted this peer's invitation; the connection is being made.
    case accepting(GKPeerPickerPeer)
    /// The session could not be made available: the notice
    /// (``GKPeerPickerNotice/sessionUnavailable(reason:)``) says why (no usable network interface,
    /// a malformed or wrong room code, a rendezvous that does not answer or cannot be found).
    case noNetwork
    /// Connected: the picker's work is done.
    case connected(GKPeerPickerPeer)
    /// Cancelled, dismissed, or the application took over an online connection.
    case finished
}

/// A message about what just happened, shown until the next one or until the user acts.
public enum GKPeerPickerNotice: Hashable, Sendable {
    /// The peer declined our invitation.
    case declined(GKPeerPickerPeer)
    /// The peer did not answer in time.
    case noAnswer(GKPeerPickerPeer)
    /// The peer withdrew its invitation (cancelled, or it timed out on its side).
    case withdrawn(GKPeerPickerPeer)
    /// The connection with the peer failed for another reason.
    case failed(GKPeerPickerPeer, reason: String)
    /// What was typed is not a room code.
    case invalidRoomCode(String)
    /// The session could not join the online room: a wrong or expired code, no rendezvous.
    case roomUnavailable(reason: String)
    /// The session could not be made available, for this reason (with
    /// ``GKPeerPickerPhase/noNetwork``).
    case sessionUnavailable(reason: String)
}

/// The picker's online choices.
public enum GKPeerPickerRoomChoice: Int, CaseIterable, Sendable {
    /// A new room, whose code the picker shows for friends to join.
    case create
    /// A friend's room, by its code.
    case join

    /// Its row in ``GKPeerPickerPhase/choosingRoom``.
    public var index: Int { self.rawValue }
}

/// Everything a presenter draws: the phase, the live list, the highlighted row, a notice.
public struct GKPeerPickerScreen: Hashable, Sendable {
    public var phase: GKPeerPickerPhase
    /// The available peers, sorted by display name.
    public var peers: [GKPeerPickerPeer]
    /// The highlighted row: of `peers` while searching, of the options while choosing a type or
    /// a room.
    public var selection: Int
    public var notice: GKPeerPickerNotice?
    /// The code of the online room the session is in, once known (friends join with it).
    public var roomCode: String?

    public init(
        phase: GKPeerPickerPhase, peers: [GKPeerPickerPeer] = [], selection: Int = 0, notice: GKPeerPickerNotice? = nil, roomCode: String? = nil
    ) {
        self.phase = phase
        self.peers = peers
        self.selection = selection
        self.notice = notice
        self.roomCode = roomCode
    }

    /// The highlighted peer while searching.
    public var selectedPeer: GKPeerPickerPeer? {
        guard case .searching = self.phase, self.peers.indices.contains(self.selection) else { return nil }
        return self.peers[self.selection]
    }
}

/// What the user can do in a picker, whatever draws it.
public enum GKPeerPickerAction: Hashable, Sendable {
    /// Highlight the previous or next row.
    case moveUp, moveDown
    /// Highlight a row by its index.
    case highlight(Int)
    /// Enter: choose the highlighted type or room choice, join the room whose code was typed,
    /// invite the highlighted peer, or retry without network.
    case choose
    /// Text typed while entering a room code (letters, digits, hyphens and spaces are kept).
    case type(String)
    /// Backspace while entering a room code.
    case erase
    /// Accept or decline the invitation shown.
    case accept, decline
    /// Esc: withdraw our invitation, decline the one shown, go back from the room choice or the
    /// code, or leave the picker.
    case cancel
    /// Leave the picker whatever it shows (Ctrl-C, end of input): an invitation of ours is
    /// withdrawn, one shown is declined.
    case close
}

/// Draws a picker and reports what the user does. The picker calls it on the main actor, whatever
/// queue the picker works on; `actions` must be called there too. A GUI toolkit can draw the
/// same picker with its own.
@MainActor
public protocol GKPeerPickerPresenter: AnyObject, Sendable {
    /// Starts showing `screen`; the user's actions go to `actions`.
    func present(_ screen: GKPeerPickerScreen, actions: @escaping @MainActor (GKPeerPickerAction) -> Void)
    /// Shows a changed screen.
    func update(_ screen: GKPeerPickerScreen)
    /// Stops showing the picker and gives the terminal or window back.
    func dismiss()
}
