import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import NetworkImpairment
import OpenGameKit

#if canImport(Glibc)
import Glibc
#endif

/// `gk-session`: one `GKSession` on the command line, printing one JSON line per delegate call
/// and received message, for multi-process tests and the session benchmark. Commands on
/// standard input: `send TEXT` (reliable, to every peer), `drop NAME` (disconnectPeer(fromAllPeers:)
/// by display name), `leave` (disconnectFromAllPeers), `unavailable`, `burst N PREFIX` (N reliable
/// messages PREFIX0 … PREFIX<N-1> to every peer), `quit`. Online (`--online`): a `room` line once
/// the room's code is known, `path` lines whenever the path to a connected peer changes.
@main
struct GKSessionTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-session",
        abstract: "Run a Game Kit session, printing its events as JSON lines."
    )

    @Option(help: "Session ID.")
    var sessionID: String = "gk-session"

    @Option(help: "Display name.")
    var name: String

    @Option(help: "server, client or peer.")
    var mode: String = "peer"

    @Option(help: "Session password.")
    var password: String?

    @Option(help: "Connect to the first available peer with this display name (\"any\": any peer).")
    var connect: String?

    @Option(help: "Connect timeout in seconds (0: none).")
    var connectTimeout: Double = 10

    @Option(help: "Answer connection requests: accept, deny or none.")
    var answer: String = "accept"

    @Flag(help: "Send every message received back to its sender.")
    var echo = false

    @Option(help: "On each connection (direct or through the server), send this text (reliable) to the new peer.")
    var greet: String?

    @Flag(help: "As a server, introduce clients to each other and relay between them.")
    var relay = false

    @Option(help: "Disconnect timeout in seconds.")
    var disconnectTimeout: Double = 20

    @Option(help: "Stop after this many seconds.")
    var seconds: Double = 30

    @Flag(help: "Do not stop at the end of standard input.")
    var ignoreStdin = false

    @Option(help: "Meet in an online room: 'new' creates one, a code joins it.")
    var online: String?

    @Option(help: "The rendezvous for --online: HOST:PORT, or several separated by commas (tried in turn).")
    var rendezvous: String = "127.0.0.1:7878"

    @Flag(help: "With --online: no multicast DNS on the local network.")
    var onlineOnly = false

    @Flag(help: "With --online: no direct paths, everything through the relay.")
    var noDirect = false

    @Option(help: "With --online: a TURN server, USER:PASSWORD@HOST[:PORT], one more way to members.")
    var turn: String?

    func validate() throws {
        guard ["server", "client", "peer"].contains(self.mode) else { throw ValidationError("--mode must be server, client or peer") }
        if let turn = self.turn, Self.turnServer(turn) == nil { throw ValidationError("--turn wants USER:PASSWORD@HOST[:PORT]") }
        guard ["accept", "deny", "none"].contains(self.answer) else { throw ValidationError("--answer must be accept, deny or none") }
    }

    /// `USER:PASSWORD@HOST[:PORT]` as a TURN server.
    static func turnServer(_ text: String) -> GKSession.Configuration.Online.TURNServer? {
        TURNArgument(text).map { .init(address: $0.address, username: $0.username, password: $0.password) }
    }

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        ToolLogging.bootstrap()
        let mode: GKSessionMode = self.mode == "server" ? .server : self.mode == "client" ? .client : .peer
        var configuration = GKSession.Configuration(relaysBetweenClients: self.relay)
        if let online = self.online {
            configuration.online = .init(
                rendezvous: self.rendezvous.split(separator: ",").map(String.init), room: online == "new" ? .create : .join(code: online), alsoNearby: !self.onlineOnly,
                directPaths: !self.noDirect)
            if let turn = self.turn.flatMap(Self.turnServer) { configuration.online!.turnServers = [turn] }
        }
        let session: GKSession = GKSession(
            sessionID: self.sessionID, displayName: self.name, sessionMode: mode, password: self.password,
            configuration: configuration)
        let agent = Agent(session: session, connect: self.connect, connectTimeout: self.connectTimeout, answer: self.answer, echo: self.echo, greet: self.greet)
        session.delegateQueue = agent.queue
        session.delegate = agent
        session.setDataReceiveHandler(agent, withContext: nil)
        session.disconnectTimeout = self.disconnectTimeout
        session.isAvailable = true
        JSONLines.line(["event": "started", "peer": session.peerID!, "name": self.name, "mode": self.mode])
        if self.online != nil {
            Task {
                do {
                    JSONLines.line(["event": "room", "code": try await session.waitForRoomCode()])
                } catch {
                    JSONLines.line(["event": "room-error", "reason": error.localizedDescription])
                }
            }
            agent.watchPaths()
        }
        // SIGINT, SIGTERM, SIGHUP and the end of input all say goodbye (PROTOCOL §14.8); a signal
        // then ends the process as the signal would have.
        let stop = StopCondition(signals: [])
        TerminationSignals.handle(on: .global()) { number in stop.fire(signal: number) }
        if !self.ignoreStdin {
            Thread.detachNewThread {
                while let line = readLine() {
                    agent.queue.sync { agent.command(line, stop: stop) }
                }
                stop.fire("end of input")
            }
        }
        let reason = await stop.wait(seconds: self.seconds)
        await session.close()
        JSONLines.line(["event": "stopped", "reason": stop.signal.map { "signal \($0)" } ?? reason, "statistics": [
            "malformed": session.statistics.malformedMessages,
            "refused": session.statistics.refusedRequests,
            "authentication_failures": session.statistics.authenticationFailures,
            "relayed": session.statistics.relayedMessages,
            "silent_peers": session.statistics.silentPeers,
            "link_moves": session.statistics.linkMoves,
        ]])
        if let signal = stop.signal { TerminationSignals.exit(as: signal) }
    }
}

