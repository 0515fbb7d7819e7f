import Foundation
import NetworkImpairment
import OpenGameKit
import Testing

/// Three or more peers in each mode, and a server with 64 clients.
@Suite("GKSession rooms")
struct SessionRoomTests {
    static func dataTexts(_ recorder: SessionRecorder, from peer: GKSession) -> [String] {
        recorder.events.compactMap { event in
            guard case .data(let source, let data) = event, source == peer.peerID else { return nil }
            return String(decoding: data, as: UTF8.self)
        }
    }

    @Test func threePeersInPeerModeConnectPairwiseAndBroadcast() async throws {
        let all = try await SessionLoopbackTests.sessions([("A", .peer), ("B", .peer), ("C", .peer)])
        let (a, b, c) = (all[0], all[1], all[2])
        #expect(await a.waitUntilSees(b.session))
        #expect(await a.waitUntilSees(c.session))
        a.session.connect(toPeer: b.session.peerID, withTimeout: 10)
        a.session.connect(toPeer: c.session.peerID, withTimeout: 10)
        #expect(await a.wait { $0.contains(.state(b.session.peerID, .stateConnected)) && $0.contains(.state(c.session.peerID, .stateConnected)) })
        #expect(Set(a.session.peers(with: .stateConnected) ?? []) == [b.session.peerID, c.session.peerID])
        try a.session.sendData(toAllPeers: Data("to all".utf8), with: .reliable)
        #expect(await b.wait(for: .data(a.session.peerID, Data("to all".utf8))))
        #expect(await c.wait(for: .data(a.session.peerID, Data("to all".utf8))))
        // disconnectPeer(fromAllPeers:) in a mesh: B is dropped by A, and B leaves everyone.
        b.session.connect(toPeer: c.session.peerID, withTimeout: 10)
        #expect(await c.wait(for: .state(b.session.peerID, .stateConnected)))
        a.session.disconnectPeer(fromAllPeers: b.session.peerID)
        #expect(await c.wait(for: .state(b.session.peerID, .stateDisconnected)))
        #expect(await b.wait { $0.contains(.state(a.session.peerID, .stateDisconnected)) && $0.contains(.state(c.session.peerID, .stateDisconnected)) })
        #expect(b.session.peers(with: .stateConnected) == nil)
        #expect(a.session.peers(with: .stateConnected) == [c.session.peerID])
        await SessionLoopbackTests.close(all)
    }

    @Test func threeClientsOfAServerReachEachOtherThroughIt() async throws {
        let all = try await SessionLoopbackTests.sessions([("S", .server), ("C1", .client), ("C2", .client), ("C3", .client)])
        let server = all[0]
        let clients = Array(all[1...])
        for client in clients {
            #expect(await client.waitUntilSees(server.session))
            client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
            #expect(await client.wait(for: .state(server.session.peerID, .stateConnected)))
        }
        for client in clients {
            for other in clients where other !== client {
                #expect(await client.wait(for: .state(other.session.peerID, .stateConnectedRelay)))
            }
            #expect(client.session.peers(with: .stateConnectedRelay)?.count == 2)
            // A client stops browsing once connected; the server does not browse at all.
            #expect(client.session.peers(with: .stateAvailable) == nil)
        }
        for client in clients {
            try client.session.sendData(toAllPeers: Data("from \(client.session.displayName)".utf8), with: .reliable)
        }
        try clients[0].session.send(Data("direct".utf8), toPeers: [clients[1].session.peerID], with: .unreliable)
        for receiver in all {
            for sender in clients where sender !== receiver {
                #expect(await receiver.wait(for: .data(sender.session.peerID, Data("from \(sender.session.displayName)".utf8))))
                #expect(receiver.count(.data(sender.session.peerID, Data("from \(sender.session.displayName)".utf8))) == 1)
            }
        }
        #expect(await clients[1].wait(for: .data(clients[0].session.peerID, Data("direct".utf8))))
        #expect(server.session.statistics.relayedMessages >= 6)

        // A client leaving: the others see it disconnected.
        clients[2].session.disconnectFromAllPeers()
        #expect(await clients[0].wait(for: .state(clients[2].session.peerID, .stateDisconnected)))
        #expect(await clients[1].wait(for: .state(clients[2].session.peerID, .stateDisconnected)))
        // The server going: everyone it relayed goes with it.
        await server.session.close()
        #expect(await clients[0].wait { $0.contains(.state(server.session.peerID, .stateDisconnected)) && $0.contains(.state(clients[1].session.peerID, .stateDisconnected)) })
        await SessionLoopbackTests.close(all)
    }

