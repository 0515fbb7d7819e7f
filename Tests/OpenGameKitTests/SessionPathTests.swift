import NIOCore
import Testing

@testable import GameKitTransport
@testable import OpenGameKit

/// A peer seen at several addresses (several interfaces, IPv4 and IPv6, or an address that has
/// just gone away): one attempt tries them all at once, the responder's application sees one
/// request, and exactly one connection or one failure results on each side.
@Suite("Session machine: connecting over several addresses")
struct SessionPathTests {
    /// Alice and Bob in peer mode; Alice sees Bob at `addresses(net, bob)`.
    static func pair(_ addresses: (SessionTestNetwork, TestPeer) -> [SocketAddress]) -> (SessionTestNetwork, TestPeer, TestPeer) {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        net.start()
        net.sight(alice, bob, at: addresses(net, bob))
        net.drain()
        return (net, alice, bob)
    }

    /// Alice's attempt to Bob over two addresses that both reach him, delivered.
    static func twoPathsDelivered() -> (SessionTestNetwork, TestPeer, TestPeer) {
        let (net, alice, bob) = Self.pair { net, bob in [net.address(of: bob), net.addAddress(of: bob)] }
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        return (net, alice, bob)
    }

    @Test func aDeadAddressFirstDoesNotStopTheAttempt() throws {
        let (net, alice, bob) = Self.pair { net, bob in [SessionTestNetwork.nowhere, net.address(of: bob)] }
        net[alice].connect(to: 2, timeout: nil)
        #expect(net[alice].peers[2]?.outgoing?.links.count == 2)
        net.deliver()
        #expect(net.notes(bob) == [changed(alice, .stateConnecting), .connectionRequest(1)])
        try net[bob].accept(1)
        net.deliver()
        #expect(net.notes(alice) == [changed(bob, .stateConnecting), changed(bob, .stateConnected)])
        #expect(net.notes(bob) == [changed(alice, .stateConnected)])
        // The path to nowhere was withdrawn: Alice's transport holds only the open link.
        #expect(net.linkEnds(of: alice) == Set(net.links(from: alice, to: bob)))
        net.expectConsistent()
    }

    /// A connected peer's link is given every address discovery lists for the peer, again when
    /// they change, so that it can move if its own stops working (PROTOCOL §14.9).
    @Test func aConnectedPeersLinkKnowsItsOtherAddressesAsDiscoveryChangesThem() throws {
        let (net, alice, bob) = Self.twoPathsDelivered()
        try net[bob].accept(1)
        net.deliver()
        let link = try #require(net[alice].peers[2]?.link)
        let both = [net.address(of: bob), net.addAddress(of: bob)]
        net.sight(alice, bob, at: both)
        net.drain()
        #expect(net.alternates[link] == both)
        let third = net.addAddress(of: bob)
        net.sight(alice, bob, at: both + [third])
        net.drain()
        #expect(net.alternates[link] == both + [third])
        net.expectConsistent()
    }

    @Test func twoPathsThatBothArriveMakeOneRequestAndOneConnection() throws {
        let (net, alice, bob) = Self.twoPathsDelivered()
        #expect(net.notes(bob) == [changed(alice, .stateConnecting), .connectionRequest(1)])
        #expect(net[bob].peers[1]?.incoming?.alternates.count == 1)
        net.expectConsistent()
        try net[bob].accept(1)
        net.deliver()
        #expect(net.denials == [SessionDenyReason.duplicate.rawValue])
        #expect(net.notes(alice) == [changed(bob, .stateConnecting), changed(bob, .stateConnected)])
        #expect(net.notes(bob) == [changed(alice, .stateConnected)])
        #expect(net.links(from: alice, to: bob).count == 1)
        #expect(net[bob].statistics.refusedRequests == 0)
        net.expectConsistent()
    }

    @Test func denyingAnAttemptOfTwoPathsFailsItOnce() {
        let (net, alice, bob) = Self.twoPathsDelivered()
        net.drain()
        net[bob].deny(1)
        net.deliver()
        #expect(net.denials == [SessionDenyReason.declined.rawValue, SessionDenyReason.declined.rawValue])
        #expect(net.notes(alice) == [.connectionFailed(2, .declinedError), changed(bob, .stateAvailable)])
        #expect(net.notes(bob) == [changed(alice, .stateAvailable)])
        net.expectConsistent()
    }

