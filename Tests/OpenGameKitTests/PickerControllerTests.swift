import Foundation
import NIOConcurrencyHelpers
@_spi(Machine) import GameKitOnline
import NetworkImpairment
@testable import OpenGameKit
import Testing

/// A presenter that draws nothing: it keeps the screens it is given and lets the test act.
@MainActor
final class RecordingPresenter: GKPeerPickerPresenter {
    private(set) var screens: [GKPeerPickerScreen] = []
    private(set) var isPresented = false
    private var actions: (@MainActor (GKPeerPickerAction) -> Void)?

    func present(_ screen: GKPeerPickerScreen, actions: @escaping @MainActor (GKPeerPickerAction) -> Void) {
        self.isPresented = true
        self.actions = actions
        self.screens.append(screen)
    }

    func update(_ screen: GKPeerPickerScreen) { self.screens.append(screen) }

    func dismiss() {
        self.isPresented = false
        self.actions = nil
    }

    func act(_ action: GKPeerPickerAction) { self.actions?(action) }

    var last: GKPeerPickerScreen? { self.screens.last }
}

/// The application side of a picker in the tests: gives a session, records what it is told.
@MainActor
final class RecordingPickerDelegate: @MainActor GKPeerPickerControllerDelegate {
    let session: GKSession
    private(set) var connected: [(peerID: String, session: GKSession)] = []
    private(set) var cancelled = 0
    private(set) var selected: [GKPeerPickerConnectionType] = []
    private(set) var askedFor: [GKPeerPickerConnectionType] = []
    /// Takes online over as Game Kit asked: dismisses the picker in `didSelect`.
    var dismissesOnOnline = false

    /// What the application does with the session it is handed (as the lecture does: set its
    /// delegate and data handler).
    var onConnect: ((String, GKSession) -> Void)?

    init(session: GKSession) { self.session = session }

    func peerPickerController(_ picker: GKPeerPickerController, didSelect type: GKPeerPickerConnectionType) {
        self.selected.append(type)
        if type == .online, self.dismissesOnOnline {
            picker.delegate = nil
            picker.dismiss()
        }
    }
    func peerPickerController(_ picker: GKPeerPickerController, sessionFor type: GKPeerPickerConnectionType) -> GKSession {
        self.askedFor.append(type)
        return self.session
    }
    func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession) {
        self.connected.append((peerID, session))
        self.onConnect?(peerID, session)
    }
    func peerPickerControllerDidCancel(_ picker: GKPeerPickerController) { self.cancelled += 1 }
}

/// A session delegate and data handler that notes what it hears, from any queue.
final class SessionLog: GKSessionDelegate, GKSessionDataReceiveHandler, @unchecked Sendable {
    private let heard = NIOLockedValueBox<[String]>([])
    var entries: [String] { self.heard.withLockedValue { $0 } }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        self.heard.withLockedValue { $0.append("\(peerID) \(state)") }
    }

    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        self.heard.withLockedValue { $0.append("\(peer) sent \(String(decoding: data, as: UTF8.self))") }
    }
}

/// A picker delegate that implements nothing: the picker's defaults decide.
final class SilentPickerDelegate: GKPeerPickerControllerDelegate {}

/// GKPeerPickerController over real sessions on the sandbox's loopback, drawn by a recording
/// presenter: the whole flow as the application sees it.
@Suite("GKPeerPickerController over real sessions")
@MainActor
struct PickerControllerTests {
    static var root: URL { SandboxScript.packageRoot }

    /// Waits (bounded) until `condition` holds, letting the main queue run.
    static func until(_ condition: @MainActor () -> Bool) async -> Bool {
        await waitUntil(seconds: 15, condition)
    }

