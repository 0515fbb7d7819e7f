import ArgumentParser
import Foundation
import OpenGameKit
import OpenGameKitVoice
import NetworkImpairment

/// `gk-voice demo` (the default): the peer picker finds and connects a peer on the local
/// network, or in an online room (`--online [CODE]`); a voice chat starts over that session; the screen shows "Connected to …", live
/// meters, and takes m (mute), + / - (the far side's volume) and q (hang up, back to the picker).
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo", abstract: "The picker, then a voice chat with the chosen peer (the default).")

    @Option(help: "The session ID: only peers with the same one meet.")
    var sessionID = "gk-voice"

    @OptionGroup var session: SessionOptions

    @OptionGroup var options: VoiceOptions

    @MainActor
    func run() async throws {
        ToolLogging.bootstrap()
        let service: GKVoiceChatService = GKVoiceChatService.default()
        var voice = try self.options.configuration()
        let configuration = self.session.configuration()
        if self.session.online.isOnline {
            let rendezvous = self.session.online.rendezvousAddresses()
            // The rendezvous answers STUN too: the call's media may find a direct path with it
            // (else it goes over the session's connection, through the room's relay).
            if voice.stunServers.isEmpty {
                voice.stunServers = rendezvous.compactMap { VoiceOptions.stunServer(atRendezvous: $0) }
            }
        }
        service.configuration = voice
        let session: GKSession = GKSession(
            sessionID: self.sessionID, displayName: self.session.name, sessionMode: .peer, configuration: configuration)
        let app = VoiceApp(session: session, service: service)
        // SIGINT, SIGTERM and SIGHUP quit as Ctrl-C on the screen does: the call is hung up,
        // the peers told, the advertisement withdrawn; then the process ends as the signal
        // would have ended it.
        TerminationSignals.handle { _ in MainActor.assumeIsolated { app.quit() } }
        if let seconds = self.session.seconds {
            DispatchQueue.main.asyncAfter(deadline: .now() + seconds) { MainActor.assumeIsolated { app.quit() } }
        }
        await app.run()
        if let signal = TerminationSignals.received { TerminationSignals.exit(as: signal) }
    }
}

/// The demo: the picker until a peer is connected, then the voice screen, then the picker again.
@MainActor
final class VoiceApp: GKPeerPickerControllerDelegate {
    private let session: GKSession
    private let service: GKVoiceChatService
    private let client: SessionVoiceClient
    private let picker = GKPeerPickerController()
    private var screen: VoiceScreen?
    private var peerID: String?
    private var refresh: DispatchSourceTimer?
    private var finished: CheckedContinuation<Void, Never>?
    private var quitting = false

    init(session: GKSession, service: GKVoiceChatService) {
        self.session = session
        self.service = service
        self.client = SessionVoiceClient(session: session, service: service)
        service.client = self.client
        service.isInputMeteringEnabled = true
        service.isOutputMeteringEnabled = true
        self.client.onEvent = { [weak self] event in self?.chatEvent(event) }
    }

    func run() async {
        await withCheckedContinuation { continuation in
            self.finished = continuation
            self.showPicker()
        }
    }

    func quit() {
        guard !self.quitting else { return }
        self.quitting = true
        // Withdrawn first, so that browsers drop this peer at once; the hang-up then has its
        // moment to reach the other side before the links close.
        self.session.isAvailable = false
        self.picker.dismiss()
        self.closeScreen()
        if let peerID { self.service.stopVoiceChat(withParticipantID: peerID) }
        self.session.disconnectFromAllPeers()
        Task {
            try? await Task.sleep(nanoseconds: 200_000_000)  // the hang-up goes out
            await self.session.close()
            self.finished?.resume()
            self.finished = nil
        }
    }

    private func showPicker() {
        guard !self.quitting else { return }
        self.picker.delegate = self
        self.picker.show()
    }

    // The picker calls its delegate on the main queue.
    nonisolated func peerPickerController(_ picker: GKPeerPickerController, sessionFor type: GKPeerPickerConnectionType) -> GKSession {
        MainActor.assumeIsolated { self.session }
    }

    nonisolated func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession) {
        MainActor.assumeIsolated { self.connected(peerID, session) }
    }

    private func connected(_ peerID: String, _ session: GKSession) {
        self.peerID = peerID
        let name = session.displayName(forPeer: peerID) ?? peerID
        let screen = VoiceScreen()
        screen.status = VoiceStatus(title: "gk-voice — \(session.displayName!)", status: "Calling \(name)…", path: "—", volume: 1, meters: [.init(name: name, level: -100)])
        screen.onKey = { [weak self] key in self?.key(key) }
        screen.onQuit = { [weak self] in self?.quit() }
        self.screen = screen
        screen.open()
        // Both sides start; if both invitations cross, the service keeps exactly one call.
        do {
            try self.service.startVoiceChat(withParticipantID: peerID)
        } catch GKVoiceChatServiceError.methodCurrentlyInvalidError where self.service.currentParticipantID == peerID {
            // The peer's invitation came first and was accepted: that is this call.
        } catch {
            self.chatEvent("Voice chat did not start: \(SessionVoiceClient.describe(error))")
        }
        let refresh = DispatchSource.makeTimerSource(queue: .main)
        refresh.schedule(deadline: .now() + 0.1, repeating: 0.1)
        refresh.setEventHandler { [weak self] in MainActor.assumeIsolated { self?.update() } }
        refresh.resume()
        self.refresh = refresh
    }

    nonisolated func peerPickerControllerDidCancel(_ picker: GKPeerPickerController) {
        MainActor.assumeIsolated { self.quit() }
    }

    private func key(_ key: Character) {
        switch key {
        case "m", "M": self.service.isMicrophoneMuted.toggle()
        case "+", "=": self.service.remoteParticipantVolume = min(1, self.service.remoteParticipantVolume + 0.1)
        case "-", "_": self.service.remoteParticipantVolume = max(0, self.service.remoteParticipantVolume - 0.1)
        case "q", "Q": self.hangUp()
        default: return
        }
        self.update()
    }

    private func chatEvent(_ event: String) {
        guard let screen = self.screen else { return }
        screen.announce()
        if event == "started" {
            screen.status.status = "Connected to \(screen.status.meters.first?.name ?? "the peer")"
            return
        }
        // The chat ended or never started: show why for a moment, then back to the picker.
        screen.status.status = event
        self.peerID = nil
        DispatchQueue.main.asyncAfter(deadline: .now() + 1.5) {
            MainActor.assumeIsolated {
                guard self.screen === screen, !self.quitting else { return }
                self.hangUp()
            }
        }
    }

    private func update() {
        guard let screen = self.screen else { return }
        var status = screen.status
        status.path = self.service.currentPath?.rawValue ?? "—"
        status.inputLevel = self.service.inputMeterLevel
        status.meters[0].level = self.service.outputMeterLevel
        status.muted = self.service.isMicrophoneMuted
        status.volume = self.service.remoteParticipantVolume
        screen.status = status
    }

    /// Ends the chat, then (once the hang-up has gone out over the session) the connection; back
    /// to the picker.
    private func hangUp() {
        if let peerID { self.service.stopVoiceChat(withParticipantID: peerID) }
        self.peerID = nil
        self.closeScreen()
        DispatchQueue.main.asyncAfter(deadline: .now() + 0.3) {
            MainActor.assumeIsolated {
                self.session.disconnectFromAllPeers()
                self.showPicker()
            }
        }
    }

    private func closeScreen() {
        self.refresh?.cancel()
        self.refresh = nil
        self.screen?.close()
        self.screen = nil
    }
}
