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
        abstract: "Chat with peers on the local network, or in an online room (the Game Kit lecture's demo).",
        discussion: """
            Online: start gk-rendezvous somewhere everyone can reach, then one player runs \
            'gk-chat --online --rendezvous HOST:PORT' and tells the others the room code it shows; \
            they run 'gk-chat --online CODE --rendezvous HOST:PORT'. With --rendezvous alone, the \
            picker offers Nearby or Online and asks for the room. Once connected, both screens \
            show the connection's verification code: read it to each other; if both see the same, \
            nobody is in between.
            """)

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

    /// `--online`, `--rendezvous` (alone: the picker offers online rooms on it), `--online-only`.
    @OptionGroup var online: OnlineArguments

    func validate() throws {
        if self.online.rendezvous != nil, !self.online.isOnline, self.mode != .peer {
            throw ValidationError("--rendezvous without --online offers rooms in the picker, which only --mode peer shows: give --online too")
        }
    }

    /// `--online` may stand without its code: it then means a new room.
    static func main() async {
        await OnlineArguments.main(Self.self)
    }

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
        var configuration = GKSession.Configuration(
            interfaceNames: self.interface.isEmpty ? nil : self.interface, relaysBetweenClients: self.mode == .server)
        let rendezvous = self.online.rendezvousAddresses()
        if self.online.isOnline {
            let room: GKSession.Configuration.Online.Room = self.online.joinCode.map { .join(code: $0) } ?? .create
            configuration.online = .init(rendezvous: rendezvous, room: room, alsoNearby: !self.online.onlineOnly)
        }
        let app = ChatApp(
            mode: self.mode, inviteTimeout: self.inviteTimeout, rendezvous: !self.online.isOnline && self.online.rendezvous != nil ? rendezvous : nil
        ) { [sessionID, name, mode, password] in
            GKSession(sessionID: sessionID, displayName: name, sessionMode: mode.sessionMode, password: password, configuration: configuration)
        }
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