    static func picker(_ name: String, sessionID: String) -> (GKPeerPickerController, RecordingPresenter, RecordingPickerDelegate) {
        let picker = GKPeerPickerController()
        let presenter = RecordingPresenter()
        let delegate = RecordingPickerDelegate(session: GKSession(sessionID: sessionID, displayName: name, sessionMode: .peer))
        picker.presenter = presenter
        picker.delegate = delegate
        return (picker, presenter, delegate)
    }

    /// Alice's and Bob's pickers, shown, on a session ID of their own.
    static func twoShown() throws -> (
        (GKPeerPickerController, RecordingPresenter, RecordingPickerDelegate), (GKPeerPickerController, RecordingPresenter, RecordingPickerDelegate)
    ) {
        try NetworkSandbox.requireIsolation()
        let id = "picker-\(UInt32.random(in: 0...UInt32.max))"
        let alice = Self.picker("Alice", sessionID: id)
        let bob = Self.picker("Bob", sessionID: id)
        alice.0.show()
        bob.0.show()
        return (alice, bob)
    }

    @Test func anInvitationAcceptedHandsBothApplicationsAConnectedSession() async throws {
        let ((alicePicker, alice, aliceApp), (bobPicker, bob, bobApp)) = try Self.twoShown()
        #expect(alicePicker.isVisible && alice.isPresented)
        #expect(await Self.until { alice.last?.peers.map(\.displayName) == ["Bob"] })
        alice.act(.choose)
        #expect(alice.last?.phase == .inviting(GKPeerPickerPeer(peerID: bobApp.session.peerID, displayName: "Bob")))
        #expect(await Self.until { bob.last?.phase == .invited(by: GKPeerPickerPeer(peerID: aliceApp.session.peerID, displayName: "Alice")) })
        bob.act(.accept)
        #expect(await Self.until { aliceApp.connected.count == 1 && bobApp.connected.count == 1 })
        #expect(aliceApp.connected.first?.peerID == bobApp.session.peerID)
        #expect(bobApp.connected.first?.peerID == aliceApp.session.peerID)
        // Handed over: the pickers are gone, the sessions are the applications' own.
        #expect(!alicePicker.isVisible && !alice.isPresented && !bobPicker.isVisible && !bob.isPresented)
        #expect(aliceApp.session.delegate == nil && bobApp.session.delegate == nil)
        #expect(aliceApp.session.peers(with: .stateConnected) == [bobApp.session.peerID!])
        await aliceApp.session.close()
        await bobApp.session.close()
    }

    @Test func declineAndCancelReachTheRightSidesAndDismissReleasesTheSession() async throws {
        let ((alicePicker, alice, aliceApp), (bobPicker, bob, bobApp)) = try Self.twoShown()
        let bobPeer = GKPeerPickerPeer(peerID: bobApp.session.peerID, displayName: "Bob")
        #expect(await Self.until { alice.last?.peers == [bobPeer] })
        alice.act(.choose)
        #expect(await Self.until { if case .invited = bob.last?.phase { true } else { false } })
        bob.act(.decline)
        #expect(await Self.until { alice.last?.notice == .declined(bobPeer) })
        #expect(alice.last?.phase == .searching)
        // Bob leaves the picker: his application hears it, his session stops advertising.
        bob.act(.cancel)
        #expect(bobApp.cancelled == 1 && !bobPicker.isVisible && !bob.isPresented)
        #expect(!bobApp.session.isAvailable)
        #expect(await Self.until { alice.last?.peers.isEmpty == true })
        // Dismissed by the application: no callback, the session is handed back unavailable.
        alicePicker.dismiss()
        #expect(aliceApp.cancelled == 0 && !alice.isPresented && !aliceApp.session.isAvailable)
        await aliceApp.session.close()
        await bobApp.session.close()
    }

