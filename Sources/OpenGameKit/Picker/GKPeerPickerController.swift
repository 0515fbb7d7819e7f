import Foundation
import NIOConcurrencyHelpers

/// Game Kit's standard interface for finding a nearby peer, inviting it and answering
/// invitations, ending in a connected `GKSession` handed to the application.
///
/// ```swift
/// let picker = GKPeerPickerController()
/// picker.delegate = self            // peerPickerController(_:didConnectPeer:to:) gets the session
/// picker.show()
/// ```
///
/// As in Game Kit, it is an open `NSObject` subclass that any thread may create, configure and
/// show. It does its work on ``delegateQueue`` (the main queue unless changed), where it also
/// calls its delegate; a call made on that queue takes effect at once. While shown it keeps
/// itself alive, so an application may let go of it after `show()`. While visible it is the
/// session's delegate: connection requests become prompts and failures become messages. It draws
/// itself with ``presenter`` on the main actor: by default a full-screen terminal interface when
/// standard input and output are a terminal, plain lines otherwise.
open class GKPeerPickerController: NSObject, @unchecked Sendable {
    private struct State {
        var mask = GKPeerPickerConnectionType.nearby
        weak var delegate: (any GKPeerPickerControllerDelegate)?
        var queue = DispatchQueue.main
        var invitationTimeout: TimeInterval = 30
        var rendezvous = GKPeerPickerController.defaultRendezvous
        var presenter: (any GKPeerPickerPresenter)?
        var isVisible = false
        /// Counts `show()`s: work queued for an earlier showing finds a newer number and stops.
        var showing: UInt64 = 0
        var model = PeerPickerModel(connectionTypes: .nearby)
        var session: GKSession?
        /// The session the default `sessionFor` made, closed if the picker is dismissed with it.
        var ownSession: GKSession?
        var events: PickerSessionEvents?
        /// Game Kit's picker is retained while shown and released when dismissed.
        var retainedWhileShown: GKPeerPickerController?
    }

    private let state = NIOLockedValueBox(State())
    /// The picker's work, on its delegate queue, in order.
    private let work = OrderedDelivery()
    /// The presenter's calls, on the main actor, in order.
    private let drawing = OrderedDelivery()

    /// A picker offering nearby peers.
    public override init() {
        super.init()
    }

    // MARK: - Game Kit's properties and methods

    /// The connection types offered; `.nearby` by default. With `.online` as well the picker first
    /// asks which. After online, an application that dismisses the picker in `didSelect` shows
    /// its own interface (Game Kit's contract); otherwise the picker asks whether to create a room
    /// or join one with its code, on ``rendezvous``. As in Game Kit, a mask
    /// without `.nearby` is a programming error: the program stops with a message (Game Kit threw
    /// an exception).
    open var connectionTypesMask: GKPeerPickerConnectionType {
        get { self.state.withLockedValue { $0.mask } }
        set {
            precondition(
                newValue.contains(.nearby),
                "GKPeerPickerController.connectionTypesMask must include .nearby (it was \(newValue.rawValue)); Game Kit throws an exception here too")
            self.state.withLockedValue { $0.mask = newValue }
        }
    }

    /// Told of the choice, asked for the session, handed the connected session, told of cancels
    /// (held weakly).
    open var delegate: (any GKPeerPickerControllerDelegate)! {
        get { self.state.withLockedValue { $0.delegate } }
        set { self.state.withLockedValue { $0.delegate = newValue } }
    }

    /// Whether the picker is showing.
    open var isVisible: Bool { self.state.withLockedValue { $0.isVisible } }

    /// Shows the picker (nothing if it is already visible). The picker keeps itself alive until
    /// it is dismissed.
    open func show() {
        let (queue, showing) = self.state.withLockedValue { state -> (DispatchQueue?, UInt64) in
            guard !state.isVisible else { return (nil, 0) }
            state.isVisible = true
            state.showing += 1
            state.retainedWhileShown = self
            state.model = PeerPickerModel(connectionTypes: state.mask)
            return (state.queue, state.showing)
        }
        if let queue { self.work.run(on: queue) { self.begin(showing) } }
    }

