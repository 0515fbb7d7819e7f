import Foundation

/// Game Kit's standard interface for finding a nearby peer, inviting it and answering
/// invitations, ending in a connected `GKSession` handed to the application.
///
/// ```swift
/// let picker = GKPeerPickerController()
/// picker.delegate = self            // peerPickerController(_:didConnectPeer:to:) gets the session
/// picker.show()
/// ```
///
/// While visible the picker is the session's delegate: connection requests become prompts and
/// failures become messages. It draws itself with `presenter`: by default a full-screen terminal
/// interface when standard input and output are a terminal, plain lines otherwise.
@MainActor
public final class GKPeerPickerController {
    /// The connection types offered; `.nearby` by default. With `.online` as well the picker first
    /// asks which, and choosing online leaves the rest to the application.
    public var connectionTypesMask: GKPeerPickerConnectionType = .nearby
    /// Told of the choice, asked for the session, handed the connected session, told of cancels.
    public weak var delegate: (any GKPeerPickerControllerDelegate)?
    /// How long an invitation waits for the other side's answer, in seconds.
    public var invitationTimeout: TimeInterval = 30
    /// What draws the picker; nil until `show()` picks the default for the terminal.
    public var presenter: (any GKPeerPickerPresenter)?
    /// Whether the picker is showing.
    public private(set) var isVisible = false
    /// The session while the picker drives it.
    public private(set) var session: GKSession?

    private var model = PeerPickerModel(connectionTypes: .nearby)
    private var ownsSession = false
    private var sessionEvents: PickerSessionEvents?

    public init() {}

    /// Shows the picker (nothing if it is already visible).
    public func show() {
        guard !self.isVisible else { return }
        self.isVisible = true
        self.model = PeerPickerModel(connectionTypes: self.connectionTypesMask)
        self.model.start()
        let presenter = self.presenter ?? Self.defaultPresenter()
        self.presenter = presenter
        presenter.present(self.model.screen) { [weak self] action in self?.perform(action) }
        self.apply()
    }

    /// Hides the picker. An invitation in progress is withdrawn; a session the picker made is
    /// closed, one the application gave is made unavailable and handed back.
    public func dismiss() {
        guard self.isVisible else { return }
        self.isVisible = false
        self.presenter?.dismiss()
        self.releaseSession()
    }

    /// The presenter for this process's terminal.
    public static func defaultPresenter() -> any GKPeerPickerPresenter {
        TerminalScreen.isInteractive ? TerminalPickerPresenter() : LinePickerPresenter()
    }

    // MARK: - Driving the model

    /// A user action from the presenter.
    func perform(_ action: GKPeerPickerAction) {
        guard self.isVisible else { return }
        self.model.handle(action)
        self.apply()
    }

    /// A session event, on the main actor.
    func handle(_ event: PickerSessionEvents.Event) {
        guard self.isVisible, let session = self.session, event.session === session else { return }
        switch event.kind {
        case .peerChanged(let peerID, let state):
            self.model.peerChanged(self.peer(peerID), to: state)
        case .request(let peerID):
            self.model.connectionRequested(by: self.peer(peerID))
        case .failed(let peerID, let error):
            self.model.connectionFailed(with: self.peer(peerID), error: error)
        case .sessionFailed:
            self.model.sessionFailed()
        }
        self.apply()
    }

    private func peer(_ peerID: String) -> GKPeerPickerPeer {
        GKPeerPickerPeer(peerID: peerID, displayName: self.session?.displayName(forPeer: peerID) ?? peerID)
    }

    /// Performs the model's effects, then shows its screen.
    private func apply() {
        for effect in self.model.takeEffects() {
            switch effect {
            case .selectedConnectionType(let type):
                self.delegate?.peerPickerController(self, didSelect: type)
            case .startSession:
                self.startSession()
            case .retrySession:
                self.session?.isAvailable = false
                self.session?.isAvailable = true
            case .connect(let peerID):
                self.session?.connect(toPeer: peerID, withTimeout: self.invitationTimeout)
            case .cancelConnect(let peerID):
                self.session?.cancelConnect(toPeer: peerID)
            case .accept(let peerID):
                do {
                    try self.session?.acceptConnection(fromPeer: peerID)
                } catch {
                    self.model.connectionFailed(with: self.peer(peerID), error: error)
                }
            case .deny(let peerID):
                self.session?.denyConnection(fromPeer: peerID)
            case .connected(let peer):
                guard let session = self.session else { continue }
                session.delegate = nil
                self.finish()
                self.delegate?.peerPickerController(self, didConnectPeer: peer.peerID, to: session)
                return
            case .cancelled:
                self.dismiss()
                self.delegate?.peerPickerControllerDidCancel(self)
                return
            case .finishedOnline:
                self.dismiss()
                return
            }
        }
        if self.isVisible { self.presenter?.update(self.model.screen) }
    }

    private func startSession() {
        let provided = self.delegate?.peerPickerController(self, sessionFor: .nearby)
        let session = provided ?? GKSession(sessionID: nil, displayName: nil, sessionMode: .peer)
        self.ownsSession = provided == nil
        let events = PickerSessionEvents(picker: self)
        self.sessionEvents = events
        self.session = session
        session.delegate = events
        session.isAvailable = true
        for peerID in session.peers(with: .stateAvailable) ?? [] {
            self.model.peerChanged(self.peer(peerID), to: .stateAvailable)
        }
    }

    /// The picker is done with the session; it stays as it is (connected) for the application.
    private func finish() {
        self.isVisible = false
        self.presenter?.dismiss()
        self.session = nil
        self.sessionEvents = nil
    }

    private func releaseSession() {
        guard let session = self.session else { return }
        self.session = nil
        self.sessionEvents = nil
        session.delegate = nil
        for peerID in session.peers(with: .stateConnecting) ?? [] {
            session.cancelConnect(toPeer: peerID)
            session.denyConnection(fromPeer: peerID)
        }
        if self.ownsSession {
            Task { await session.close() }
        } else {
            session.isAvailable = false
        }
    }
}

/// The picker's stand-in as its session's delegate: the session calls it on its delegate queue,
/// and it passes each event to the picker on the main actor, in order.
final class PickerSessionEvents: GKSessionDelegate, @unchecked Sendable {
    struct Event: @unchecked Sendable {
        enum Kind {
            case peerChanged(String, GKPeerConnectionState)
            case request(String)
            case failed(String, any Error)
            case sessionFailed(any Error)
        }
        let session: GKSession
        let kind: Kind
    }

    private weak var picker: GKPeerPickerController?

    init(picker: GKPeerPickerController) { self.picker = picker }

    private func forward(_ event: Event) {
        DispatchQueue.main.async { [weak picker] in
            MainActor.assumeIsolated { picker?.handle(event) }
        }
    }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        self.forward(Event(session: session, kind: .peerChanged(peerID, state)))
    }

    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        self.forward(Event(session: session, kind: .request(peerID)))
    }

    func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) {
        self.forward(Event(session: session, kind: .failed(peerID, error)))
    }

    func session(_ session: GKSession, didFailWithError error: Error) {
        self.forward(Event(session: session, kind: .sessionFailed(error)))
    }
}
