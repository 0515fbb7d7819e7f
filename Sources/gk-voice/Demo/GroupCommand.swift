import ArgumentParser
import Foundation
import NetworkImpairment
import OpenGameKit
import OpenGameKitVoice

/// `gk-voice group`: joins everyone of the session nearby (or in an online room) and talks with
/// them all at once (`GKGroupVoiceChat`). The screen lists the participants with their meters,
/// who is speaking and who is the active speaker; m mutes, q or Ctrl-C leaves.
struct GroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group", abstract: "Group voice: everyone of the session nearby (or in an online room) in one call.")

    @Option(help: "The session ID: only peers with the same one meet.")
    var sessionID = "gk-voice-group"

    @OptionGroup var session: SessionOptions

    @OptionGroup var devices: AudioOptions

    @MainActor
    func run() async throws {
        ToolLogging.bootstrap()
        let session: GKSession = GKSession(
            sessionID: self.sessionID, displayName: self.session.name, sessionMode: .peer, configuration: self.session.configuration())
        // A member whose program dies leaves the others' call within 5 s.
        session.disconnectTimeout = 5
        var chatConfiguration = GKGroupVoiceChat.Configuration()
        chatConfiguration.audio = try self.devices.audio()
        let app = GroupApp(session: session, chat: GKGroupVoiceChat(session: session, configuration: chatConfiguration))
        // SIGINT, SIGTERM and SIGHUP leave as q does: the others are told, then the process
        // ends as the signal would have ended it.
        TerminationSignals.handle { _ in MainActor.assumeIsolated { app.quit() } }
        if let seconds = self.session.seconds {
            DispatchQueue.main.asyncAfter(deadline: .now() + seconds) { MainActor.assumeIsolated { app.quit() } }
        }
        try await app.run()
        if let signal = TerminationSignals.received { TerminationSignals.exit(as: signal) }
    }
}

/// The group screen's state and the session's wiring: connects to every peer it sees (of each
/// pair, the smaller peer ID asks), accepts every request, and shows the call.
@MainActor
final class GroupApp {
    private let session: GKSession
    private let chat: GKGroupVoiceChat
    private let screen = VoiceScreen()
    private var refresh: DispatchSourceTimer?
    private var tasks: [Task<Void, Never>] = []
    private var finished: CheckedContinuation<Void, Never>?
    private var quitting = false

    init(session: GKSession, chat: GKGroupVoiceChat) {
        self.session = session
        self.chat = chat
    }

    func run() async throws {
        let session = self.session
        let changes = session.peerChanges, requests = session.connectionRequests, events = self.chat.events
        session.isAvailable = true
        self.tasks.append(Task { for await request in requests { try? session.acceptConnection(fromPeer: request.peerID) } })
        self.tasks.append(Task {
            for await change in changes where change.state == .stateAvailable && session.peerID < change.peerID {
                try? await session.connect(to: change.peerID, timeout: 10)
            }
        })
        self.tasks.append(Task { @MainActor [weak self] in
            for await event in events { self?.show(event) }
        })
        try self.chat.start()
        self.screen.status = VoiceStatus(
            title: "gk-voice group — \(session.displayName!)", status: self.roomLine(), help: "m mute · q leave · Ctrl-C quit")
        self.screen.onKey = { [weak self] key in self?.key(key) }
        self.screen.onQuit = { [weak self] in self?.quit() }
        self.screen.open()
        let refresh = DispatchSource.makeTimerSource(queue: .main)
        refresh.schedule(deadline: .now() + 0.1, repeating: 0.1)
        refresh.setEventHandler { [weak self] in MainActor.assumeIsolated { self?.update() } }
        refresh.resume()
        self.refresh = refresh
        await withCheckedContinuation { self.finished = $0 }
    }

    func quit() {
        guard !self.quitting else { return }
        self.quitting = true
        self.refresh?.cancel()
        self.screen.close()
        // Leaving tells the participants; withdrawn and disconnected after, the session closes.
        self.chat.stop()
        self.session.isAvailable = false
        self.tasks.forEach { $0.cancel() }
        Task {
            try? await Task.sleep(nanoseconds: 200_000_000)  // the leave goes out
            self.session.disconnectFromAllPeers()
            await self.session.close()
            self.finished?.resume()
            self.finished = nil
        }
    }

    private func key(_ key: Character) {
        switch key {
        case "m", "M": self.chat.isMicrophoneMuted.toggle()
        case "q", "Q": self.quit()
        default: return
        }
        self.update()
    }

    private func name(_ peerID: String) -> String {
        peerID == self.session.peerID ? "You" : (self.session.displayName(forPeer: peerID) ?? peerID)
    }

    private func roomLine() -> String {
        let count = self.chat.participants.count
        let room = self.session.roomCode.map { " · room \($0)" } ?? ""
        return count == 0 ? "Waiting for others\(room)…" : "In the call with \(count) other\(count == 1 ? "" : "s")\(room)"
    }

    /// Events also go out as lines when the output is not a terminal (scripts read them).
    private func show(_ event: GKGroupVoiceChat.Event) {
        // Leaving removes everyone here: not news to the one who left.
        guard !self.quitting else { return }
        let line: String
        switch event {
        case .participantJoined(let peerID): line = "\(self.name(peerID)) joined"
        case .participantLeft(let peerID): line = "\(self.name(peerID)) left"
        case .activeSpeakerChanged(let peerID?): line = "\(self.name(peerID)) speaking"
        case .stopped(let error?): line = "Stopped: \(error.localizedDescription)"
        default: return
        }
        if !TerminalScreen.isInteractive { TerminalScreen.shared.write("group: \(line)\n") }
        self.screen.announce()
        self.update()
        if case .stopped(.some) = event { self.quit() }
    }

    private func update() {
        guard !self.quitting else { return }
        var status = self.screen.status
        status.status = self.roomLine()
        status.inputLevel = self.chat.inputLevel
        status.muted = self.chat.isMicrophoneMuted
        let speakers = self.chat.speakers, active = self.chat.activeSpeaker
        status.meters = self.chat.participants.map { peerID in
            let mark = peerID == active ? "◀ active" : speakers.contains(peerID) ? "speaking" : ""
            return .init(name: self.name(peerID), level: self.chat.level(ofParticipant: peerID) ?? -120, mark: mark)
        }
        self.screen.status = status
    }
}