    @Test func anApplicationThatDismissesThePickerWhenOnlineIsChosenTakesOver() async throws {
        let (picker, presenter, app) = Self.picker("Alice", sessionID: "picker-online")
        app.dismissesOnOnline = true
        picker.connectionTypesMask = [.nearby, .online]
        picker.show()
        #expect(presenter.last?.phase == .choosingConnectionType([.nearby, .online]))
        presenter.act(.moveDown)
        presenter.act(.choose)
        #expect(app.selected == [.online])
        #expect(!picker.isVisible && !presenter.isPresented)
        #expect(app.cancelled == 0 && app.connected.isEmpty)
        #expect(!app.session.isAvailable && !app.session.isOnline)  // never started, never put in a room
        await app.session.close()
    }

    /// Chooses online, then `room` (and types `code` for a join), on a shown picker.
    static func chooseRoom(_ presenter: RecordingPresenter, _ room: GKPeerPickerRoomChoice, code: String = "") {
        presenter.act(.highlight(1))
        presenter.act(.choose)
        #expect(presenter.last?.phase == .choosingRoom)
        presenter.act(.highlight(room.index))
        presenter.act(.choose)
        if room == .join {
            #expect(presenter.last?.phase == .enteringCode(""))
            presenter.act(.type(code))
            presenter.act(.choose)
        }
    }

    static func address(of rendezvous: RendezvousService) -> String {
        "\(rendezvous.localAddress.ipAddress!):\(rendezvous.localAddress.port!)"
    }

    @Test func pickersMeetInARoomOneCreatedAndTheOtherJoinedWithTheTypedCode() async throws {
        let rendezvous = try await OnlineSessionTests.rendezvous()
        let id = "picker-room-\(UInt32.random(in: 0...UInt32.max))"
        // Alice's application gives a session configured for a room already (its rendezvous is
        // kept, the picker sets the room); Bob's gives a plain one (the picker's rendezvous).
        var configuration = GKSession.Configuration()
        configuration.online = .init(rendezvous: Self.address(of: rendezvous), room: .join(code: "0000-0000-0000"), alsoNearby: false)
        let aliceApp = RecordingPickerDelegate(session: GKSession(sessionID: id, displayName: "Alice", sessionMode: .peer, configuration: configuration))
        let (bobPicker, bob, bobApp) = Self.picker("Bob", sessionID: id)
        bobPicker.rendezvous = [Self.address(of: rendezvous)]
        let alicePicker = GKPeerPickerController()
        let alice = RecordingPresenter()
        alicePicker.presenter = alice
        alicePicker.delegate = aliceApp
        for picker in [alicePicker, bobPicker] {
            picker.connectionTypesMask = [.nearby, .online]
            picker.show()
        }
        Self.chooseRoom(alice, .create)
        #expect(alice.last?.phase == .searching)
        #expect(aliceApp.selected == [.online] && aliceApp.askedFor == [.online])
        #expect(await Self.until { alice.last?.roomCode != nil })
        let code = try #require(alice.last?.roomCode)
        #expect(aliceApp.session.roomCode == code)

        Self.chooseRoom(bob, .join, code: code.lowercased())
        #expect(bob.last?.phase == .searching)
        #expect(bobApp.session.isOnline)
        #expect(await Self.until { bob.last?.roomCode == code && bob.last?.peers.map(\.displayName) == ["Alice"] })
        #expect(await Self.until { alice.last?.peers.map(\.displayName) == ["Bob"] })
        bob.act(.choose)
        #expect(await Self.until { if case .invited = alice.last?.phase { true } else { false } })
        alice.act(.accept)
        #expect(await Self.until { aliceApp.connected.count == 1 && bobApp.connected.count == 1 })
        #expect(!alicePicker.isVisible && !bobPicker.isVisible)
        let path = aliceApp.session.path(forPeer: bobApp.session.peerID)
        #expect(path == .relayed || path == .direct, "path \(String(describing: path))")
        #expect(rendezvous.statistics.rooms == 1)
        await aliceApp.session.close()
        await bobApp.session.close()
        await rendezvous.stop()
    }

