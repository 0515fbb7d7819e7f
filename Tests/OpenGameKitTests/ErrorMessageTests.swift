import Foundation
import GameKitDiscovery
import GameKitTransport
import Testing

@testable import OpenGameKit

/// Errors explain themselves: `localizedDescription` is a sentence naming what failed and why
/// (which peer, what size against what limit), bridged `NSError`s say the same, and the error
/// that caused one is kept (`NSUnderlyingErrorKey`).
@Suite("Error messages")
struct ErrorMessageTests {
    @Test func aCodeAloneStillExplainsItselfAndBridges() {
        let error = GKSessionError(.declinedError)
        #expect(error.localizedDescription == "The peer declined the connection.")
        #expect((error as NSError).localizedDescription == "The peer declined the connection.")
        #expect("\(error)" == "GKSessionDeclinedError (30502)")
        #expect(error.failureReason == "The peer declined the connection.")
    }

    @Test func theUnderlyingErrorIsKept() throws {
        let cause = TransportError.authenticationFailed
        let error = GKSessionError(.connectionFailedError, "No connection to Bob (7) could be opened.", underlying: cause)
        #expect(error.localizedDescription == "No connection to Bob (7) could be opened.")
        #expect(error.underlyingError as? TransportError == cause)
        let bridged = error as NSError
        #expect(bridged.domain == GKSessionErrorDomain && bridged.code == 30505)
        #expect(bridged.localizedDescription == "No connection to Bob (7) could be opened.")
        #expect(bridged.userInfo[NSUnderlyingErrorKey] as? TransportError == cause)
        // A message does not change what the error is.
        #expect(error == GKSessionError(.connectionFailedError))
    }

    @Test func lowerLayersErrorsAreSentencesToo() {
        #expect(TransportError.authenticationFailed.localizedDescription
            == "The handshake failed authentication: the two sides' passwords (pre-shared keys) differ.")
        #expect(TransportError.dataTooBig(size: 10, limit: 5).localizedDescription == "A message of 10 bytes is larger than the limit of 5 bytes.")
        #expect(DiscoveryError.shutDown.localizedDescription == "The discovery endpoint has been shut down.")
    }

    @Test func sendsSayWhatIsWrongWithWhat() async throws {
        let all = try await SessionLoopbackTests.sessions([("Server", .server), ("Client", .client)], answer: .deny)
        let (server, client) = (all[0], all[1])
        let serverID = server.session.peerID!
        func message(_ body: () throws -> Void) -> String? {
            do { try body() } catch { return error.localizedDescription }
            return nil
        }
        let data = Data("x".utf8)
        #expect(message { try client.session.send(data, toPeers: [], with: .reliable) } == "The list of peers to send to is empty.")
        #expect(message { try client.session.send(data, toPeers: ["Bob"], with: .reliable) }
            == "\"Bob\" is not a peer ID: peer IDs are decimal numbers, as peerID and peers(with:) give them.")
        #expect(message { try client.session.send(data, toPeers: [42], with: .reliable) } == "The list of peers holds a Int, not a peer ID string.")
        #expect(message { try client.session.send(data, toPeers: ["42"], with: .reliable) }
            == "No peer 42 is known to this session: it was never seen, or has left.")
        #expect(message { try client.session.send(data, toPeers: [client.session.peerID!], with: .reliable) }
            == "\(client.session.peerID!) is this session's own peer ID: a session does not send to itself.")
        #expect(message { try client.session.send(Data(count: GKSession.maximumUnreliableDataSize + 1), toPeers: [serverID], with: .unreliable) }
            == "\(GKSession.maximumUnreliableDataSize + 1) bytes is more than one unreliable send carries: at most \(GKSession.maximumUnreliableDataSize) (GKSession.maximumUnreliableDataSize).")
        #expect(await client.waitUntilSees(server.session))
        #expect(message { try client.session.send(data, toPeers: [serverID], with: .reliable) }
            == "Server (\(serverID)) is not connected: its state is available.")
        await #expect(performing: { try await client.session.write(toAllPeers: data, with: .reliable) }, throws: { error in
            error.localizedDescription == "No peer is connected: there is nobody to send to."
        })
        // A declined attempt, awaited and through the delegate.
        await #expect(performing: { try await client.session.connect(to: serverID) }, throws: { error in
            error.localizedDescription == "Server (\(serverID)) declined the connection."
        })
        #expect(await client.wait(for: .failed(serverID, .declinedError)))
        await client.session.close()
        await #expect(performing: { try await client.session.write(data, toPeers: [serverID], with: .reliable) }, throws: { error in
            error.localizedDescription == "The session is closed: make a new one to connect again."
        })
        await SessionLoopbackTests.close(all)
    }
}