    @Test func cancellingAnAttemptOfTwoPathsFailsEachSideOnce() {
        let (net, alice, bob) = Self.twoPathsDelivered()
        net.drain()
        net[alice].cancelConnect(to: 2)
        net.deliver()
        #expect(net.notes(alice) == [.connectionFailed(2, .cancelledError), changed(bob, .stateAvailable)])
        #expect(net.notes(bob) == [.connectionFailed(1, .cancelledError), changed(alice, .stateAvailable)])
        net.expectConsistent()
    }

    @Test func whenEveryPathTimesOutTheAttemptFailsOnce() {
        let (net, alice, bob) = Self.pair { _, _ in [SessionTestNetwork.nowhere, try! SocketAddress(ipAddress: "192.0.2.2", port: 9)] }
        net[alice].connect(to: 2, timeout: .seconds(5))
        net.deliver()
        net.timeOutUnanswered(from: alice)
        net.deliver()
        #expect(net.notes(alice) == [changed(bob, .stateConnecting), .connectionFailed(2, .timedOutError), changed(bob, .stateAvailable)])
        #expect(net.linkEnds(of: alice).isEmpty)
        net.expectConsistent()
    }

    @Test func aPathThatExpiresAtTheResponderLeavesTheRequestOnTheOther() throws {
        let (net, alice, bob) = Self.twoPathsDelivered()
        net.drain()
        net.withdrawPath(0, from: alice, to: bob, .expired)
        net.deliver()
        #expect(net.notes(alice) == [])
        #expect(net.notes(bob) == [])
        #expect(net[bob].peers(in: .stateConnecting) == [1])
        net.expectConsistent()
        try net[bob].accept(1)
        net.deliver()
        #expect(net.notes(alice) == [changed(bob, .stateConnected)])
        #expect(net.notes(bob) == [changed(alice, .stateConnected)])
        net.expectConsistent()
    }

    @Test func aLateSecondPathAfterTheAcceptIsAnsweredDuplicate() throws {
        let (net, alice, bob) = Self.pair { net, bob in [net.address(of: bob), net.addAddress(of: bob)] }
        net[alice].connect(to: 2, timeout: nil)
        net.deliverNext()  // only the first path's request has arrived
        try net[bob].accept(1)
        net.deliver()
        #expect(net.denials == [SessionDenyReason.duplicate.rawValue])
        #expect(net.notes(alice) == [changed(bob, .stateConnecting), changed(bob, .stateConnected)])
        #expect(net.notes(bob) == [changed(alice, .stateConnecting), .connectionRequest(1), changed(alice, .stateConnected)])
        #expect(net[bob].statistics.refusedRequests == 1)
        net.expectConsistent()
    }

    /// A path held up on the way (its first datagram lost, say) can reach the responder after
    /// the attempt has ended there: it is refused "duplicate", not shown as a second request.
    @Test(arguments: [0, 1] as [UInt32])
    func aLatePathOfAnAttemptThatEndedIsNotShownAgain(olderBy: UInt32) {
        let (net, alice, bob) = Self.pair { net, bob in [net.address(of: bob)] }
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        net.drain()
        net[alice].cancelConnect(to: 2)
        net.deliver()
        #expect(net.notes(bob) == [.connectionFailed(1, .cancelledError), changed(alice, .stateAvailable)])
        let hello = SessionHello(sessionKey: SessionHello.sessionKey(for: "chess"), peerID: 1, mode: 2, attempt: net[alice].lastAttempt &- olderBy, displayName: "Alice")
        net.injectRequest(hello.encode(), from: alice, to: bob)
        net.deliver()
        #expect(net.denials == [SessionDenyReason.duplicate.rawValue])
        #expect(net.notes(bob) == [])
        // Alice's next attempt is a request like any other.
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        #expect(net.notes(bob) == [changed(alice, .stateConnecting), .connectionRequest(1)])
    }

    @Test func aNewAttemptWhileOneIsPendingIsStillRefusedInProgress() {
        let (net, alice, bob) = Self.pair { net, bob in [net.address(of: bob)] }
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        net.drain()
        // Another program claiming Alice's ID, with another attempt number.
        let hello = SessionHello(sessionKey: SessionHello.sessionKey(for: "chess"), peerID: 1, mode: 2, attempt: 99, displayName: "Alice")
        net.injectRequest(hello.encode(), from: alice, to: bob)
        net.deliver()
        #expect(net.denials == [SessionDenyReason.inProgress.rawValue])
        #expect(net.notes(bob) == [])
        #expect(net[bob].peers[1]?.incoming?.alternates == [])
    }
}