    @Test func aRoomThatCannotBeJoinedSaysWhyAndTheNextChoiceGetsANewSession() async throws {
        let rendezvous = try await OnlineSessionTests.rendezvous()
        // The application implements nothing: the picker's own sessions, the picker's prompt.
        let application = SilentPickerDelegate()
        let picker = GKPeerPickerController()
        let presenter = RecordingPresenter()
        picker.presenter = presenter
        picker.delegate = application
        picker.rendezvous = [Self.address(of: rendezvous)]
        picker.connectionTypesMask = [.nearby, .online]
        picker.show()
        Self.chooseRoom(presenter, .join, code: "ZZZZ-ZZ00-000S")
        let first = try #require(picker.session)
        #expect(await Self.until { presenter.last?.phase == .choosingRoom })
        guard case .roomUnavailable(let reason)? = presenter.last?.notice else {
            Issue.record("no notice: \(String(describing: presenter.last))")
            return
        }
        #expect(reason.contains("There is no room ZZZZ-ZZ00-000S"))
        #expect(picker.session == nil)
        #expect(await Self.until { first.isAvailable == false })
        // Create instead: a new session of the picker's, in a new room.
        presenter.act(.highlight(GKPeerPickerRoomChoice.create.index))
        presenter.act(.choose)
        let second = try #require(picker.session)
        #expect(second !== first && second.isOnline)
        #expect(await Self.until { presenter.last?.roomCode != nil })
        #expect(rendezvous.statistics.members == 1)
        // Dismissed: the picker's own session is closed and leaves the room.
        picker.dismiss()
        #expect(await Self.until { rendezvous.statistics.members == 0 })
        await rendezvous.stop()
    }

    @Test func anApplicationsSessionAlreadyAvailableCannotJoinARoomAndIsLeftAsItWas() async throws {
        try NetworkSandbox.requireIsolation()
        let (picker, presenter, app) = Self.picker("Alice", sessionID: "picker-busy-\(UInt32.random(in: 0...UInt32.max))")
        app.session.isAvailable = true
        picker.connectionTypesMask = [.nearby, .online]
        picker.show()
        Self.chooseRoom(presenter, .create)
        #expect(presenter.last?.phase == .choosingRoom)
        guard case .roomUnavailable(let reason)? = presenter.last?.notice else {
            Issue.record("no notice: \(String(describing: presenter.last))")
            return
        }
        #expect(reason.contains("already been made available"))
        #expect(app.session.isAvailable && !app.session.isOnline && picker.session == nil)
        presenter.act(.cancel)  // back to the type
        presenter.act(.cancel)  // and out
        #expect(app.cancelled == 1 && !picker.isVisible)
        #expect(app.session.isAvailable)  // never the picker's: left as it was
        await app.session.close()
    }

    // MARK: - Behaviours as the reference describes them

    @Test func theSessionForOfTheApplicationIsTheSessionThePickerUses() async throws {
        try NetworkSandbox.requireIsolation()
        let (picker, _, app) = Self.picker("Alice", sessionID: "picker-own-\(UInt32.random(in: 0...UInt32.max))")
        picker.show()
        #expect(picker.session === app.session)
        #expect(app.session.isAvailable && app.session.delegate != nil)
        picker.dismiss()
        // Handed back: no longer the picker's, not available, still open.
        #expect(picker.session == nil && app.session.delegate == nil && !app.session.isAvailable)
        await app.session.close()
    }

    @Test func withoutSessionForThePickerMakesADefaultPeerSessionAndClosesItWhenDismissed() async throws {
        try NetworkSandbox.requireIsolation()
        let presenter = RecordingPresenter()
        let delegate = SilentPickerDelegate()
        let picker = GKPeerPickerController()
        picker.presenter = presenter
        picker.delegate = delegate
        picker.show()
        let session = try #require(picker.session)
        #expect(session.sessionMode == .peer)
        #expect(session.sessionID == URL(fileURLWithPath: CommandLine.arguments[0]).lastPathComponent)
        #expect(session.isAvailable)
        picker.dismiss()
        #expect(await Self.until { session.description.contains("unavailable") })
    }

