import Foundation
import GameKitTransport
import NIOCore
import NetworkImpairment
import Testing

@testable import OpenGameKit

/// The session's API edges: defaults, send errors, the async face, and a hostile peer.
@Suite("GKSession API")
struct SessionAPITests {
    @Test func defaultsComeFromTheExecutableAndTheHost() {
        let session: GKSession = GKSession(sessionID: nil, displayName: nil, sessionMode: .peer)
        #expect(session.sessionID == URL(fileURLWithPath: CommandLine.arguments[0]).lastPathComponent)
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count)
        #expect(session.displayName == String(decoding: host.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        #expect(UInt32(session.peerID) != nil && String(UInt32(session.peerID)!) == session.peerID)
        #expect(session.disconnectTimeout == 20)
        #expect(session.isAvailable == false)
        #expect(session.delegateQueue.label == DispatchQueue.main.label)
        #expect(session.peers(with: .stateAvailable) == [])
        #expect(session.peers(with: .stateConnected) == [])
        #expect(GKSession(sessionID: "x", displayName: "y", sessionMode: .server).peerID != session.peerID)
        session.disconnectTimeout = 2.5
        #expect(session.disconnectTimeout == 2.5)
    }

    @Test func errorsCarryGameKitsDomainAndCodes() {
        let error = GKSessionError(.declinedError) as NSError
        #expect(error.domain == GKSessionErrorDomain && error.code == 30502)
        #expect(GKSessionError.Code.allCases.map(\.rawValue) == [30500, 30501, 30502, 30503, 30504, 30505, 30506, 30507, 30508, 30509, 30510, 30201, 30202, 30203, 30204, 30205])
        #expect(GKSessionError.sendBufferFullError == .systemError)
    }

    @Test func sendsFailClearlyForBadPeerListsSizesAndPeersNotConnected() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)])
        let (server, client) = (all[0], all[1])
        let data = Data("x".utf8)
        #expect(throws: GKSessionError(.invalidParameterError)) { try client.session.send(data, toPeers: [], with: .reliable) }
        #expect(throws: GKSessionError(.invalidParameterError)) { try client.session.send(data, toPeers: ["not a number"], with: .reliable) }
        #expect(throws: GKSessionError(.peerNotFoundError)) { try client.session.send(data, toPeers: ["42"], with: .reliable) }
        #expect(await client.waitUntilSees(server.session))
        #expect(throws: GKSessionError(.notConnectedError)) { try client.session.send(data, toPeers: [server.session.peerID!], with: .unreliable) }
        #expect(throws: GKSessionError(.dataTooBigError)) {
            try client.session.send(Data(count: GKSession.maximumReliableDataSize + 1), toPeers: [server.session.peerID!], with: .reliable)
        }
        #expect(throws: GKSessionError(.dataTooBigError)) {
            try client.session.sendData(toAllPeers: Data(count: GKSession.maximumUnreliableDataSize + 1), with: .unreliable)
        }
        try client.session.sendData(toAllPeers: data, with: .reliable)  // nobody connected: nothing to do

        client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
        #expect(await server.wait(for: .state(client.session.peerID, .stateConnected)))
        // The largest sends go through: 1 MiB reliable, 96 KiB unreliable.
        let big = Data((0..<GKSession.maximumReliableDataSize).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try client.session.send(big, toPeers: [server.session.peerID!], with: .reliable)
        #expect(await server.wait(for: .data(client.session.peerID, big)))
        // Filling the send buffer: the non-waiting send reports it with its documented code.
        var full: GKSessionError?
        for _ in 0..<64 {
            do {
                try client.session.send(big, toPeers: [server.session.peerID!], with: .reliable)
            } catch let error as GKSessionError {
                full = error
                break
            }
        }
        #expect(full?.code == .systemError)
        await SessionLoopbackTests.close(all)
    }

    @Test func theAsyncFaceSeesWhatTheDelegateSees() async throws {
        try NetworkSandbox.requireIsolation()
        let id = SessionLoopbackTests.uniqueID()
        let server: GKSession = GKSession(sessionID: id, displayName: "Server", sessionMode: .server)
        let client: GKSession = GKSession(sessionID: id, displayName: "Client", sessionMode: .client)
        let requests = server.connectionRequests
        let serverMessages = server.messages
        let clientChanges = client.peerChanges
        try await server.start()
        server.isAvailable = true
        client.isAvailable = true
        let accepting = Task {
            for await request in requests {
                #expect(request.displayName == "Client")
                try server.acceptConnection(fromPeer: request.peerID)
                return request.peerID
            }
            return ""
        }
        // A bound, so that a run where discovery fails ends instead of waiting forever: closing
        // the sessions finishes their sequences.
        let bound = Task {
            try await Task.sleep(nanoseconds: 30_000_000_000)
            await client.close()
            await server.close()
        }
        defer { bound.cancel() }
        var states: [GKPeerConnectionState] = []
        for await change in clientChanges where change.peerID == server.peerID {
            states.append(change.state)
            #expect(change.displayName == "Server")
            if change.state == .stateAvailable { client.connect(toPeer: server.peerID, withTimeout: 10) }
            if change.state == .stateConnected { break }
        }
        #expect(states == [.stateAvailable, .stateConnecting, .stateConnected])
        #expect(try await accepting.value == client.peerID)
        // write waits for room instead of failing: 8 MiB through a 1 MiB send buffer.
        let chunk = Data(repeating: 0xAB, count: 512 << 10)
        for _ in 0..<16 { try await client.write(chunk, toPeers: [server.peerID!], with: .reliable) }
        var received = 0
        for await message in serverMessages {
            #expect(message.peerID == client.peerID && message.mode == .reliable && message.data == chunk)
            received += 1
            if received == 16 { break }
        }
        #expect(received == 16)
        await client.close()
        await server.close()
        // The sequences end with the session.
        for await _ in server.peerChanges { Issue.record("a closed session's sequence yielded") }
    }

    @Test func aDataHandlerClosureGetsTheDataToo() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)])
        let (server, client) = (all[0], all[1])
        let heard = AsyncStream.makeStream(of: String.self)
        server.session.setDataReceiveHandler { data, peer, session in
            heard.continuation.yield("\(session.displayName(forPeer: peer) ?? "?"): \(String(decoding: data, as: UTF8.self))")
        }
        #expect(await client.waitUntilSees(server.session))
        client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
        #expect(await client.wait(for: .state(server.session.peerID, .stateConnected)))
        try client.session.sendData(toAllPeers: Data("hi".utf8), with: .reliable)
        var iterator = heard.stream.makeAsyncIterator()
        #expect(await iterator.next() == "Client: hi")
        #expect(server.events.contains(.data(client.session.peerID, Data("hi".utf8))))  // the object handler too
        await SessionLoopbackTests.close(all)
    }

    @Test func garbageFromAConnectedPeerIsDroppedAndTheLinkStaysUp() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server)])
        let server = all[0]
        try await server.session.start()
        let port = try #require(server.session.core.transportPort)
        // A peer that speaks the transport but sends anything it likes.
        let mallory = try await TransportEndpoint.bind(host: "::1", port: 0) { _ in }
        let hello = SessionHello(sessionKey: SessionHello.sessionKey(for: server.session.sessionID), peerID: 7, mode: 1, displayName: "Mallory")
        let link = try await mallory.openLink(to: try SocketAddress(ipAddress: "::1", port: port), payload: hello.encode())
        #expect(await server.wait(for: .state("7", .stateConnected)))
        var random = SystemRandomNumberGenerator()
        for index in 0..<500 {
            var junk = ByteBuffer()
            junk.writeInteger(UInt8(index % 9))  // every type byte and a few unknown ones
            junk.writeBytes((0..<(index % 40)).map { _ in UInt8.random(in: 0...255, using: &random) })
            try await mallory.write(junk, on: link.id, mode: index % 2 == 0 ? .reliable : .unreliable)
        }
        var huge = ByteBuffer()
        huge.writeInteger(UInt8(1))
        huge.writeInteger(UInt16(1024))
        huge.writeRepeatingByte(0xFF, count: 50_000)  // a roster claiming 1024 peers with long names
        try await mallory.write(huge, on: link.id)
        var relay = ByteBuffer()
        relay.writeInteger(UInt8(4))
        relay.writeInteger(UInt16(2))
        relay.writeInteger(UInt32(99))  // nobody
        relay.writeInteger(UInt32(7))  // itself
        relay.writeString("loop")
        try await mallory.write(relay, on: link.id)
        try await mallory.write(SessionMessage.data(ByteBuffer(string: "still here")).encode(), on: link.id)
        #expect(await server.wait(for: .data("7", Data("still here".utf8))))
        #expect(server.session.statistics.malformedMessages > 0)
        #expect(server.session.statistics.relayDropped >= 2)
        #expect(server.session.peers(with: .stateConnected) == ["7"])
        await mallory.shutdown()
        await SessionLoopbackTests.close(all)
    }

    @Test func aWrongPasswordNeverReachesTheDelegate() async throws {
        let id = SessionLoopbackTests.uniqueID()
        let server = try await SessionLoopbackTests.sessions([("Server", .server)], id: id, password: "alpha")[0]
        let client = try await SessionLoopbackTests.sessions([("Client", .client)], id: id, password: "beta")[0]
        #expect(await client.waitUntilSees(server.session))
        client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
        #expect(await client.wait(for: .failed(server.session.peerID, .connectionFailedError)))
        #expect(!server.events.contains { if case .request = $0 { true } else { false } })
        #expect(await server.wait { _ in server.session.statistics.authenticationFailures >= 1 })
        await server.session.close()
        await client.session.close()
    }
}