/// The session's delegate and data handler, on its own queue.
final class Agent: GKSessionDelegate, GKSessionDataReceiveHandler, @unchecked Sendable {
    let queue = DispatchQueue(label: "gk-session")
    let session: GKSession
    let connectTarget: String?
    let connectTimeout: Double
    let answer: String
    let echo: Bool
    let greet: String?
    private var connectedOnce = false
    /// The path last reported for each connected peer (online sessions).
    private var paths: [String: GKSession.PeerPath] = [:]

    init(session: GKSession, connect: String?, connectTimeout: Double, answer: String, echo: Bool, greet: String?) {
        self.session = session
        self.connectTarget = connect
        self.connectTimeout = connectTimeout
        self.answer = answer
        self.echo = echo
        self.greet = greet
    }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        let name = session.displayName(forPeer: peerID) ?? ""
        var line: [String: Any] = ["event": "state", "peer": peerID, "name": name, "state": Self.name(of: state)]
        if state == .stateConnected, case .throughServer(let server)? = session.route(toPeer: peerID) { line["via"] = server }
        if state == .stateConnected, let path = session.path(forPeer: peerID) {
            line["path"] = "\(path)"
            line["verification"] = session.verificationCode(forPeer: peerID) ?? ""
            self.paths[peerID] = path
        }
        if state != .stateConnected { self.paths[peerID] = nil }
        JSONLines.line(line)
        if state == .stateAvailable, !self.connectedOnce, let target = self.connectTarget, target == "any" || target == name {
            self.connectedOnce = true
            session.connect(toPeer: peerID, withTimeout: self.connectTimeout)
        }
        if state == .stateConnected, let greet = self.greet {
            try? session.send(Data(greet.utf8), toPeers: [peerID], with: .reliable)
        }
    }

    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        JSONLines.line(["event": "request", "peer": peerID, "name": session.displayName(forPeer: peerID) ?? ""])
        switch self.answer {
        case "accept": try? session.acceptConnection(fromPeer: peerID)
        case "deny": session.denyConnection(fromPeer: peerID)
        default: break
        }
    }

    func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) {
        let code = (error as? GKSessionError)?.code.rawValue ?? -1
        JSONLines.line(["event": "failed", "peer": peerID, "name": session.displayName(forPeer: peerID) ?? "", "code": code])
    }

    func session(_ session: GKSession, didFailWithError error: Error) {
        JSONLines.line(["event": "error", "code": (error as? GKSessionError)?.code.rawValue ?? -1])
    }

    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        JSONLines.line(["event": "data", "peer": peer, "name": session.displayName(forPeer: peer) ?? "", "bytes": data.count,
                     "text": String(decoding: data.prefix(200), as: UTF8.self)])
        if self.echo { try? session.send(data, toPeers: [peer], with: .reliable) }
    }

    /// Reports, every 50 ms, connected peers whose path changed (on the queue).
    func watchPaths() {
        self.queue.asyncAfter(deadline: .now() + 0.05) { [weak self] in
            guard let self else { return }
            // Only peers whose connection this agent has reported: the session's own state runs
            // ahead of its delegate calls, and a path line must not come before the connected one.
            for peer in self.paths.keys.sorted() where self.session.peers(with: .stateConnected)?.contains(peer) == true {
                guard let path = self.session.path(forPeer: peer), self.paths[peer] != path else { continue }
                self.paths[peer] = path
                JSONLines.line(["event": "path", "peer": peer, "name": self.session.displayName(forPeer: peer) ?? "", "path": "\(path)"])
            }
            self.watchPaths()
        }
    }

    /// Runs one standard-input command (on the queue).
    func command(_ line: String, stop: StopCondition) {
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        guard let verb = parts.first else { return }
        let argument = parts.count > 1 ? parts[1] : ""
        switch verb {
        case "send":
            do {
                try self.session.sendData(toAllPeers: Data(argument.utf8), with: .reliable)
            } catch {
                JSONLines.line(["event": "send-error", "code": (error as? GKSessionError)?.code.rawValue ?? -1])
            }
        case "drop":
            if let peer = self.session.peers(with: .stateConnected).first(where: { self.session.displayName(forPeer: $0) == argument }) {
                self.session.disconnectPeer(fromAllPeers: peer)
            }
        case "leave":
            self.session.disconnectFromAllPeers()
        case "burst":
            let words = argument.split(separator: " ", maxSplits: 1).map(String.init)
            guard let count = words.first.flatMap({ Int($0) }), count >= 0 else {
                JSONLines.line(["event": "unknown-command", "line": line])
                return
            }
            let prefix = words.count > 1 ? words[1] : "m"
            for index in 0..<count {
                do {
                    try self.session.sendData(toAllPeers: Data("\(prefix)\(index)".utf8), with: .reliable)
                } catch {
                    JSONLines.line(["event": "send-error", "code": (error as? GKSessionError)?.code.rawValue ?? -1, "index": index])
                    return
                }
            }
            JSONLines.line(["event": "burst-sent", "count": count])
        case "unavailable":
            self.session.isAvailable = false
        case "quit":
            stop.fire("quit")
        default:
            JSONLines.line(["event": "unknown-command", "line": line])
        }
    }

    static func name(of state: GKPeerConnectionState) -> String {
        switch state {
        case .stateAvailable: "available"
        case .stateUnavailable: "unavailable"
        case .stateConnected: "connected"
        case .stateDisconnected: "disconnected"
        case .stateConnecting: "connecting"
        }
    }
}