    /// Hides the picker. An invitation in progress is withdrawn; a session the picker made is
    /// closed, one the application gave is made unavailable and handed back.
    open func dismiss() {
        guard let ended = self.end() else { return }
        self.release(ended)
    }

    // MARK: - Swift-only configuration

    /// How long an invitation waits for the other side's answer, in seconds (a Swift-only
    /// addition).
    public var invitationTimeout: TimeInterval {
        get { self.state.withLockedValue { $0.invitationTimeout } }
        set { self.state.withLockedValue { $0.invitationTimeout = newValue } }
    }

    /// The rendezvous of the picker's online rooms, `HOST:PORT` (several are tried in order; a
    /// Swift-only addition). By default the comma-separated list in the `OGK_RENDEZVOUS`
    /// environment variable, else `127.0.0.1:7878` (a `gk-rendezvous` on this machine). Such a
    /// session lists the room's members only (the user chose online, not nearby); a session the
    /// delegate gives that is configured online already keeps its own settings but the room.
    public var rendezvous: [String] {
        get { self.state.withLockedValue { $0.rendezvous } }
        set { self.state.withLockedValue { $0.rendezvous = newValue } }
    }

    /// `OGK_RENDEZVOUS`'s addresses, else a rendezvous on this machine.
    static var defaultRendezvous: [String] {
        let listed = (ProcessInfo.processInfo.environment["OGK_RENDEZVOUS"] ?? "").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
        return listed.isEmpty ? ["127.0.0.1:\(GKSession.Configuration.Online.defaultPort)"] : listed
    }

    /// What draws the picker (a Swift-only addition); nil until `show()` picks the default for
    /// the terminal.
    public var presenter: (any GKPeerPickerPresenter)? {
        get { self.state.withLockedValue { $0.presenter } }
        set { self.state.withLockedValue { $0.presenter = newValue } }
    }

    /// Where the picker works and calls its delegate: the main queue unless changed (a
    /// Swift-only addition). Set it before `show()`; a serial queue.
    public var delegateQueue: DispatchQueue {
        get { self.state.withLockedValue { $0.queue } }
        set { self.state.withLockedValue { $0.queue = newValue } }
    }

    /// The session while the picker drives it.
    public var session: GKSession? { self.state.withLockedValue { $0.session } }

    /// The presenter for this process's terminal.
    @MainActor
    public static func defaultPresenter() -> any GKPeerPickerPresenter {
        TerminalScreen.isInteractive ? TerminalPickerPresenter() : LinePickerPresenter()
    }

    /// The session of a delegate without `sessionFor`: a new `.peer` session with the default
    /// session ID and display name, owned by the picker until it is handed over.
    func makeDefaultSession() -> GKSession {
        let session: GKSession = GKSession(sessionID: nil, displayName: nil, sessionMode: .peer, password: nil)
        self.state.withLockedValue { $0.ownSession = session }
        return session
    }

    // MARK: - Driving the model (on the delegate queue)

    private func begin(_ showing: UInt64) {
        let screen = self.state.withLockedValue { state -> GKPeerPickerScreen? in
            guard state.isVisible, state.showing == showing else { return nil }
            state.model.start()
            return state.model.screen
        }
        guard let screen else { return }
        self.drawing.run(on: .main) {
            MainActor.assumeIsolated {
                guard let presenter = self.presenterForShowing(showing) else { return }
                presenter.present(screen) { [weak self] action in self?.userAction(action, showing) }
            }
        }
        self.apply(showing)
    }

    /// The presenter, made now if none was given, while the showing lasts.
    @MainActor
    private func presenterForShowing(_ showing: UInt64) -> (any GKPeerPickerPresenter)? {
        let current = self.state.withLockedValue { state -> (any GKPeerPickerPresenter)?? in
            guard state.isVisible, state.showing == showing else { return .none }
            return .some(state.presenter)
        }
        guard case .some(let existing) = current else { return nil }
        if let existing { return existing }
        let made = Self.defaultPresenter()
        self.state.withLockedValue { $0.presenter = made }
        return made
    }

