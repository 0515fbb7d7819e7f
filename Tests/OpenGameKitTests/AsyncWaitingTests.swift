import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import OpenGameKit

/// The async face waits as Swift users expect: a write right after accepting waits for the
/// connection, connect and accept can be awaited, cancellation ends every wait at once, and a
/// closed session or nobody to send to fail clearly.
@Suite("GKSession async waits")
struct AsyncWaitingTests {
    /// The README's server: `write` at once after `acceptConnection`, before the link is open.
    @Test func aWriteRightAfterAcceptingWaitsForTheConnection() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .none)
        let (server, client) = (all[0], all[1])
        let requests = server.session.connectionRequests
        #expect(await client.waitUntilSees(server.session))
        client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
        var iterator = requests.makeAsyncIterator()
        let request = try #require(await iterator.next())
        try server.session.acceptConnection(fromPeer: request.peerID)
        #expect(server.session.peers(with: .stateConnected) == [])  // not yet: the write has to wait
        try await server.session.write(Data("welcome".utf8), toPeers: [request.peerID], with: .reliable)
        #expect(await client.wait(for: .data(server.session.peerID, Data("welcome".utf8))))
        await SessionLoopbackTests.close(all)
    }

    @Test func connectAndAcceptCanBeAwaited() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .none)
        let (server, client) = (all[0], all[1])
        let requests = server.session.connectionRequests
        #expect(await client.waitUntilSees(server.session))
        let accepting = Task {
            for await request in requests {
                try await server.session.accept(fromPeer: request.peerID)
                return request.peerID
            }
            return ""
        }
        try await client.session.connect(to: server.session.peerID)
        #expect(client.session.peers(with: .stateConnected) == [server.session.peerID!])
        #expect(try await accepting.value == client.session.peerID)
        #expect(server.session.peers(with: .stateConnected) == [client.session.peerID!])
        // Connected already: returns at once.
        try await client.session.connect(to: server.session.peerID)
        await SessionLoopbackTests.close(all)
    }

    @Test func anAwaitedConnectFailsWithTheAttemptsReason() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .deny)
        let (server, client) = (all[0], all[1])
        #expect(await client.waitUntilSees(server.session))
        await #expect(throws: GKSessionError(.declinedError)) { try await client.session.connect(to: server.session.peerID) }
        await #expect(throws: GKSessionError(.peerNotFoundError)) { try await client.session.connect(to: "12345") }
        await #expect(throws: GKSessionError(.peerNotFoundError)) { try await client.session.connect(to: "not a peer") }
        // A write waiting on an attempt that is declined fails with the same reason.
        client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
        await #expect(throws: GKSessionError(.declinedError)) {
            try await client.session.write(Data("x".utf8), toPeers: [server.session.peerID], with: .reliable)
        }
        await #expect(throws: GKSessionError(.peerNotFoundError)) { try await server.session.accept(fromPeer: client.session.peerID) }
        await SessionLoopbackTests.close(all)
    }

    /// A timeout bounds the awaited connect as it bounds Game Kit's (0 means none, as there).
    @Test func anAwaitedConnectTimesOut() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .none)
        let (server, client) = (all[0], all[1])
        #expect(await client.waitUntilSees(server.session))
        await #expect(throws: GKSessionError(.timedOutError)) { try await client.session.connect(to: server.session.peerID, timeout: 0.5) }
        await SessionLoopbackTests.close(all)
    }

    /// A peer that never answers: the awaited connect waits until its task is cancelled, then
    /// throws `CancellationError` and withdraws the attempt (the other side hears it cancelled).
    @Test func cancellingAnAwaitedConnectWithdrawsIt() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .none)
        let (server, client) = (all[0], all[1])
        #expect(await client.waitUntilSees(server.session))
        let peer = server.session.peerID!
        let connecting = Task { try await client.session.connect(to: peer) }
        #expect(await server.wait(for: .request(client.session.peerID, name: "Client")))
        connecting.cancel()
        await #expect(throws: CancellationError.self) { try await connecting.value }
        #expect(await server.wait(for: .failed(client.session.peerID, .cancelledError)))
        #expect(client.session.peers(with: .stateConnecting) == [])
        await SessionLoopbackTests.close(all)
    }

    /// A write waiting for a connection ends at once when cancelled (waits for room end the same
    /// way: one mechanism, `SessionCore.waitFor`).
    @Test func cancellingAWaitingWriteEndsItAtOnce() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .none)
        let (server, client) = (all[0], all[1])
        #expect(await client.waitUntilSees(server.session))
        let peer = server.session.peerID!
        client.session.connect(toPeer: peer, withTimeout: 0)
        #expect(await server.wait(for: .request(client.session.peerID, name: "Client")))
        let writing = Task { try await client.session.write(Data("x".utf8), toPeers: [peer], with: .reliable) }
        writing.cancel()
        await #expect(throws: CancellationError.self) { try await writing.value }
        // An already-cancelled task does not even try.
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await client.session.write(Data("y".utf8), toPeers: [peer], with: .reliable)
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        await SessionLoopbackTests.close(all)
    }

    @Test func aClosedSessionAndNobodyToSendToFailClearly() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .none)
        let (server, client) = (all[0], all[1])
        #expect(await client.waitUntilSees(server.session))
        await #expect(throws: GKSessionError(.notConnectedError)) { try await client.session.write(toAllPeers: Data("x".utf8), with: .reliable) }
        await #expect(throws: GKSessionError(.notConnectedError)) {
            try await client.session.write(Data("x".utf8), toPeers: [server.session.peerID], with: .reliable)
        }
        // A write waiting for a connection when the session closes.
        client.session.connect(toPeer: server.session.peerID, withTimeout: 0)
        #expect(await server.wait(for: .request(client.session.peerID, name: "Client")))
        let peer = server.session.peerID!
        let waiting = Task { try await client.session.write(Data("x".utf8), toPeers: [peer], with: .reliable) }
        for _ in 0..<200 where client.session.core.lock.withLock({ client.session.core.waiters.isEmpty }) {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        await client.session.close()
        await #expect(throws: GKSessionError(.notConnectedError)) { try await waiting.value }
        await #expect(throws: GKSessionError(.notConnectedError)) { try await client.session.connect(to: peer) }
        await #expect(throws: GKSessionError(.notConnectedError)) { try await client.session.write(toAllPeers: Data("x".utf8), with: .reliable) }
        await SessionLoopbackTests.close(all)
    }
}
