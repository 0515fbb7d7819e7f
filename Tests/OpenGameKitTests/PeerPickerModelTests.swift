import Testing

@testable import OpenGameKit

/// The picker's state machine, every phase and transition, with session events made up by the
/// test (no session, no terminal).
@Suite("Peer picker model")
struct PeerPickerModelTests {
    static let bob = GKPeerPickerPeer(peerID: "2", displayName: "Bob")
    static let carol = GKPeerPickerPeer(peerID: "3", displayName: "Carol")
    static let dave = GKPeerPickerPeer(peerID: "4", displayName: "Dave")

    /// Searching, with Bob and Carol listed, the start's effects taken.
    static func searching() -> PeerPickerModel {
        var model = PeerPickerModel(connectionTypes: .nearby)
        model.start()
        #expect(model.takeEffects() == [.startSession])
        model.peerChanged(Self.carol, to: .stateAvailable)
        // Carol, listed first, keeps the highlight as Bob sorts in before her.
        #expect(model.screen.selection == 0)
        model.peerChanged(Self.bob, to: .stateAvailable)
        #expect(model.screen.selectedPeer == Self.carol)
        model.handle(.highlight(0))
        return model
    }

    static func inviting() -> PeerPickerModel {
        var model = Self.searching()
        model.handle(.choose)
        #expect(model.takeEffects() == [.connect("2")])
        return model
    }

    static func invited() -> PeerPickerModel {
        var model = Self.searching()
        model.connectionRequested(by: Self.carol)
        #expect(model.takeEffects() == [])
        return model
    }

    // MARK: - Choosing the connection type

    @Test func nearbyAloneStartsSearchingAtOnce() {
        var model = PeerPickerModel(connectionTypes: .nearby)
        model.start()
        #expect(model.screen.phase == .searching)
        #expect(model.takeEffects() == [.startSession])
    }

    @Test func bothTypesAskFirstAndNearbyThenSearches() {
        var model = PeerPickerModel(connectionTypes: [.nearby, .online])
        model.start()
        #expect(model.screen.phase == .choosingConnectionType([.nearby, .online]))
        #expect(model.takeEffects() == [])
        model.handle(.moveDown)
        model.handle(.moveDown)  // stays on the last
        #expect(model.screen.selection == 1)
        model.handle(.moveUp)
        model.handle(.choose)
        #expect(model.takeEffects() == [.selectedConnectionType(.nearby), .startSession])
        #expect(model.screen.phase == .searching)
    }

    /// Online chosen, with the effects of the choice taken: the room choice.
    static func choosingRoom() -> PeerPickerModel {
        var model = PeerPickerModel(connectionTypes: [.nearby, .online])
        model.start()
        model.handle(.highlight(1))
        model.handle(.choose)
        // The delegate hears the choice first: dismissing the picker there takes over (the
        // controller then stops); otherwise the picker asks which room.
        #expect(model.takeEffects() == [.selectedConnectionType(.online)])
        #expect(model.screen.phase == .choosingRoom)
        return model
    }

    @Test func choosingOnlineAsksWhichRoomAndCreatingOneStartsAnOnlineSession() {
        var model = Self.choosingRoom()
        #expect(model.screen.selection == GKPeerPickerRoomChoice.create.index)
        model.handle(.moveDown)
        model.handle(.moveDown)  // stays on the last
        #expect(model.screen.selection == GKPeerPickerRoomChoice.join.index)
        model.handle(.moveUp)
        model.handle(.accept)  // means nothing here
        #expect(model.takeEffects() == [])
        model.handle(.choose)
        #expect(model.takeEffects() == [.startOnlineSession(.create)])
        #expect(model.screen.phase == .searching)
        model.roomReady(code: "7K3Q-XM4F-9ABR")
        #expect(model.screen.roomCode == "7K3Q-XM4F-9ABR")
        model.peerChanged(Self.bob, to: .stateAvailable)
        #expect(model.screen.peers == [Self.bob])
    }