    /// A user action from the presenter, on the main actor.
    private func userAction(_ action: GKPeerPickerAction, _ showing: UInt64) {
        let queue = self.delegateQueue
        self.work.run(on: queue) {
            let live = self.state.withLockedValue { state -> Bool in
                guard state.isVisible, state.showing == showing else { return false }
                state.model.handle(action)
                return true
            }
            if live { self.apply(showing) }
        }
    }

    /// A session event, from the picker's stand-in delegate, on the session's delegate queue.
    /// Handled there when it is the picker's queue too (the default), so that a hand-over happens
    /// before the session delivers anything that follows.
    func sessionEvent(_ event: PickerSessionEvents.Event, showing: UInt64) {
        let queue = self.delegateQueue
        self.work.run(on: queue) {
            let session = event.session
            let live = self.state.withLockedValue { state -> Bool in
                guard state.isVisible, state.showing == showing, state.session === session else { return false }
                switch event.kind {
                case .peerChanged(let peer, let newState):
                    state.model.peerChanged(peer, to: newState)
                case .request(let peer):
                    state.model.connectionRequested(by: peer)
                case .failed(let peer, let error):
                    state.model.connectionFailed(with: peer, error: error)
                case .sessionFailed(let error):
                    state.model.sessionFailed(reason: (error as? GKSessionError)?.localizedDescription ?? "\(error)")
                }
                return true
            }
            if live { self.apply(showing) }
        }
    }

    /// Performs the model's effects, then shows its screen.
    private func apply(_ showing: UInt64) {
        while true {
            let next = self.state.withLockedValue { state -> (PeerPickerModel.Effect?, GKSession?)? in
                guard state.isVisible, state.showing == showing else { return nil }
                return (state.model.takeEffect(), state.session)
            }
            guard let (effect, session) = next else { return }
            guard let effect else { break }
            switch effect {
            case .selectedConnectionType(let type):
                self.delegate?.peerPickerController(self, didSelect: type)
            case .startSession:
                self.startSession(showing)
            case .startOnlineSession(let room):
                self.startSession(showing, online: room)
            case .discardSession:
                self.discardSession(showing)
            case .retrySession:
                session?.isAvailable = false
                session?.isAvailable = true
            case .connect(let peerID):
                session?.connect(toPeer: peerID, withTimeout: self.invitationTimeout)
            case .cancelConnect(let peerID):
                session?.cancelConnect(toPeer: peerID)
            case .accept(let peerID):
                do {
                    try session?.acceptConnection(fromPeer: peerID)
                } catch {
                    self.state.withLockedValue { state in
                        let peer = GKPeerPickerPeer(peerID: peerID, displayName: session?.displayName(forPeer: peerID) ?? peerID)
                        state.model.connectionFailed(with: peer, error: error)
                    }
                }
            case .deny(let peerID):
                session?.denyConnection(fromPeer: peerID)
            case .connected(let peer):
                self.handOver(peer)
                return
            case .cancelled:
                self.dismiss()
                self.delegate?.peerPickerControllerDidCancel(self)
                return
            }
        }
        let update = self.state.withLockedValue { state -> (GKPeerPickerScreen, (any GKPeerPickerPresenter)?)? in
            guard state.isVisible, state.showing == showing else { return nil }
            return (state.model.screen, state.presenter)
        }
        guard let (screen, presenter) = update, let presenter else { return }
        self.drawing.run(on: .main) { MainActor.assumeIsolated { presenter.update(screen) } }
    }

