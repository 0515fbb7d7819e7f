import ArgumentParser
import Foundation
import OpenGameKit
import NetworkImpairment

/// gk-chat: the chat demo of the lecture notes. The peer picker finds and connects a peer; then a
/// chat screen; a disconnect brings the picker back. `--mode server|client` makes a room of more
/// than two: the server accepts everyone and relays, clients pick the server.
@main
struct GKChat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-chat",
        abstract: "Chat with peers on the local network (the Game Kit lecture's demo).")

    @Option(help: "Your display name (default: the host name).")
    var name: String?

    @Option(help: "The session ID: only peers with the same one meet.")
    var sessionID = "gk-chat"

    @Option(help: "A password every member must give.")
    var password: String?

    @Option(help: "A network interface to use (repeatable; default: all, or OGK_INTERFACES).")
    var interface: [String] = []

    @Option(help: "peer (two people, the picker), server (a room: accepts everyone) or client (joins a server).")
    var mode: ChatMode = .peer

    @Option(help: "Seconds an invitation waits for an answer.")
    var inviteTimeout: Double = 30

    @Option(help: "Quit after this many seconds (for scripts).")
    var seconds: Double?

    enum ChatMode: String, ExpressibleByArgument, CaseIterable {
        case peer, server, client

        var sessionMode: GKSessionMode {
            switch self {
            case .peer: .peer
            case .server: .server
            case .client: .client
            }
        }
    }

    @MainActor
    func run() async throws {
        ToolLogging.bootstrap()
        let session: GKSession = GKSession(
            sessionID: self.sessionID, displayName: self.name, sessionMode: self.mode.sessionMode, password: self.password,
            configuration: GKSession.Configuration(
                interfaceNames: self.interface.isEmpty ? nil : self.interface, relaysBetweenClients: self.mode == .server))
        let app = ChatApp(session: session, mode: self.mode, inviteTimeout: self.inviteTimeout)
        // Ctrl-C (outside the chat screen, which reads it as a key), `kill` and a closed terminal
        // quit as /quit does: the peers are told and the advertisement withdrawn; then the process
        // ends as the signal would have ended it.
        TerminationSignals.handle { _ in MainActor.assumeIsolated { app.quit() } }
        if let seconds = self.seconds {
            DispatchQueue.main.asyncAfter(deadline: .now() + seconds) { MainActor.assumeIsolated { app.quit() } }
        }
        await app.run()
        if let signal = TerminationSignals.received { TerminationSignals.exit(as: signal) }
    }
}