    @Test func joiningTakesATypedCodeAndRefusesOneThatIsNot() {
        var model = Self.choosingRoom()
        model.handle(.highlight(GKPeerPickerRoomChoice.join.index))
        model.handle(.choose)
        #expect(model.screen.phase == .enteringCode(""))
        #expect(model.takeEffects() == [])
        // Typed text is upper-cased; what cannot be in a code is left out; keys are text here.
        model.handle(.type("7k3q-xm4f-9a"))
        model.handle(.type("é!b"))
        #expect(model.screen.phase == .enteringCode("7K3Q-XM4F-9AB"))
        model.handle(.moveUp)
        model.handle(.accept)
        #expect(model.screen.phase == .enteringCode("7K3Q-XM4F-9AB"))
        model.handle(.choose)
        #expect(model.screen.notice == .invalidRoomCode("7K3Q-XM4F-9AB"))
        #expect(model.takeEffects() == [])
        // A mistyped symbol: the check symbol catches it on the keyboard.
        model.handle(.type("S"))
        #expect(model.screen.notice == nil)
        model.handle(.choose)
        #expect(model.screen.notice == .invalidRoomCode("7K3Q-XM4F-9ABS"))
        #expect(model.takeEffects() == [])
        model.handle(.erase)
        model.handle(.erase)
        #expect(model.screen.phase == .enteringCode("7K3Q-XM4F-9A"))
        model.handle(.type("BR"))
        model.handle(.choose)
        #expect(model.takeEffects() == [.startOnlineSession(.join(code: "7K3Q-XM4F-9ABR"))])
        #expect(model.screen.phase == .searching)
        #expect(model.screen.notice == nil)
    }

    @Test func aTypedCodeIsBoundedAndErasingNothingIsHarmless() {
        var model = Self.choosingRoom()
        model.handle(.highlight(1))
        model.handle(.choose)
        model.handle(.erase)
        #expect(model.screen.phase == .enteringCode(""))
        model.handle(.type(String(repeating: "A", count: 100)))
        #expect(model.screen.phase == .enteringCode(String(repeating: "A", count: PeerPickerModel.longestTypedCode)))
    }

    @Test func escapeStepsBackFromTheCodeAndTheRoomChoiceAndCloseEndsThePicker() {
        var model = Self.choosingRoom()
        model.handle(.highlight(1))
        model.handle(.choose)
        model.handle(.type("7K3"))
        model.handle(.cancel)
        #expect(model.screen.phase == .choosingRoom)
        #expect(model.screen.selection == GKPeerPickerRoomChoice.join.index)
        model.handle(.cancel)
        #expect(model.screen.phase == .choosingConnectionType([.nearby, .online]))
        #expect(model.screen.selection == 1)
        #expect(model.takeEffects() == [])
        var typing = Self.choosingRoom()
        typing.handle(.highlight(1))
        typing.handle(.choose)
        typing.handle(.close)
        #expect(typing.takeEffects() == [.cancelled])
        #expect(typing.screen.phase == .finished)
        var choosing = Self.choosingRoom()
        choosing.handle(.close)
        #expect(choosing.takeEffects() == [.cancelled])
    }

    @Test func aRoomThatCannotBeJoinedGoesBackToTheRoomChoiceWithTheReason() {
        var model = Self.choosingRoom()
        model.handle(.highlight(1))
        model.handle(.choose)
        model.handle(.type("7K3QXM4F9ABR"))
        model.handle(.choose)
        #expect(model.takeEffects() == [.startOnlineSession(.join(code: "7K3QXM4F9ABR"))])
        model.peerChanged(Self.bob, to: .stateAvailable)
        model.sessionFailed(reason: "There is no room 7K3Q-XM4F-9ABR.")
        #expect(model.screen.phase == .choosingRoom)
        #expect(model.screen.peers.isEmpty)
        #expect(model.screen.notice == .roomUnavailable(reason: "There is no room 7K3Q-XM4F-9ABR."))
        #expect(model.takeEffects() == [.discardSession])
        // The next try gets a session anew; a nearby session's failure is still "no network".
        model.handle(.choose)
        #expect(model.takeEffects() == [.startOnlineSession(.create)])
        model.sessionFailed(reason: "unreachable")
        #expect(model.takeEffects() == [.discardSession])
        model.handle(.cancel)
        model.handle(.highlight(0))
        model.handle(.choose)
        #expect(model.takeEffects() == [.selectedConnectionType(.nearby), .startSession])
        model.sessionFailed(reason: "no interface")
        #expect(model.screen.phase == .noNetwork)
        #expect(model.screen.notice == .sessionUnavailable(reason: "no interface"))
        #expect(model.takeEffects() == [])
    }

    @Test func cancellingTheTypeChoiceCancelsThePicker() {
        var model = PeerPickerModel(connectionTypes: [.nearby, .online])
        model.start()
        model.handle(.cancel)
        #expect(model.takeEffects() == [.cancelled])
        #expect(model.screen.phase == .finished)
    }

    // MARK: - Searching