    @Test func threeClientsCanEachJoinOneOfTwoServers() async throws {
        let id = SessionLoopbackTests.uniqueID()
        let all = try await SessionLoopbackTests.sessions([("S1", .server), ("S2", .server), ("C1", .client), ("C2", .client), ("C3", .client)], id: id)
        let clients = Array(all[2...])
        for client in clients {
            #expect(await client.waitUntilSees(all[0].session))
            #expect(await client.waitUntilSees(all[1].session))
        }
        clients[0].session.connect(toPeer: all[0].session.peerID, withTimeout: 10)
        clients[1].session.connect(toPeer: all[1].session.peerID, withTimeout: 10)
        clients[2].session.connect(toPeer: all[1].session.peerID, withTimeout: 10)
        #expect(await all[1].wait { events in clients[1...].allSatisfy { events.contains(.state($0.session.peerID, .stateConnected)) } })
        #expect(await clients[1].wait(for: .state(clients[2].session.peerID, .stateConnectedRelay)))
        #expect(!clients[1].events.contains(.state(clients[0].session.peerID, .stateConnectedRelay)))
        await SessionLoopbackTests.close(all)
    }

    @Test func aServerWith64ClientsAllExchangingMessages() async throws {
        let count = 64
        let specs = [("Server", GKSessionMode.server)] + (1...count).map { ("Client \($0)", GKSessionMode.client) }
        let all = try await SessionLoopbackTests.sessions(specs)
        let server = all[0]
        let clients = Array(all[1...])
        for client in clients {
            #expect(await client.waitUntilSees(server.session, seconds: 30))
            client.session.connect(toPeer: server.session.peerID, withTimeout: 20)
        }
        let allConnected = await server.wait(seconds: 60) { events in clients.allSatisfy { events.contains(.state($0.session.peerID, .stateConnected)) } }
        let missing = clients.filter { !server.events.contains(.state($0.session.peerID, .stateConnected)) }
        try #require(allConnected, "not connected: \(missing.map { client in "\(client.session.displayName) heard \(client.events), \(client.diagnostics); the server heard \(server.events.filter { $0.peer == client.session.peerID }), \(server.diagnostics)" })")
        #expect(server.session.peers(with: .stateConnected)?.count == count)
        // One deadline for all: a missing relay entry costs one wait, not one per client.
        let deadline = ContinuousClock.now + .seconds(60)
        for client in clients {
            let seconds = max(0.1, Double((deadline - ContinuousClock.now).components.seconds))
            let relayed = await client.wait(seconds: seconds) { $0.filter { if case .state(_, .stateConnectedRelay) = $0 { true } else { false } }.count >= count - 1 }
            try #require(relayed, "\(client.session.displayName) heard \(client.events)")
        }
        // Everyone sends to everyone: the server directly, the clients through it.
        try await server.session.write(toAllPeers: Data("from Server".utf8), with: .reliable)
        for client in clients {
            try await client.session.write(toAllPeers: Data("from \(client.session.displayName)".utf8), with: .reliable)
        }
        for receiver in all {
            let expected = all.count - 1
            let arrived = await receiver.wait(seconds: 60) { events in
                events.filter { if case .data = $0 { true } else { false } }.count >= expected
            }
            #expect(arrived, "\(receiver.session.displayName) heard \(receiver.events.filter { if case .data = $0 { true } else { false } }.count)")
        }
        for receiver in clients.prefix(4) {
            for sender in all where sender !== receiver {
                #expect(Self.dataTexts(receiver, from: sender.session) == ["from \(sender.session.displayName)"])
            }
        }
        await SessionLoopbackTests.close(all)
    }
}
