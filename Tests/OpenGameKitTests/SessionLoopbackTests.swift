import Foundation
import NetworkImpairment
import OpenGameKit
import Testing

/// Sessions in one process over the sandbox's loopback: real discovery, real transport.
@Suite("GKSession over loopback")
struct SessionLoopbackTests {
    /// A session ID of its own per test, so that concurrent tests never see each other.
    static func uniqueID(_ name: String = #function) -> String {
        "t\(UInt32.random(in: 0...UInt32.max))-\(name.prefix(20))"
    }

    @Test func aClientFindsAServerConnectsAndTheyExchangeData() async throws {
        try NetworkSandbox.requireIsolation()
        let id = Self.uniqueID()
        let server = SessionRecorder(GKSession(sessionID: id, displayName: "Server", sessionMode: .server))
        let client = SessionRecorder(GKSession(sessionID: id, displayName: "Client", sessionMode: .client))
        server.session.isAvailable = true
        client.session.isAvailable = true
        #expect(await client.waitUntilSees(server.session))
        client.session.connect(toPeer: server.session.peerID, withTimeout: 10)
        #expect(await client.wait(for: .state(server.session.peerID, .stateConnected)))
        #expect(await server.wait(for: .state(client.session.peerID, .stateConnected)))
        #expect(server.events.contains(.request(client.session.peerID, name: "Client")))
        try client.session.send(Data("hello".utf8), toPeers: [server.session.peerID], with: .reliable)
        #expect(await server.wait(for: .data(client.session.peerID, Data("hello".utf8))))
        try server.session.sendData(toAllPeers: Data("welcome".utf8), with: .reliable)
        #expect(await client.wait(for: .data(server.session.peerID, Data("welcome".utf8))))
        #expect(server.receivedContexts.allSatisfy { $0 == server.context })
        client.session.disconnectFromAllPeers()
        #expect(await server.wait(for: .state(client.session.peerID, .stateDisconnected)))
        await client.session.close()
        await server.session.close()
    }
}