    @Test func aShownPickerKeepsItselfAliveUntilItIsDismissed() async throws {
        try NetworkSandbox.requireIsolation()
        let presenter = RecordingPresenter()
        let app = RecordingPickerDelegate(session: GKSession(sessionID: "picker-alive", displayName: "Alice", sessionMode: .peer))
        weak var shown: GKPeerPickerController?
        weak var neverShown: GKPeerPickerController?
        var unused: GKPeerPickerController? = GKPeerPickerController()
        neverShown = unused
        unused = nil
        do {
            let picker = GKPeerPickerController()
            picker.presenter = presenter
            picker.delegate = app
            picker.show()
            shown = picker
        }
        // The application let go of it, as Game Kit allowed from iOS 3.1 on: it stays up.
        #expect(neverShown == nil)
        #expect(shown?.isVisible == true && presenter.isPresented)
        presenter.act(.cancel)
        #expect(app.cancelled == 1)
        #expect(await Self.until { shown == nil })
        await app.session.close()
    }

    @Test func theDelegateSetAtTheHandOverHearsStateConnectedAndTheFirstData() async throws {
        // The lecture's voice demo starts its chat on exactly that state change.
        let ((_, alice, aliceApp), (_, bob, bobApp)) = try Self.twoShown()
        let aliceLog = SessionLog()
        let bobLog = SessionLog()
        aliceApp.onConnect = { _, session in
            session.delegate = aliceLog
            session.setDataReceiveHandler(aliceLog, withContext: nil)
        }
        bobApp.onConnect = { peerID, session in
            session.delegate = bobLog
            // Sent the moment Bob has the session: Alice's handler, set in her own hand-over, gets it.
            try? session.send(Data("first".utf8), toPeers: [peerID], with: .reliable)
        }
        #expect(await Self.until { alice.last?.peers.map(\.displayName) == ["Bob"] })
        alice.act(.choose)
        #expect(await Self.until { if case .invited = bob.last?.phase { true } else { false } })
        bob.act(.accept)
        let bobID = bobApp.session.peerID!
        let aliceID = aliceApp.session.peerID!
        #expect(await Self.until { aliceLog.entries.contains("\(bobID) sent first") })
        #expect(aliceLog.entries == ["\(bobID) connected", "\(bobID) sent first"])
        #expect(bobLog.entries == ["\(aliceID) connected"])
        // Handed over as a pair: no longer offered to others.
        #expect(!aliceApp.session.isAvailable && !bobApp.session.isAvailable)
        await aliceApp.session.close()
        await bobApp.session.close()
    }

    @Test func aPickerMadeAndShownOffTheMainThreadDrawsOnTheMainActor() async throws {
        try NetworkSandbox.requireIsolation()
        let presenter = RecordingPresenter()
        let app = RecordingPickerDelegate(session: GKSession(sessionID: "picker-thread", displayName: "Alice", sessionMode: .peer))
        let picker = await Task.detached { GKPeerPickerController() }.value
        picker.presenter = presenter
        picker.delegate = app
        await Task.detached { picker.show() }.value
        #expect(picker.isVisible)
        #expect(await Self.until { presenter.isPresented && presenter.last?.phase == .searching })
        #expect(picker.session === app.session)
        await Task.detached { picker.dismiss() }.value
        #expect(!picker.isVisible)
        #expect(await Self.until { !presenter.isPresented })
        await app.session.close()
    }

    @Test func aMaskWithNearbyIsKept() {
        // A mask without .nearby stops the program (PortingTests runs that in a process of its own).
        let picker = GKPeerPickerController()
        #expect(picker.connectionTypesMask == .nearby)
        picker.connectionTypesMask = [.online, .nearby]
        #expect(picker.connectionTypesMask == [.nearby, .online])
    }
}
