import Foundation
import NetworkImpairment
import OpenGameKit
import Testing

/// The Game Kit surface in the shape Swift gives Apple's: error structs with codes, C enums with
/// the reference's cases, open `NSObject` subclasses, implicitly unwrapped results, and nil
/// arguments (Objective-C's nil) refused clearly.
@Suite("Game Kit's Swift shapes")
struct GameKitShapeTests {
    @Test func errorsAreStructsWithGameKitsCodesThatCatchPatternsMatch() {
        let error = GKSessionError(.declinedError)
        #expect(error.code == .declinedError && error.errorCode == 30502)
        #expect("\(error)" == "GKSessionDeclinedError (30502)")
        let bridged = error as NSError
        #expect(bridged.domain == GKSessionErrorDomain && bridged.code == 30502)
        #expect(error.localizedDescription == "The peer declined the connection.")
        #expect((GKSessionError(.systemError, userInfo: [NSLocalizedDescriptionKey: "full"]) as NSError).localizedDescription == "full")
        #expect(GKSessionError(.systemError, userInfo: ["why": "full"]) == GKSessionError(.systemError))
        #expect(GKSessionError.sendBufferFullError == .systemError)

        func failing(_ code: GKSessionError.Code) throws { throw GKSessionError(code) }
        var caught: [String] = []
        for code in [GKSessionError.Code.dataTooBigError, .declinedError, .unknownError] {
            do {
                try failing(code)
            } catch GKSessionError.dataTooBigError {
                caught.append("too big")
            } catch let error as GKSessionError where error.code == .declinedError {
                caught.append("declined")
            } catch {
                caught.append("other")
            }
        }
        #expect(caught == ["too big", "declined", "other"])
        // An NSError of the domain matches by code, as a bridged Game Kit error does.
        #expect(GKSessionError.cancelledError ~= NSError(domain: GKSessionErrorDomain, code: 30504))
        #expect(!(GKSessionError.cancelledError ~= NSError(domain: "elsewhere", code: 30504)))
        // Each code explains itself, in a sentence of its own.
        let explanations = GKSessionError.Code.allCases.map { GKSessionError($0).localizedDescription }
        #expect(Set(explanations).count == GKSessionError.Code.allCases.count)
        #expect(!explanations.contains { $0.contains("could not be completed") })
    }

    @Test func theEnumsAreCEnumsWithExactlyTheReferencesCases() {
        #expect(GKPeerConnectionState.allCases.map(\.rawValue) == [0, 1, 2, 3, 4])
        #expect(GKSessionMode.allCases.map(\.rawValue) == [0, 1, 2])
        #expect(GKSendDataMode.allCases.map(\.rawValue) == [0, 1])
        let raw: Int32 = GKPeerConnectionState.stateConnecting.rawValue
        #expect(GKPeerConnectionState(rawValue: raw) == .stateConnecting && GKPeerConnectionState(rawValue: 5) == nil)
        // Game Kit code switches over the five states without a default.
        func word(_ state: GKPeerConnectionState) -> String {
            switch state {
            case .stateAvailable: "available"
            case .stateUnavailable: "unavailable"
            case .stateConnected: "connected"
            case .stateDisconnected: "disconnected"
            case .stateConnecting: "connecting"
            }
        }
        #expect(GKPeerConnectionState.allCases.map(word) == GKPeerConnectionState.allCases.map(\.description))
    }

    @Test func theClassesAreOpenNSObjectsThatApplicationsMaySubclass() throws {
        let alice: GKSession = GKSession(sessionID: "shapes", displayName: "Alice", sessionMode: .peer)
        let bob: GKSession = GKSession(sessionID: "shapes", displayName: "Bob", sessionMode: .server)
        #expect(alice.isEqual(alice) && !alice.isEqual(bob) && alice.hash == alice.hash)
        #expect(Set<NSObject>([alice, bob, alice]).count == 2)
        #expect(alice.description == "<GKSession Alice (peer \(alice.peerID!)) sessionID shapes, mode peer, unavailable>")

        final class Renaming: GKSession, @unchecked Sendable {
            override func displayName(forPeer peerID: String!) -> String! {
                peerID == self.peerID ? "Me" : super.displayName(forPeer: peerID)
            }
        }
        let renaming: GKSession = try #require(Renaming(sessionID: "shapes", displayName: "Carol", sessionMode: .peer))
        #expect(renaming.displayName(forPeer: renaming.peerID) == "Me")
        #expect(renaming.displayName(forPeer: "12") == nil)
        #expect(GKPeerPickerController().isEqual(GKPeerPickerController()) == false)
    }

    @Test func implicitlyUnwrappedResultsReadAsGameKitCodeReadsThem() {
        let session: GKSession = GKSession(sessionID: "shapes", displayName: "Alice", sessionMode: .peer)
        let name: String = session.displayName(forPeer: session.peerID)
        #expect(name == "Alice")
        #expect("\(session.displayName(forPeer: session.peerID)!) joined" == "Alice joined")
        var listed = 0
        for _ in session.peers(with: .stateConnected) { listed += 1 }
        #expect(listed == 0)
        #expect(session.peers(with: .stateAvailable) == [])
        let made: GKSession? = GKSession(sessionID: nil, displayName: nil, sessionMode: .client)
        #expect(made != nil)
    }

    @Test func nilArgumentsAreRefusedWithGameKitsCodes() async throws {
        try NetworkSandbox.requireIsolation()
        let session: GKSession = GKSession(sessionID: SessionLoopbackTests.uniqueID(), displayName: "Alice", sessionMode: .peer)
        let recorder = SessionRecorder(session)
        #expect(session.displayName(forPeer: nil) == nil)
        #expect(throws: GKSessionError(.peerNotFoundError)) { try session.acceptConnection(fromPeer: nil) }
        #expect(throws: GKSessionError(.invalidParameterError)) { try session.send(nil, toPeers: ["1"], with: .reliable) }
        #expect(throws: GKSessionError(.invalidParameterError)) { try session.send(Data(), toPeers: nil, with: .reliable) }
        #expect(throws: GKSessionError(.invalidParameterError)) { try session.send(Data(), toPeers: [42], with: .reliable) }
        #expect(throws: GKSessionError(.invalidParameterError)) { try session.sendData(toAllPeers: nil, with: .reliable) }
        // An array of strings of any kind names peers, as the reference's NSArray of NSStrings.
        #expect(throws: GKSessionError(.peerNotFoundError)) { try session.send(Data(), toPeers: [NSString(string: "42")], with: .reliable) }
        let optional: String? = "42"
        #expect(throws: GKSessionError(.peerNotFoundError)) { try session.send(Data(), toPeers: [optional as Any], with: .reliable) }
        session.cancelConnect(toPeer: nil)
        session.denyConnection(fromPeer: nil)
        session.disconnectPeer(fromAllPeers: nil)
        session.connect(toPeer: nil, withTimeout: 1)
        #expect(await recorder.wait(for: .failed("0", .peerNotFoundError)))
        await session.close()
    }
}
