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
        #expect(Set(a.session.peers(with: .stateConnected) ?? []) == [b.session.peerID!, c.session.peerID!])
        try a.session.sendData(toAllPeers: Data("to all".utf8), with: .reliable)
        #expect(await b.wait(for: .data(a.session.peerID, Data("to all".utf8))))
        #expect(await c.wait(for: .data(a.session.peerID, Data("to all".utf8))))
        // disconnectPeer(fromAllPeers:) in a mesh: B is dropped by A, and B leaves everyone.
        b.session.connect(toPeer: c.session.peerID, withTimeout: 10)
        #expect(await c.wait(for: .state(b.session.peerID, .stateConnected)))
        a.session.disconnectPeer(fromAllPeers: b.session.peerID)
        #expect(await c.wait(for: .state(b.session.peerID, .stateDisconnected)))
        #expect(await b.wait { $0.contains(.state(a.session.peerID, .stateDisconnected)) && $0.contains(.state(c.session.peerID, .stateDisconnected)) })
        #expect(b.session.peers(with: .stateConnected) == [])
        #expect(a.session.peers(with: .stateConnected) == [c.session.peerID!])
        await SessionLoopbackTests.close(all)
    }

    @Test func threeClientsOfAServerReachEachOtherThroughIt() async throws {
        let all = try await SessionLoopbackTests.sessions([("S", .server), ("C1", .client), ("C2", .client), ("C3", .client)], relays: true)
        let server = all[0]
        let clients = Array(all[1...])
        for client in clients {
            #expect(await client.waitUntilSees(server.session))
            client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
            #expect(await client.wait(for: .state(server.session.peerID, .stateConnected)))
        }
        for client in clients {
            for other in clients where other !== client {
                #expect(await client.wait(for: .state(other.session.peerID, .stateConnected)))
                #expect(client.session.route(toPeer: other.session.peerID) == .throughServer(server.session.peerID))
            }
            #expect(client.session.peers(with: .stateConnected).count == 3)
            #expect(client.session.route(toPeer: server.session.peerID) == .direct)
            // Clients do not advertise, and the one server is connected: nobody is available.
            #expect(client.session.peers(with: .stateAvailable) == [])
        }
        for client in clients {
            try client.session.sendData(toAllPeers: Data("from \(client.session.displayName!)".utf8), with: .reliable)
        }
        try clients[0].session.send(Data("direct".utf8), toPeers: [clients[1].session.peerID!], with: .unreliable)
        for receiver in all {
            for sender in clients where sender !== receiver {
                #expect(await receiver.wait(for: .data(sender.session.peerID, Data("from \(sender.session.displayName!)".utf8))))
                #expect(receiver.count(.data(sender.session.peerID, Data("from \(sender.session.displayName!)".utf8))) == 1)
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
        let all = try await SessionLoopbackTests.sessions(
            [("S1", .server), ("S2", .server), ("C1", .client), ("C2", .client), ("C3", .client)], id: id, relays: true)
        let clients = Array(all[2...])
        for client in clients {
            #expect(await client.waitUntilSees(all[0].session))
            #expect(await client.waitUntilSees(all[1].session))
        }
        clients[0].session.connect(toPeer: all[0].session.peerID, withTimeout: 10)
        clients[1].session.connect(toPeer: all[1].session.peerID, withTimeout: 10)
        clients[2].session.connect(toPeer: all[1].session.peerID, withTimeout: 10)
        #expect(await all[1].wait { events in clients[1...].allSatisfy { events.contains(.state($0.session.peerID, .stateConnected)) } })
        #expect(await clients[1].wait(for: .state(clients[2].session.peerID, .stateConnected)))
        #expect(clients[1].session.route(toPeer: clients[2].session.peerID) == .throughServer(all[1].session.peerID))
        #expect(!clients[1].events.contains(.state(clients[0].session.peerID, .stateConnected)))
        await SessionLoopbackTests.close(all)
    }

    @Test func connectedSessionsStayVisibleWhileAvailableAndHideWhenNot() async throws {
        // The reference: while available a session is visible by its mode, connected or not;
        // unavailable, it stays connected but is no longer visible.
        let id = SessionLoopbackTests.uniqueID()
        let all = try await SessionLoopbackTests.sessions([("A", .peer), ("B", .peer), ("S1", .server), ("S2", .server), ("K", .client)], id: id)
        let (a, b, s1, s2, k) = (all[0], all[1], all[2], all[3], all[4])
        #expect(await a.waitUntilSees(b.session))
        a.session.connect(toPeer: b.session.peerID, withTimeout: 10)
        #expect(await b.wait(for: .state(a.session.peerID, .stateConnected)))
        // A newcomer finds the connected pair available.
        let late = try await SessionLoopbackTests.sessions([("D", .peer)], id: id)[0]
        #expect(await late.waitUntilSees(a.session))
        #expect(await late.waitUntilSees(b.session))
        // A hides; it stays connected to B.
        a.session.isAvailable = false
        #expect(await late.wait(for: .state(a.session.peerID, .stateUnavailable)))
        #expect(a.session.peers(with: .stateConnected) == [b.session.peerID!])
        #expect(b.session.peers(with: .stateConnected) == [a.session.peerID!])
        // A client connected to one server still sees the other, and may join it too.
        #expect(await k.waitUntilSees(s1.session))
        k.session.connect(toPeer: s1.session.peerID, withTimeout: 10)
        #expect(await k.wait(for: .state(s1.session.peerID, .stateConnected)))
        #expect(await k.waitUntilSees(s2.session))
        #expect(k.session.peers(with: .stateAvailable).contains(s2.session.peerID!))
        k.session.connect(toPeer: s2.session.peerID, withTimeout: 10)
        #expect(await k.wait(for: .state(s2.session.peerID, .stateConnected)))
        #expect(Set(k.session.peers(with: .stateConnected)) == [s1.session.peerID!, s2.session.peerID!])
        await SessionLoopbackTests.close(all + [late])
    }

    @Test func aServerWith64ClientsAllExchangingMessages() async throws {
        let count = 64
        let specs = [("Server", GKSessionMode.server)] + (1...count).map { ("Client \($0)", GKSessionMode.client) }
        let all = try await SessionLoopbackTests.sessions(specs, relays: true)
        let server = all[0]
        let clients = Array(all[1...])
        for client in clients {
            #expect(await client.waitUntilSees(server.session, seconds: 30))
            client.session.connect(toPeer: server.session.peerID, withTimeout: 20)
        }
        let allConnected = await server.wait(seconds: 60) { events in clients.allSatisfy { events.contains(.state($0.session.peerID, .stateConnected)) } }
        let missing = clients.filter { !server.events.contains(.state($0.session.peerID, .stateConnected)) }
        try #require(allConnected, "not connected: \(missing.map { client in "\(client.session.displayName!) heard \(client.events), \(client.diagnostics); the server heard \(server.events.filter { $0.peer == client.session.peerID }), \(server.diagnostics)" })")
        #expect(server.session.peers(with: .stateConnected)?.count == count)
        // One deadline for all: a missing relay entry costs one wait, not one per client.
        let deadline = ContinuousClock.now + .seconds(60)
        for client in clients {
            let seconds = max(0.1, Double((deadline - ContinuousClock.now).components.seconds))
            let relayed = await client.wait(seconds: seconds) { $0.filter { if case .state(_, .stateConnected) = $0 { true } else { false } }.count >= count }
            try #require(relayed, "\(client.session.displayName!) heard \(client.events)")
        }
        // Everyone sends to everyone: the server directly, the clients through it.
        try await server.session.write(toAllPeers: Data("from Server".utf8), with: .reliable)
        for client in clients {
            try await client.session.write(toAllPeers: Data("from \(client.session.displayName!)".utf8), with: .reliable)
        }
        for receiver in all {
            let expected = all.count - 1
            let arrived = await receiver.wait(seconds: 60) { events in
                events.filter { if case .data = $0 { true } else { false } }.count >= expected
            }
            #expect(arrived, "\(receiver.session.displayName!) heard \(receiver.events.filter { if case .data = $0 { true } else { false } }.count)")
        }
        for receiver in clients.prefix(4) {
            for sender in all where sender !== receiver {
                #expect(Self.dataTexts(receiver, from: sender.session) == ["from \(sender.session.displayName!)"])
            }
        }
        await SessionLoopbackTests.close(all)
    }
}