    @Test func theListIsLiveSortedAndKeepsTheHighlightOnItsPeer() {
        var model = Self.searching()
        #expect(model.screen.peers == [Self.bob, Self.carol])
        model.handle(.moveDown)
        #expect(model.screen.selectedPeer == Self.carol)
        model.peerChanged(Self.dave, to: .stateAvailable)
        model.peerChanged(Self.bob, to: .stateAvailable)  // already listed: once only
        #expect(model.screen.peers == [Self.bob, Self.carol, Self.dave])
        #expect(model.screen.selectedPeer == Self.carol)
        // Bob busy elsewhere, Dave gone: off the list; Carol still highlighted.
        model.peerChanged(Self.bob, to: .stateUnavailable)
        model.peerChanged(Self.dave, to: .stateDisconnected)
        #expect(model.screen.peers == [Self.carol])
        #expect(model.screen.selectedPeer == Self.carol)
        // The highlighted peer leaves: the nearest row is highlighted.
        model.peerChanged(Self.carol, to: .stateUnavailable)
        #expect(model.screen.peers.isEmpty)
        #expect(model.screen.selectedPeer == nil)
        model.handle(.choose)  // nobody to invite
        #expect(model.takeEffects() == [])
        #expect(model.screen.phase == .searching)
    }

    @Test func cancellingWhileSearchingCancelsThePicker() {
        var model = Self.searching()
        model.handle(.cancel)
        #expect(model.takeEffects() == [.cancelled])
    }

    @Test func actionsThatMeanNothingChangeNothing() {
        var model = Self.searching()
        let before = model.screen
        model.handle(.accept)
        model.handle(.decline)
        #expect(model.screen == before)
        #expect(model.takeEffects() == [])
    }

    // MARK: - Inviting

    @Test func invitingThenConnectedHandsTheSessionOver() {
        var model = Self.inviting()
        #expect(model.screen.phase == .inviting(Self.bob))
        model.peerChanged(Self.bob, to: .stateConnecting)
        #expect(model.screen.phase == .inviting(Self.bob))
        model.peerChanged(Self.bob, to: .stateConnected)
        #expect(model.screen.phase == .connected(Self.bob))
        #expect(model.takeEffects() == [.connected(Self.bob)])
    }

    @Test(arguments: [
        (GKSessionError.Code.declinedError, GKPeerPickerNotice.declined(PeerPickerModelTests.bob)),
        (.timedOutError, .noAnswer(PeerPickerModelTests.bob)),
        (.cancelledError, .withdrawn(PeerPickerModelTests.bob)),
        (.connectionFailedError, .failed(PeerPickerModelTests.bob, reason: "\(GKSessionError.connectionFailedError)")),
    ])
    func aFailedInvitationShowsWhyAndSearchesAgain(error: GKSessionError.Code, notice: GKPeerPickerNotice) {
        var model = Self.inviting()
        model.connectionFailed(with: Self.bob, error: GKSessionError(error))
        #expect(model.screen.phase == .searching)
        #expect(model.screen.notice == notice)
        // The next invitation clears the notice.
        model.handle(.choose)
        #expect(model.screen.notice == nil)
    }

    @Test func cancellingAnInvitationWithdrawsItQuietly() {
        var model = Self.inviting()
        model.handle(.cancel)
        #expect(model.takeEffects() == [.cancelConnect("2")])
        #expect(model.screen.phase == .searching)
        model.connectionFailed(with: Self.bob, error: GKSessionError(.cancelledError))
        #expect(model.screen.notice == nil)
    }

    @Test func bothInvitingEachOtherEndsInOneAcceptedConnection() {
        var model = Self.inviting()
        // Our attempt lost the glare rule...
        model.connectionFailed(with: Self.bob, error: GKSessionError(.inProgressError))
        #expect(model.screen.phase == .inviting(Self.bob))
        // ...and Bob's request is what we wanted anyway.
        model.connectionRequested(by: Self.bob)
        #expect(model.takeEffects() == [.accept("2")])
        #expect(model.screen.phase == .accepting(Self.bob))
        model.peerChanged(Self.bob, to: .stateConnected)
        #expect(model.takeEffects() == [.connected(Self.bob)])
    }

    @Test func anotherInvitationWhileInvitingIsDeclined() {
        var model = Self.inviting()
        model.connectionRequested(by: Self.carol)
        #expect(model.takeEffects() == [.deny("3")])
        #expect(model.screen.phase == .inviting(Self.bob))
        // Carol's failure is not the attempt on screen.
        model.connectionFailed(with: Self.carol, error: GKSessionError(.declinedError))
        #expect(model.screen.phase == .inviting(Self.bob))
        #expect(model.screen.notice == nil)
    }