    /// Gets the session and makes it available: nearby, or in the online `room`.
    private func startSession(_ showing: UInt64, online room: GKSession.Configuration.Online.Room? = nil) {
        let session = self.delegate?.peerPickerController(self, sessionFor: room == nil ? .nearby : .online) ?? self.makeDefaultSession()
        if let room {
            do {
                try session.core.joinBeforeStarting(room, rendezvous: self.rendezvous)
            } catch {
                // An application's session already in use: the user may go back, or cancel.
                self.state.withLockedValue { state in
                    if state.ownSession !== session { state.ownSession = nil }
                    guard state.isVisible, state.showing == showing else { return }
                    state.model.sessionFailed(reason: error.localizedDescription)
                }
                return
            }
        }
        let events = PickerSessionEvents(picker: self, showing: showing)
        let live = self.state.withLockedValue { state -> Bool in
            guard state.isVisible, state.showing == showing else { return false }
            if state.ownSession !== session { state.ownSession = nil }
            state.session = session
            state.events = events
            return true
        }
        guard live else { return }
        session.delegate = events
        session.isAvailable = true
        if session.isOnline {
            // The room's code, for the screen, once the rendezvous has answered.
            Task { [weak self] in
                guard let code = try? await session.waitForRoomCode(), let self else { return }
                self.work.run(on: self.delegateQueue) {
                    let live = self.state.withLockedValue { state -> Bool in
                        guard state.isVisible, state.showing == showing, state.session === session else { return false }
                        state.model.roomReady(code: code)
                        return true
                    }
                    if live { self.apply(showing) }
                }
            }
        }
        let available = session.peers(with: .stateAvailable) ?? []
        self.state.withLockedValue { state in
            for peerID in available {
                state.model.peerChanged(GKPeerPickerPeer(peerID: peerID, displayName: session.displayName(forPeer: peerID) ?? peerID), to: .stateAvailable)
            }
        }
    }

    /// The online session could not join its room: closed if the picker made it, else made
    /// unavailable and handed back; the next choice gets a session anew.
    private func discardSession(_ showing: UInt64) {
        let taken = self.state.withLockedValue { state -> Ended? in
            guard state.isVisible, state.showing == showing else { return nil }
            let taken = Ended(
                session: state.session, ownsSession: state.session != nil && state.session === state.ownSession,
                events: state.events, presenter: nil, retained: nil)
            state.session = nil
            state.ownSession = nil
            state.events = nil
            return taken
        }
        if let taken { self.release(taken) }
    }

    /// A peer is connected: the picker goes away, the application gets the session, and a
    /// delegate it sets on the session hears `.stateConnected` for that peer.
    private func handOver(_ peer: GKPeerPickerPeer) {
        guard let ended = self.end(), let session = ended.session else { return }
        if session.delegate === ended.events { session.delegate = nil }
        // Two players found each other: like Game Kit's, the pair is no longer offered to others.
        session.isAvailable = false
        self.dismissPresenter(ended.presenter)
        self.delegate?.peerPickerController(self, didConnectPeer: peer.peerID, to: session)
        if let delegate = session.delegate, delegate !== ended.events {
            delegate.session(session, peer: peer.peerID, didChange: .stateConnected)
        }
    }

    // MARK: - Ending

    private struct Ended {
        var session: GKSession?
        var ownsSession: Bool
        var events: PickerSessionEvents?
        var presenter: (any GKPeerPickerPresenter)?
        /// Keeps the picker alive until its ending is done.
        var retained: GKPeerPickerController?
    }

    /// Marks the picker hidden and takes what the showing held; nil when it was not visible.
    private func end() -> Ended? {
        self.state.withLockedValue { state -> Ended? in
            guard state.isVisible else { return nil }
            state.isVisible = false
            state.showing += 1
            let ended = Ended(
                session: state.session, ownsSession: state.session != nil && state.session === state.ownSession,
                events: state.events, presenter: state.presenter, retained: state.retainedWhileShown)
            state.session = nil
            state.ownSession = nil
            state.events = nil
            state.retainedWhileShown = nil
            state.model = PeerPickerModel(connectionTypes: state.mask)
            return ended
        }
    }

    /// Dismissed before a connection: pending invitations end, the session goes back.
    private func release(_ ended: Ended) {
        self.dismissPresenter(ended.presenter)
        guard let session = ended.session else { return }
        if session.delegate === ended.events { session.delegate = nil }
        for peerID in session.peers(with: .stateConnecting) ?? [] {
            session.cancelConnect(toPeer: peerID)
            session.denyConnection(fromPeer: peerID)
        }
        if ended.ownsSession {
            Task { await session.close() }
        } else {
            session.isAvailable = false
        }
    }

    private func dismissPresenter(_ presenter: (any GKPeerPickerPresenter)?) {
        guard let presenter else { return }
        self.drawing.run(on: .main) { MainActor.assumeIsolated { presenter.dismiss() } }
    }
}
