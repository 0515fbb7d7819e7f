import Foundation
import Logging
import NIOConcurrencyHelpers
import NetworkImpairment
import Testing

@testable import OpenGameKit

/// What a user debugging "why don't we see each other?" gets from the logs: the session logs
/// peers seen, requests, states and failures through its configuration's logger, its transport
/// logs through the same logger, and the tools take their level from OGK_LOG_LEVEL.
@Suite("Logging")
struct LoggingTests {
    /// Every event logged, kept.
    final class Captured: @unchecked Sendable {
        let events = NIOLockedValueBox<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>([])

        func logger(_ label: String) -> Logger {
            Logger(label: label) { _ in Handler(store: self) }
        }

        /// A session configuration that logs here.
        var sessionConfiguration: GKSession.Configuration {
            var configuration = GKSession.Configuration()
            configuration.logger = self.logger("test.session")
            return configuration
        }

        func messages(at level: Logger.Level, where metadata: (Logger.Metadata) -> Bool = { _ in true }) -> [String] {
            self.events.withLockedValue { $0 }.filter { $0.level == level && metadata($0.metadata) }.map(\.message)
        }

        struct Handler: LogHandler {
            let store: Captured
            var logLevel: Logger.Level = .trace
            var metadata: Logger.Metadata = [:]
            var metadataProvider: Logger.MetadataProvider?

            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { self.metadata[key] }
                set { self.metadata[key] = newValue }
            }

            func log(event: LogEvent) {
                let merged = self.metadata.merging(event.metadata ?? [:]) { $1 }
                self.store.events.withLockedValue { $0.append((event.level, "\(event.message)", merged)) }
            }
        }
    }

    @Test func theSessionAndItsTransportLogAConnectionAtDebug() async throws {
        try NetworkSandbox.requireIsolation()
        let captured = Captured()
        let id = SessionLoopbackTests.uniqueID()
        let configuration = captured.sessionConfiguration
        let server = SessionRecorder(GKSession(sessionID: id, displayName: "Server", sessionMode: .server, configuration: configuration))
        let client = SessionRecorder(GKSession(sessionID: id, displayName: "Client", sessionMode: .client, configuration: configuration))
        server.session.isAvailable = true
        client.session.isAvailable = true
        #expect(await client.waitUntilSees(server.session))
        client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
        #expect(await server.wait(for: .state(client.session.peerID, .stateConnected)))
        // The client browses (a server only advertises): it logs the server seen, then both
        // log the other connected.
        let clientSession = "Client (\(client.session.peerID!))"
        let serverSession = "Server (\(server.session.peerID!))"
        let from: (String) -> (Logger.Metadata) -> Bool = { name in { $0["session"].map { "\($0)" } == name } }
        let about: (String) -> (Logger.Metadata) -> Bool = { name in { $0["peer"].map { "\($0)" } == name } }
        #expect(captured.messages(at: .debug, where: from(serverSession)).contains("started"))
        let seen = captured.messages(at: .debug, where: { from(clientSession)($0) && about(serverSession)($0) })
        #expect(seen.contains("peer seen"))
        let connected = captured.messages(at: .debug, where: { from(serverSession)($0) && about(clientSession)($0) && $0["state"] == "connected" })
        #expect(connected == ["peer state"])
        let requests = captured.messages(at: .debug, where: { from(serverSession)($0) && about(clientSession)($0) })
        #expect(requests.contains("connection request"))
        #expect(captured.messages(at: .debug, where: { $0["layer"] == "transport" }).contains("link opened"))
        #expect(captured.messages(at: .warning).isEmpty)
        await server.session.close()
        await client.session.close()
    }

    /// A program whose delegate queue never runs (here: suspended; usually a main queue nobody
    /// runs) is told so once, at warning, instead of silently connecting nothing.
    @Test func aDelegateQueueThatNeverRunsIsReported() async throws {
        try NetworkSandbox.requireIsolation()
        let captured = Captured()
        let id = SessionLoopbackTests.uniqueID()
        let configuration = captured.sessionConfiguration
        let server = SessionRecorder(GKSession(sessionID: id, displayName: "Server", sessionMode: .server))
        let stuck = DispatchQueue(label: "never runs")
        stuck.suspend()
        let client: GKSession = GKSession(sessionID: id, displayName: "Client", sessionMode: .client, configuration: configuration)
        let delegate = SessionRecorder(client)  // sets its own queue: set the stuck one after
        client.delegateQueue = stuck
        server.session.isAvailable = true
        client.isAvailable = true
        var warnings: [String] = []
        for _ in 0..<300 where warnings.isEmpty {  // at most 15 s; the warning comes after 5
            try await Task.sleep(nanoseconds: 50_000_000)
            warnings = captured.messages(at: .warning)
        }
        #expect(warnings.count == 1)
        #expect(warnings.first?.hasPrefix("The delegate queue has not run for 5 s") == true)
        stuck.resume()
        await client.close()
        await server.session.close()
        #expect(captured.messages(at: .warning).count == 1)  // once
        withExtendedLifetime(delegate) {}
    }

    @Test func theToolsLevelComesFromTheEnvironment() throws {
        #expect(try ToolLogging.level(in: [:]).get() == .warning)
        #expect(try ToolLogging.level(in: ["OGK_LOG_LEVEL": "debug"]).get() == .debug)
        #expect(try ToolLogging.level(in: ["OGK_LOG_LEVEL": "TRACE"]).get() == .trace)
        guard case .failure(let error) = ToolLogging.level(in: ["OGK_LOG_LEVEL": "loud"]) else {
            Issue.record("loud is no level")
            return
        }
        #expect("\(error)" == "OGK_LOG_LEVEL=loud is not a log level (trace, debug, info, notice, warning, error, critical); using warning")
    }

    /// gk-session with OGK_LOG_LEVEL=debug tells on standard error what it sees; without it, it
    /// says nothing there; with a value that is no level, it says so and goes on.
    @Test func gkSessionLogsAtTheLevelTheEnvironmentNames() async throws {
        let result = try await SandboxScript.run("""
            d=$(mktemp -d)
            OGK_LOG_LEVEL=debug timeout 20 gk-session --session-id logs --name Loud --seconds 4 --ignore-stdin < /dev/null > /dev/null 2> $d/loud &
            OGK_LOG_LEVEL=loud timeout 20 gk-session --session-id logs --name Wrong --seconds 4 --ignore-stdin < /dev/null > /dev/null 2> $d/wrong &
            timeout 20 gk-session --session-id logs --name Quiet --seconds 4 --ignore-stdin < /dev/null > /dev/null 2> $d/quiet &
            wait
            grep -c 'peer seen' $d/loud | sed 's/^/L /'
            sed 's/^/W /' $d/wrong
            wc -l < $d/quiet | sed 's/^/Q /'
            rm -rf $d
            """, timeout: 60)
        #expect(Int(result.lines(tagged: "L").first ?? "") ?? 0 >= 2, "\(result.lines)")
        #expect(result.lines(tagged: "W") == ["OGK_LOG_LEVEL=loud is not a log level (trace, debug, info, notice, warning, error, critical); using warning"])
        #expect(result.lines(tagged: "Q") == ["0"])
    }
}