    // MARK: - Invited

    @Test func acceptingAnInvitationConnects() {
        var model = Self.invited()
        #expect(model.screen.phase == .invited(by: Self.carol))
        model.handle(.accept)
        #expect(model.takeEffects() == [.accept("3")])
        #expect(model.screen.phase == .accepting(Self.carol))
        model.peerChanged(Self.carol, to: .stateConnected)
        #expect(model.takeEffects() == [.connected(Self.carol)])
    }

    @Test(arguments: [GKPeerPickerAction.decline, .cancel])
    func decliningAnInvitationSearchesAgain(action: GKPeerPickerAction) {
        var model = Self.invited()
        model.handle(action)
        #expect(model.takeEffects() == [.deny("3")])
        #expect(model.screen.phase == .searching)
    }

    @Test func anInvitationWithdrawnByItsSenderIsShown() {
        var model = Self.invited()
        model.connectionFailed(with: Self.carol, error: GKSessionError(.cancelledError))
        #expect(model.screen.phase == .searching)
        #expect(model.screen.notice == .withdrawn(Self.carol))
        var timedOut = Self.invited()
        timedOut.connectionFailed(with: Self.carol, error: GKSessionError(.timedOutError))
        #expect(timedOut.screen.notice == .withdrawn(Self.carol))
    }

    @Test func aSecondInvitationWhileOneIsShownIsDeclined() {
        var model = Self.invited()
        model.connectionRequested(by: Self.dave)
        #expect(model.takeEffects() == [.deny("4")])
        #expect(model.screen.phase == .invited(by: Self.carol))
    }

    @Test func anAcceptThatFailsShowsTheFailure() {
        var model = Self.invited()
        model.handle(.accept)
        _ = model.takeEffects()
        model.connectionFailed(with: Self.carol, error: GKSessionError(.connectionFailedError))
        #expect(model.screen.phase == .searching)
        #expect(model.screen.notice == .failed(Self.carol, reason: "\(GKSessionError.connectionFailedError)"))
    }

    @Test func cancellingWhileAcceptingDeclinesAndCancels() {
        var model = Self.invited()
        model.handle(.accept)
        _ = model.takeEffects()
        model.handle(.cancel)
        #expect(model.takeEffects() == [.deny("3"), .cancelled])
    }

    @Test func closingLeavesFromEveryPhaseAndUndoesWhatIsPending() {
        var inviting = Self.inviting()
        inviting.handle(.close)
        #expect(inviting.takeEffects() == [.cancelConnect("2"), .cancelled])
        var invited = Self.invited()
        invited.handle(.close)
        #expect(invited.takeEffects() == [.deny("3"), .cancelled])
        var searching = Self.searching()
        searching.handle(.close)
        #expect(searching.takeEffects() == [.cancelled])
        #expect(searching.screen.phase == .finished)
        searching.handle(.close)  // already finished
        #expect(searching.takeEffects() == [])
        var choosing = PeerPickerModel(connectionTypes: [.nearby, .online])
        choosing.start()
        choosing.handle(.close)
        #expect(choosing.takeEffects() == [.cancelled])
    }

    // MARK: - No network

    @Test func noNetworkOffersRetryAndCancel() {
        var model = Self.searching()
        model.sessionFailed()
        #expect(model.screen.phase == .noNetwork)
        #expect(model.screen.peers.isEmpty)
        model.handle(.choose)
        #expect(model.takeEffects() == [.retrySession])
        #expect(model.screen.phase == .searching)
        model.sessionFailed()
        model.handle(.cancel)
        #expect(model.takeEffects() == [.cancelled])
        // After the end, a session failure changes nothing.
        model.sessionFailed()
        #expect(model.screen.phase == .finished)
    }

    // MARK: - What presenters show

