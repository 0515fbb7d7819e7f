import Foundation
import OpenGameKit

/// The application: the picker until a peer is connected, then the chat, then the picker again.
@MainActor
final class ChatApp: GKPeerPickerControllerDelegate, GKSessionDelegate {
    private var session: GKSession
    /// A new session like the first (for each online room the picker tries).
    private let makeSession: @MainActor () -> GKSession
    private let mode: GKChat.ChatMode
    private let picker = GKPeerPickerController()
    private var chat: ChatScreen?
    private var finished: CheckedContinuation<Void, Never>?
    private var quitting = false

    /// `rendezvous`: offer online rooms in the picker, on these rendezvous.
    init(mode: GKChat.ChatMode, inviteTimeout: Double, rendezvous: [String]? = nil, makeSession: @escaping @MainActor () -> GKSession) {
        self.session = makeSession()
        self.makeSession = makeSession
        self.mode = mode
        self.picker.invitationTimeout = inviteTimeout
        if let rendezvous {
            self.picker.connectionTypesMask = [.nearby, .online]
            self.picker.rendezvous = rendezvous
        }
    }

    /// Runs until the user quits.
    func run() async {
        await withCheckedContinuation { continuation in
            self.finished = continuation
            if self.mode == .server {
                self.openRoom()
            } else {
                self.showPicker()
            }
        }
    }

    func quit() {
        guard !self.quitting else { return }
        self.quitting = true
        self.picker.dismiss()
        self.chat?.close()
        self.chat = nil
        self.session.setDataReceiveHandler(nil)
        self.session.disconnectFromAllPeers()
        Task {
            await self.session.close()
            self.finished?.resume()
            self.finished = nil
        }
    }

    // MARK: - Picker

    private func showPicker() {
        guard !self.quitting else { return }
        self.session.delegate = nil
        self.picker.delegate = self
        self.picker.show()
    }

    // The picker calls its delegate on the main queue.
    nonisolated func peerPickerController(_ picker: GKPeerPickerController, sessionFor type: GKPeerPickerConnectionType) -> GKSession {
        MainActor.assumeIsolated {
            // The picker puts an online choice in a room before the session starts, so each room
            // tried gets a new session; so does nearby after a room that failed. A session in a
            // room stays for the next showing.
            if type == .online || (self.session.isOnline && self.session.roomCode == nil) {
                let old = self.session
                self.session = self.makeSession()
                Task { await old.close() }
            }
            return self.session
        }
    }

    nonisolated func peerPickerController(_ picker: GKPeerPickerController, didSelect type: GKPeerPickerConnectionType) {
        // Asked once: after a chat the picker goes back to the same session's peers.
        MainActor.assumeIsolated { picker.connectionTypesMask = .nearby }
    }

    nonisolated func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession) {
        MainActor.assumeIsolated {
            self.openChat()
            self.chat?.system("Connected to \(session.displayName(forPeer: peerID) ?? peerID)\(self.pathNote(peerID))")
            // In a room, the server's other members are already known.
            for member in session.peers(with: .stateConnected) ?? [] where session.route(toPeer: member) != .direct {
                self.chat?.system("\(session.displayName(forPeer: member) ?? member) is here")
            }
        }
    }

    nonisolated func peerPickerControllerDidCancel(_ picker: GKPeerPickerController) {
        MainActor.assumeIsolated { self.quit() }
    }

    // MARK: - Chat

    /// A server's room: no picker, everyone is accepted.
    private func openRoom() {
        self.openChat()
        self.session.isAvailable = true
        self.chat?.system("Room \"\(self.session.sessionID!)\" open as \(self.session.displayName!); waiting for clients")
        if self.session.isOnline {
            Task { @MainActor in
                do {
                    let code = try await self.session.waitForRoomCode()
                    self.chat?.system("Online room \(code): clients join with 'gk-chat --mode client --online \(code)'")
                } catch {
                    self.chat?.system("Not online: \(error.localizedDescription)")
                }
            }
        }
    }

    /// " (relayed, verification ABCD-EFGH)" for an online peer: the path, and the code both
    /// players can compare.
    private func pathNote(_ peerID: String) -> String {
        guard self.session.isOnline, let path = self.session.path(forPeer: peerID) else { return "" }
        let code = self.session.verificationCode(forPeer: peerID).map { "; verification code \($0): compare it with theirs" } ?? ""
        return " (\(path)\(code))"
    }

    private func openChat() {
        let screen = ChatScreen.make(title: "gk-chat — \(self.session.displayName!)")
        screen.onLine = { [weak self] line in self?.typed(line) }
        screen.onQuit = { [weak self] in self?.quit() }
        self.chat = screen
        self.session.delegate = self
        self.session.setDataReceiveHandler { data, peerID, session in
            let text = String(decoding: data, as: UTF8.self)
            let name = session.displayName(forPeer: peerID) ?? peerID
            DispatchQueue.main.async { MainActor.assumeIsolated { self.chat?.message(from: name, text) } }
        }
        screen.open()
    }

    private func typed(_ line: String) {
        switch line {
        case "/quit":
            self.quit()
        case "/leave":
            self.leave()
        case "":
            break
        default:
            do {
                try self.session.sendData(toAllPeers: Data(line.utf8), with: .reliable)
                self.chat?.message(from: self.session.displayName, line)
            } catch {
                self.chat?.system("Not sent: \(error)")
            }
        }
    }

    /// Back to the picker (a server's room stays open).
    private func leave() {
        guard self.mode != .server else {
            self.chat?.system("The server keeps the room open; /quit closes it")
            return
        }
        self.session.disconnectFromAllPeers()
        self.backToPicker()
    }

    private func backToPicker() {
        self.chat?.close()
        self.chat = nil
        self.session.setDataReceiveHandler(nil)
        self.showPicker()
    }

    // MARK: - Session events while chatting

    nonisolated func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        DispatchQueue.main.async {
            MainActor.assumeIsolated { self.peer(peerID, changedTo: state) }
        }
    }

    nonisolated func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                // A server's room takes everyone; a chatting peer is busy.
                if self.mode == .server {
                    try? self.session.acceptConnection(fromPeer: peerID)
                } else {
                    self.session.denyConnection(fromPeer: peerID)
                }
            }
        }
    }

    private func peer(_ peerID: String, changedTo state: GKPeerConnectionState) {
        guard let chat = self.chat else { return }
        let name = self.session.displayName(forPeer: peerID) ?? peerID
        switch state {
        case .stateConnected:
            chat.system("\(name) joined\(self.pathNote(peerID))")
        case .stateDisconnected:
            chat.system("\(name) left")
            if self.mode != .server, self.session.peers(with: .stateConnected).isEmpty { self.backToPicker() }
        default:
            break
        }
    }
}
