@_spi(Machine) import GameKitOnline
@testable @_spi(Machine) import GameKitTransport
import NIOCore
import NetworkImpairment
import Testing

@testable import OpenGameKit

/// The room code's secret part (PROTOCOL §18.2, §18.7): members prove it in every handshake, so
/// a rendezvous or relay that knows only the nameplate cannot answer in a member's name. In the
/// virtual world, all traffic through the relay.
@Suite("Rooms authenticated by their code")
struct RoomAuthenticationTests {
    /// A relay that sends Bob's datagrams for Alice to Mallory, and Mallory's answers to Bob as
    /// from Alice: it runs Bob's handshake with Mallory while Bob believes he is talking to
    /// Alice. Rewrites the peer ID of relayed datagrams (PROTOCOL §18.5) between Bob's address
    /// and the relay; counts what it diverted.
    final class SubstitutingRelay: @unchecked Sendable {
        let relay: SocketAddress
        let victim: SocketAddress
        let impersonated: UInt32
        let impostor: UInt32
        private(set) var diverted = 0

        init(relay: SocketAddress, victim: SocketAddress, impersonated: UInt32, impostor: UInt32) {
            (self.relay, self.victim, self.impersonated, self.impostor) = (relay, victim, impersonated, impostor)
        }

        func rewrite(_ datagram: inout VirtualDatagram<SocketAddress, SocketAddress>) -> Bool {
            guard datagram.bytes.getInteger(at: datagram.bytes.readerIndex, as: UInt8.self) == 15 else { return true }
            let at = datagram.bytes.readerIndex + 2
            let peer = datagram.bytes.getInteger(at: at, as: UInt32.self)
            if datagram.source == self.victim, datagram.destination == self.relay, peer == self.impersonated {
                datagram.bytes.setInteger(self.impostor, at: at)
                self.diverted += 1
            } else if datagram.source == self.relay, datagram.destination == self.victim, peer == self.impostor {
                datagram.bytes.setInteger(self.impersonated, at: at)
            }
            return true
        }
    }

    /// Alice (1) creates the room, Bob (2) and Mallory (3 in the room, the relay's accomplice,
    /// given `mallorySecret`, whose session claims to be Alice's peer 1) join it; the relay diverts Bob's traffic for Alice to Mallory; Bob
    /// connects to "Alice" and Mallory accepts whatever reaches her.
    static func substitution(mallorySecret: UInt32) throws -> (world: OnlineWorld, alice: Int, bob: Int, mallory: Int, relay: SubstitutingRelay) {
        var (world, a, b) = try OnlineWorldTests.pair(directPaths: false)
        let code = try #require(world.session(a).online.room.code)
        let m = world.addSession(
            "Mallory", peerID: 3, at: OnlineWorldTests.address("192.0.2.66", 6000), request: .join(code), directPaths: false, secret: mallorySecret,
            claimsToBe: 1)
        #expect(world.run(for: .seconds(5)) { $0.session(m).state(of: 2) == .stateAvailable && $0.session(b).state(of: 3) == .stateAvailable })
        let relay = SubstitutingRelay(relay: world.rendezvousAddress, victim: OnlineWorldTests.bob, impersonated: 1, impostor: 3)
        world.network.interceptor = { relay.rewrite(&$0) }
        world.act(on: b) { $0.session.connect(to: 1, timeout: .seconds(10)) }
        world.run(for: .seconds(3)) { $0.session(m).hasRequest(from: 2) }
        world.act(on: m) { try? $0.session.accept(2) }
        world.run(for: .seconds(12)) { $0.session(b).state(of: 1) == .stateConnected || $0.session(b).reported(.connectionFailed(1, .connectionFailedError)) }
        return (world, a, b, m, relay)
    }

    @Test func aRelayThatAnswersInAMembersNameWithoutTheCodeIsCaughtAtTheFirstHandshake() throws {
        let (world, alice, bob, mallory, relay) = try Self.substitution(mallorySecret: OnlineWorld.roomSecret ^ 1)
        #expect(relay.diverted > 0)
        // Bob's one attempt fails, and says why.
        #expect(world.session(bob).notifications.contains(.authenticationFailed(1)))
        #expect(world.session(bob).reported(.connectionFailed(1, .connectionFailedError)))
        #expect(world.session(bob).state(of: 1) != .stateConnected)
        // Mallory's transport answered one handshake and saw it fail; her session never saw a request.
        #expect(world.session(mallory).socket.endpoint.endpointStatistics.handshakeAuthenticationFailures == 1)
        #expect(!world.session(mallory).hasRequest(from: 2))
        // Alice was never asked.
        #expect(!world.session(alice).hasRequest(from: 2))
        let error = GKSessionError.connectionFailure(.connectionFailedError, peer: 1, name: "Alice", cause: .roomSecretMismatch)
        #expect(error.localizedDescription.contains("did not prove this room's code"))
        #expect(error.localizedDescription.contains("relay is answering in that peer's name"))
    }

    /// The control: the same relay with an accomplice who knows the whole code gets through,
    /// which is what the secret part prevents (and why it must never reach the servers).
    @Test func theSameSubstitutionSucceedsForOneWhoHasTheWholeCode() throws {
        let (world, alice, bob, mallory, relay) = try Self.substitution(mallorySecret: OnlineWorld.roomSecret)
        #expect(relay.diverted > 0)
        #expect(world.session(bob).state(of: 1) == .stateConnected, "Bob: \(world.session(bob).notifications); Mallory: \(world.session(mallory).notifications)")
        #expect(world.session(mallory).state(of: 2) == .stateConnected)
        #expect(!world.session(alice).hasRequest(from: 2))
    }

    /// The transport's password in a room: lv(secret) ‖ lv(session password), so that no secret
    /// and password run together into another pair's bytes.
    @Test func theRoomsHandshakePasswordIsTheSecretAndTheSessionPasswordEachWithItsLength() {
        #expect(SessionCore.roomKey(secret: 0x0AB_CDEF, password: Array("pw".utf8)) == [4, 0x00, 0xAB, 0xCD, 0xEF, 2, 0x70, 0x77])
        #expect(SessionCore.roomKey(secret: 1, password: nil) == [4, 0, 0, 0, 1, 0])
        #expect(SessionCore.roomKey(secret: 1, password: nil) != SessionCore.roomKey(secret: 1, password: [0]))
    }

    /// What the rendezvous is given: the nameplate, never the secret part.
    @Test func noDatagramToTheRendezvousCarriesTheSecretPart() throws {
        final class Capture: @unchecked Sendable { var sent: [ByteBuffer] = [] }
        let capture = Capture()
        var (world, _, _) = try OnlineWorldTests.pair(directPaths: false) { world in
            let rendezvous = world.rendezvousAddress
            world.network.interceptor = { datagram in
                if datagram.destination == rendezvous { capture.sent.append(datagram.bytes) }
                return true
            }
        }
        world.run(for: .seconds(3))
        let sent = capture.sent
        #expect(sent.count > 10)
        let secret = RoomInvitation.bytes(ofSecret: OnlineWorld.roomSecret)
        let leaked = sent.filter { datagram in
            let bytes = Array(datagram.readableBytesView)
            return bytes.count >= 4 && (0...(bytes.count - 4)).contains { Array(bytes[$0..<($0 + 4)]) == secret }
        }
        #expect(leaked.isEmpty)
    }
}