    @Test func everyPhaseHasItsWords() {
        #expect(PeerPickerText.status(of: GKPeerPickerScreen(phase: .inviting(Self.bob))) == "Waiting for Bob to accept… (Esc cancels)")
        #expect(PeerPickerText.status(of: GKPeerPickerScreen(phase: .invited(by: Self.bob))) == "Bob wants to connect — [A]ccept / [D]ecline")
        #expect(PeerPickerText.status(of: GKPeerPickerScreen(phase: .searching)) == "Searching for nearby peers…")
        #expect(PeerPickerText.rows(of: GKPeerPickerScreen(phase: .choosingConnectionType([.nearby, .online]))) == ["Nearby", "Online"])
        #expect(PeerPickerText.notice(of: GKPeerPickerScreen(phase: .searching, notice: .declined(Self.bob))) == "Bob declined.")
        #expect(PeerPickerText.rows(of: GKPeerPickerScreen(phase: .choosingRoom)) == ["Create a room", "Join with a code"])
        #expect(PeerPickerText.rows(of: GKPeerPickerScreen(phase: .enteringCode("7K"), peers: [Self.bob])) == [])
        #expect(PeerPickerText.status(of: GKPeerPickerScreen(phase: .enteringCode("7K"))) == "Room code: 7K_")
        #expect(
            PeerPickerText.notice(of: GKPeerPickerScreen(phase: .enteringCode("7K"), notice: .invalidRoomCode("7K")))
                == "'7K' is not a room code: it has twelve letters and digits, not 2. A code looks like 7K3Q-XM4F-9ABR.")
        #expect(
            PeerPickerText.notice(of: GKPeerPickerScreen(phase: .enteringCode(""), notice: .invalidRoomCode("7K3Q-XM4F-9ABS")))
                == "'7K3Q-XM4F-9ABS' is not a room code: one letter or digit is mistyped, or two are swapped. A code looks like 7K3Q-XM4F-9ABR.")
        #expect(
            PeerPickerText.notice(of: GKPeerPickerScreen(phase: .choosingRoom, notice: .roomUnavailable(reason: "No such room.")))
                == "Could not join the room: No such room.")
        let phases: [GKPeerPickerPhase] = [
            .choosingConnectionType([.nearby]), .choosingRoom, .enteringCode(""), .searching, .inviting(Self.bob), .invited(by: Self.bob),
            .accepting(Self.bob), .noNetwork, .connected(Self.bob), .finished,
        ]
        #expect(Set(phases.map { PeerPickerText.status(of: GKPeerPickerScreen(phase: $0)) }).count == phases.count)
    }

    @Test func keysAndLinesMapToActions() {
        #expect(TerminalPickerPresenter.action(for: .up) == .moveUp)
        #expect(TerminalPickerPresenter.action(for: .character("j")) == .moveDown)
        #expect(TerminalPickerPresenter.action(for: .enter) == .choose)
        #expect(TerminalPickerPresenter.action(for: .escape) == .cancel)
        #expect(TerminalPickerPresenter.action(for: .interrupt) == .close)
        #expect(TerminalPickerPresenter.action(for: .character("q")) == .cancel)
        #expect(TerminalPickerPresenter.action(for: .character("A")) == .accept)
        #expect(TerminalPickerPresenter.action(for: .character("d")) == .decline)
        #expect(TerminalPickerPresenter.action(for: .character("x")) == nil)
        #expect(LinePickerPresenter.actions(for: "2") == [.highlight(1), .choose])
        #expect(LinePickerPresenter.actions(for: "") == [.choose])
        #expect(LinePickerPresenter.actions(for: "0") == [])
        #expect(LinePickerPresenter.actions(for: "Accept") == [.accept])
        #expect(LinePickerPresenter.actions(for: "nonsense") == [])
    }

    /// Input typed ahead of a switch between commands and text waits for the screen that
    /// follows (the picker on a queue of its own answers later): a code typed at once after
    /// choosing "join" is text, not `j`/`k`/`q` commands; a dismissal drops the rest.
    @Test @MainActor func inputTypedAheadOfTheCodePromptWaitsForIt() {
        var model = Self.choosingRoom()
        _ = model.takeEffects()
        var performed: [GKPeerPickerAction] = []
        var shown = model.screen  // what the presenter shows: behind the model until told
        let gate = PickerInputGate<TerminalKey> { key, screen in TerminalPickerPresenter.action(for: key, in: screen.phase).map { [$0] } ?? [] }
        let perform = { (action: GKPeerPickerAction) -> Bool in
            performed.append(action)
            model.handle(action)
            return true
        }
        // Down, Enter (join), then "jkq" and Enter before the prompt is drawn.
        gate.feed([.down, .enter, .character("j"), .character("k"), .character("q"), .enter], screen: { shown }, perform: perform)
        #expect(performed == [.moveDown, .choose])
        #expect(gate.isHolding)
        shown = model.screen
        gate.screenShown(screen: { shown }, perform: perform)
        // "JKQ" typed, then Enter: a choice that might leave the prompt, so the gate waits again.
        #expect(performed == [.moveDown, .choose, .type("j"), .type("k"), .type("q"), .choose])
        #expect(model.screen.phase == .enteringCode("JKQ") && model.screen.notice == .invalidRoomCode("JKQ"))
        shown = model.screen
        gate.screenShown(screen: { shown }, perform: perform)
        #expect(!gate.isHolding)
        // Nothing waits when nothing switches; a gone picker stops the feed.
        gate.feed([.character("x"), .escape, .character("k"), .enter], screen: { shown }, perform: { action in
            performed.append(action)
            return false
        })
        #expect(performed.suffix(1) == [.type("x")])
        gate.feed([.escape, .down], screen: { shown }, perform: perform)
        #expect(gate.isHolding)
        gate.reset()
        #expect(!gate.isHolding)
    }

    @Test func whileACodeIsTypedKeysAndLinesAreText() {
        let typing = GKPeerPickerPhase.enteringCode("7K")
        #expect(TerminalPickerPresenter.action(for: .character("k"), in: typing) == .type("k"))
        #expect(TerminalPickerPresenter.action(for: .character("q"), in: typing) == .type("q"))
        #expect(TerminalPickerPresenter.action(for: .backspace, in: typing) == .erase)
        #expect(TerminalPickerPresenter.action(for: .enter, in: typing) == .choose)
        #expect(TerminalPickerPresenter.action(for: .escape, in: typing) == .cancel)
        #expect(TerminalPickerPresenter.action(for: .endOfFile, in: typing) == .close)
        #expect(TerminalPickerPresenter.action(for: .up, in: typing) == nil)
        #expect(TerminalPickerPresenter.action(for: .character("k"), in: .choosingRoom) == .moveUp)
        // A line replaces what was typed; `q` alone goes back (no code is one character).
        let screen = GKPeerPickerScreen(phase: typing)
        #expect(LinePickerPresenter.actions(for: "7k3qxm", on: screen) == [.erase, .erase, .type("7k3qxm"), .choose])
        #expect(LinePickerPresenter.actions(for: "q", on: screen) == [.cancel])
        let rooms = GKPeerPickerScreen(phase: .choosingRoom)
        #expect(LinePickerPresenter.actions(for: "join", on: rooms) == [.highlight(1), .choose])
        #expect(LinePickerPresenter.actions(for: "create", on: rooms) == [.highlight(0), .choose])
        #expect(LinePickerPresenter.actions(for: "2", on: rooms) == [.highlight(1), .choose])
        // The actions after which input waits for the next screen (keys or text).
        #expect(rooms.mayStartOrEndTyping(after: .choose))
        #expect(screen.mayStartOrEndTyping(after: .choose) && screen.mayStartOrEndTyping(after: .cancel))
        #expect(!screen.mayStartOrEndTyping(after: .type("x")) && !rooms.mayStartOrEndTyping(after: .moveDown))
        #expect(!GKPeerPickerScreen(phase: .searching).mayStartOrEndTyping(after: .choose))
    }

    @Test func inputIsCutIntoTrimmedLinesAcrossChunks() {
        var lines = InputLines()
        #expect(lines.lines(from: Array("1\nhel".utf8)) == ["1"])
        #expect(lines.lines(from: Array("lo there \r\n\n".utf8)) == ["hello there", ""])
        #expect(lines.lines(from: []) == [])
    }

    @Test func theKeyDecoderReadsArrowsEscapeTextAndSplitSequences() {
        var decoder = TerminalKeyDecoder()
        #expect(decoder.keys(from: Array("\u{1B}[A\u{1B}OBk\r\n\u{7F}".utf8)) == [.up, .down, .character("k"), .enter, .backspace])
        #expect(decoder.keys(from: [0x1B]) == [.escape])
        #expect(decoder.keys(from: Array("é\u{03}\u{04}".utf8)) == [.character("é"), .interrupt, .endOfFile])
        // A sequence cut between two reads, and an unknown one skipped whole.
        #expect(decoder.keys(from: [0x1B, UInt8(ascii: "[")]) == [])
        #expect(decoder.keys(from: [UInt8(ascii: "B")]) == [.down])
        #expect(decoder.keys(from: Array("\u{1B}[15~x".utf8)) == [.character("x")])
        // A UTF-8 character cut between two reads.
        let euro = Array("€".utf8)
        #expect(decoder.keys(from: Array(euro.prefix(1))) == [])
        #expect(decoder.keys(from: Array(euro.dropFirst())) == [.character("€")])
    }
}
