import NIOCore
import Testing

@testable import GameKitTransport
@testable import OpenGameKit

@Suite("Session machine over an in-memory transport")
struct SessionMachineTests {
    // MARK: - 1. Discovery

    @Test func availabilityGivesEachModeItsDiscovery() {
        let net = SessionTestNetwork()
        let server = net.add("Server", 10, .server)
        let client = net.add("Client", 20, .client)
        let peer = net.add("Peer", 30, .peer)
        for session in [server, client, peer] { net[session].setAvailable(true) }
        #expect(net.commands(server) == [.advertise])
        #expect(net.commands(client) == [.startBrowsing])
        #expect(net.commands(peer) == [.advertise, .startBrowsing])
        net[peer].setAvailable(true)
        #expect(net.commands(peer) == [])
        for session in [server, client, peer] { net[session].setAvailable(false) }
        #expect(net.commands(server) == [.withdraw])
        #expect(net.commands(client) == [.stopBrowsing])
        #expect(net.commands(peer) == [.withdraw, .stopBrowsing])
        for session in [server, client, peer] { #expect(net.notes(session) == []) }
        net[peer].discoveryFailed()
        #expect(net.notes(peer) == [.failed(.cannotEnableError)])
    }

    @Test func goingUnavailableReportsSightedPeersUnavailableAndForgetsThem() {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let server = net.add("Server", 10, .server)
        net[alice].setAvailable(true)
        net.drain()
        net.sight(alice, bob)
        net.sight(alice, server)
        #expect(net.notes(alice) == [changed(bob, .stateAvailable), changed(server, .stateAvailable)])
        #expect(net[alice].peers(in: .stateAvailable) == [2, 10])

        net[alice].setAvailable(false)
        #expect(net.commands(alice) == [.withdraw, .stopBrowsing])
        #expect(unordered(net.notes(alice)) == unordered([changed(bob, .stateUnavailable), changed(server, .stateUnavailable)]))
        #expect(net[alice].peers(in: .stateAvailable) == [])
        #expect(net[alice].peers(in: .stateUnavailable) == [])
        #expect(net[alice].peers.isEmpty)
        #expect(net[alice].displayName(of: 2) == "Bob")  // names outlive the peers

        // Not browsing: sightings are ignored.
        net.sight(alice, bob)
        #expect(net.notes(alice) == [])
        #expect(net[alice].state(of: 2) == nil)
    }

    @Test func busyPeersAreNotAvailable() {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let carol = net.add("Carol", 3, .peer)
        net[alice].setAvailable(true)
        net.drain()

        net.sight(alice, bob, busy: true)
        #expect(net.notes(alice) == [])
        #expect(net[alice].peers(in: .stateAvailable) == [])
        #expect(net[alice].peers(in: .stateUnavailable) == [2])
        net.sight(alice, bob)
        #expect(net.notes(alice) == [changed(bob, .stateAvailable)])
        net.sight(alice, bob, busy: true)
        #expect(net.notes(alice) == [changed(bob, .stateUnavailable)])
        net[alice].peerLost(2)
        #expect(net.notes(alice) == [])
        #expect(net[alice].state(of: 2) == nil)

        net.sight(alice, carol)
        net[alice].peerLost(3)
        #expect(net.notes(alice) == [changed(carol, .stateAvailable), changed(carol, .stateUnavailable)])

        // Its own advertisement, and one without an address, are ignored.
        net.sight(alice, alice)
        net[alice].peerSighted(4, displayName: "Dave", addresses: [], isBusy: false)
        #expect(net.notes(alice) == [])
        #expect(net[alice].state(of: 1) == nil)
        #expect(net[alice].state(of: 4) == nil)
        #expect(net[alice].peers.isEmpty)
    }

    @Test func aConnectedPeerStaysVisibleWhileAvailableAndHidesWhenUnavailable() throws {
        // The reference: available, a session is visible by its mode, connected or not;
        // unavailable, it keeps its connections but is no longer visible.
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let carol = net.add("Carol", 3, .peer)
        net.start()
        try net.establish(alice, bob)
        #expect(net.commands(alice) == [] && net.commands(bob) == [])
        #expect(net.notes(carol) == [])
        #expect(net[carol].peers(in: .stateAvailable) == [1, 2])
        net[alice].setAvailable(false)
        #expect(net.commands(alice) == [.withdraw, .stopBrowsing])
        #expect(net[alice].state(of: 2) == .stateConnected)
        net[carol].peerLost(alice.peerID)  // its goodbye
        #expect(net.notes(carol) == [changed(alice, .stateUnavailable)])
        net[alice].setAvailable(true)
        #expect(net.commands(alice) == [.advertise, .startBrowsing])
        #expect(net[alice].state(of: 2) == .stateConnected)
        net.expectConsistent()
    }

    @Test func aConnectedClientKeepsBrowsingAndCanJoinASecondServer() throws {
        let net = SessionTestNetwork()
        let server = net.add("Server", 10, .server)
        let other = net.add("Other", 11, .server)
        let client = net.add("Client", 20, .client)
        net.start()
        try net.establish(client, server)
        #expect(net.commands(client) == [])
        #expect(net.commands(server) == [])
        #expect(net.notes(client) == [changed(server, .stateConnecting), changed(server, .stateConnected)])
        #expect(net[client].peers(in: .stateAvailable) == [11])
        try net.establish(client, other)
        #expect(net[client].peers(in: .stateConnected) == [10, 11])

        net.loseLink(client, server)
        net.deliver()
        #expect(net.commands(client) == [])
        #expect(net.notes(client).contains(changed(server, .stateDisconnected)))
        #expect(net[client].state(of: 11) == .stateConnected)
        net.expectConsistent()
    }

    // MARK: - 2. Connecting

    @Test func aRequestCarriesTheNameAndAcceptingConnectsBothSides() throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let server = net.add("Server", 10, .server)
        net.start()
        net[alice].connect(to: 10, timeout: nil)
        net[alice].connect(to: 10, timeout: nil)  // already connecting: nothing more
        #expect(net.notes(alice) == [changed(server, .stateConnecting)])
        #expect(net[server].displayName(of: 1) == nil)
        #expect(net.deliver() == 1)
        #expect(net.notes(server) == [changed(alice, .stateConnecting), .connectionRequest(1)])
        #expect(net[server].displayName(of: 1) == "Alice")
        #expect(net[server].peers(in: .stateConnecting) == [1])
        #expect(net[alice].peers(in: .stateConnecting) == [10])

        try net[server].accept(1)
        #expect(net.notes(server) == [])  // nothing until the link opens
        net.deliver()
        #expect(net.notes(alice) == [changed(server, .stateConnected)])
        #expect(net.notes(server) == [changed(alice, .stateConnected)])
        #expect(net[alice].peers(in: .stateConnected) == [10])
        #expect(net[server].peers(in: .stateConnected) == [1])
        #expect(net[alice].displayName(of: 10) == "Server")
        #expect(net.links(from: alice, to: server).count == 1)
        #expect(throws: GKSessionError(.peerNotFoundError)) { try net[server].accept(1) }

        // Connecting again to a connected peer does nothing.
        net[alice].connect(to: 10, timeout: nil)
        #expect(net.deliver() == 0)
        #expect(net.notes(alice) == [])
        net.expectConsistent()
    }

    // MARK: - 3. Failing to connect

    /// Two peers in peer mode that see each other, Alice's request to Bob delivered.
    private func pendingRequest() -> (SessionTestNetwork, TestPeer, TestPeer) {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        net.start()
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        net.drain()
        return (net, alice, bob)
    }

    @Test func aDeniedRequestFailsWithDeclined() {
        let (net, alice, bob) = self.pendingRequest()
        net[bob].deny(1)
        #expect(net.notes(bob) == [changed(alice, .stateAvailable)])
        net.deliver()
        #expect(net.notes(alice) == [.connectionFailed(2, .declinedError), changed(bob, .stateAvailable)])
        #expect(net.denials == [SessionDenyReason.declined.rawValue])
        #expect(net[bob].statistics.refusedRequests == 0)
        #expect(net[alice].peers(in: .stateConnecting) == [])
        #expect(net[bob].peers(in: .stateConnecting) == [])
        net.expectConsistent()
    }

    @Test func connectingToAnUnknownPeerFailsWithPeerNotFound() {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        net.start()
        net[alice].connect(to: 99, timeout: nil)
        net[alice].connect(to: 1, timeout: nil)
        #expect(net.notes(alice) == [.connectionFailed(99, .peerNotFoundError), .connectionFailed(1, .peerNotFoundError)])
        #expect(net.deliver() == 0)
    }

    @Test func aTimeoutFailsBothSides() {
        let (net, alice, bob) = self.pendingRequest()
        net.timeOutConnect(from: alice, to: bob)
        net.deliver()
        #expect(net.notes(alice) == [.connectionFailed(2, .timedOutError), changed(bob, .stateAvailable)])
        #expect(net.notes(bob) == [.connectionFailed(1, .timedOutError), changed(alice, .stateAvailable)])
        net.expectConsistent()
    }

    @Test func cancellingFailsBothSides() {
        let (net, alice, bob) = self.pendingRequest()
        net[alice].cancelConnect(to: 2)
        net.deliver()
        #expect(net.notes(alice) == [.connectionFailed(2, .cancelledError), changed(bob, .stateAvailable)])
        #expect(net.notes(bob) == [.connectionFailed(1, .cancelledError), changed(alice, .stateAvailable)])
        net.expectConsistent()
    }

    @Test func cancellingAfterTheAcceptFailsBothSides() throws {
        let (net, alice, bob) = self.pendingRequest()
        try net[bob].accept(1)
        net[alice].cancelConnect(to: 2)  // before the accept reached it
        net.deliver()
        #expect(net.notes(alice) == [.connectionFailed(2, .cancelledError), changed(bob, .stateAvailable)])
        #expect(net.notes(bob) == [.connectionFailed(1, .cancelledError), changed(alice, .stateAvailable)])
        #expect(net.links(from: bob, to: alice).isEmpty)
        net.expectConsistent()
    }

    @Test func cancellingBeforeTheRequestArrivesIsSeenOnlyByTheRequester() {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        net.start()
        net[alice].connect(to: 2, timeout: nil)
        net[alice].cancelConnect(to: 2)
        net.deliver()
        #expect(net.notes(alice) == [changed(bob, .stateConnecting), .connectionFailed(2, .cancelledError), changed(bob, .stateAvailable)])
        #expect(net.notes(bob) == [])
        net.expectConsistent()
    }

    @Test func connectingWhileThePeersRequestWaitsFailsWithInProgress() throws {
        let (net, alice, bob) = self.pendingRequest()
        net[bob].connect(to: 1, timeout: nil)
        #expect(net.notes(bob) == [.connectionFailed(1, .inProgressError)])
        #expect(net.deliver() == 0)
        try net[bob].accept(1)  // its request still goes ahead
        net.deliver()
        #expect(net.notes(alice) == [changed(bob, .stateConnected)])
        #expect(net.notes(bob) == [changed(alice, .stateConnected)])
        net.expectConsistent()
    }

    /// Both ask before either request arrives. `acceptEarly`: the request that goes ahead is
    /// accepted as soon as it arrives, before the refusal of the other reaches its sender.
    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func whenBothAskAtOnceExactlyOneRequestGoesAhead(higherAsksFirst: Bool, acceptEarly: Bool) throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        net.start()
        if higherAsksFirst {
            net[bob].connect(to: 1, timeout: nil)
            net[alice].connect(to: 2, timeout: nil)
        } else {
            net[alice].connect(to: 2, timeout: nil)
            net[bob].connect(to: 1, timeout: nil)
        }
        var aliceNotes: [SessionNotification] = []
        var bobNotes: [SessionNotification] = []
        var accepted = false
        while net.deliverNext() {
            aliceNotes += net.notes(alice)
            bobNotes += net.notes(bob)
            if acceptEarly, !accepted, bobNotes.contains(.connectionRequest(1)) {
                try net[bob].accept(1)
                accepted = true
            }
        }
        let inProgress =
            aliceNotes.filter { $0 == .connectionFailed(2, .inProgressError) }.count
            + bobNotes.filter { $0 == .connectionFailed(1, .inProgressError) }.count
        #expect(inProgress == 1)
        // The lower peer ID's request goes ahead: Bob is asked, and hears that his own failed.
        #expect(bobNotes.contains(.connectionFailed(1, .inProgressError)))
        #expect(bobNotes.contains(.connectionRequest(1)))
        #expect(!aliceNotes.contains(.connectionRequest(2)))
        // Alice refuses Bob's request if it reaches her before Bob, accepting early, withdraws it.
        #expect(net[alice].statistics.refusedRequests == net.denials.count)
        #expect(net[bob].statistics.refusedRequests == 0)
        #expect(net.denials == (acceptEarly && !higherAsksFirst ? [] : [SessionDenyReason.inProgress.rawValue]))

        if !acceptEarly {
            try net[bob].accept(1)
            net.deliver()
            aliceNotes += net.notes(alice)
            bobNotes += net.notes(bob)
        }
        // Bob hears that his request failed before he hears that he is connected, never after.
        let failed = bobNotes.firstIndex(of: .connectionFailed(1, .inProgressError))
        let connected = bobNotes.firstIndex(of: changed(alice, .stateConnected))
        #expect(failed != nil && connected != nil && failed! < connected!, "\(bobNotes)")
        #expect(aliceNotes.last == changed(bob, .stateConnected))
        #expect(net[alice].peers(in: .stateConnected) == [2])
        #expect(net[bob].peers(in: .stateConnected) == [1])
        #expect(net[alice].peers(in: .stateConnecting) == [])
        #expect(net[bob].peers(in: .stateConnecting) == [])
        #expect(net.links(from: alice, to: bob).count == 1)
        #expect(net.links(from: bob, to: alice).count == 1)
        net.expectConsistent()
    }

    @Test func aFailedAcceptLeavesNoRequestBehind() throws {
        let (net, alice, bob) = self.pendingRequest()
        net.failAccepts = true
        #expect(throws: GKSessionError(.connectionFailedError)) { try net[bob].accept(1) }
        net.failAccepts = false
        net.deliver()
        // The failure says it was the handshake's proof (the driver words it so).
        #expect(net.notes(alice) == [.authenticationFailed(2), .connectionFailed(2, .connectionFailedError), changed(bob, .stateAvailable)])
        #expect(net[alice].statistics.authenticationFailures == 1)
        // The transport has forgotten the request; the session should too, and hear Alice's next one.
        #expect(net[bob].peers(in: .stateConnecting) == [])
        #expect(net[bob].requestOwners.isEmpty)
        #expect(net.notes(bob).contains(changed(alice, .stateAvailable)))
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        #expect(net.notes(bob).contains(.connectionRequest(1)))
        #expect(net[bob].statistics.refusedRequests == 0)
        net.expectConsistent()
    }

    // MARK: - 4. Refusals the application never sees

    @Test func aRequestForAnotherSessionIsRefused() {
        let net = SessionTestNetwork()
        let mallory = net.add("Mallory", 5, .peer, sessionID: "checkers")
        let server = net.add("Server", 10, .server)
        net.start()
        net[mallory].connect(to: 10, timeout: nil)
        net.deliver()
        #expect(net.denials == [SessionDenyReason.wrongSession.rawValue])
        #expect(net.notes(server) == [])
        #expect(net[server].statistics.refusedRequests == 1)
        #expect(net[server].displayName(of: 5) == nil)
        #expect(net.notes(mallory) == [changed(server, .stateConnecting), .connectionFailed(10, .connectionFailedError), changed(server, .stateAvailable)])
        net.expectConsistent()
    }

    @Test func malformedHellosAreRefused() {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let server = net.add("Server", 10, .server)
        net.start()
        let key = SessionHello.sessionKey(for: "chess")
        let payloads: [ByteBuffer] = [
            ByteBuffer(bytes: [0xDE, 0xAD, 0xBE, 0xEF]),
            ByteBuffer(),
            SessionHello(version: 2, sessionKey: key, peerID: 1, mode: 2, displayName: "Alice").encode(),
            SessionHello(sessionKey: key, peerID: 1, mode: 9, displayName: "Alice").encode(),
            SessionHello(sessionKey: key, peerID: 10, mode: 2, displayName: "Me?").encode(),  // the responder's own ID
            SessionHello(sessionKey: key, peerID: 1, mode: 2, displayName: "Alice").encode().getSlice(at: 0, length: 10)!,
        ]
        for (count, payload) in payloads.enumerated() {
            net.injectRequest(payload, from: alice, to: server)
            net.deliver()
            #expect(net.denials.last == SessionDenyReason.malformed.rawValue)
            #expect(net[server].statistics.refusedRequests == count + 1)
        }
        #expect(net.notes(server) == [])
        #expect(net.notes(alice) == [])
        #expect(net[server].peers.isEmpty)
        net.expectConsistent()
    }

    @Test func clientsAndUnavailableSessionsRefuseRequests() {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let sam = net.add("Sam", 10, .server)  // never made available
        let carl = net.add("Carl", 20, .client)
        net[alice].setAvailable(true)
        net[carl].setAvailable(true)
        net.sight(alice, carl)  // as if from a stale record: neither advertises
        net.sight(alice, sam)
        net.drain()
        net[alice].connect(to: 20, timeout: nil)
        net[alice].connect(to: 10, timeout: nil)
        net.deliver()
        let notAccepting = SessionDenyReason.notAccepting.rawValue
        #expect(net.denials == [notAccepting, notAccepting])
        #expect(net.notes(carl) == [])
        #expect(net.notes(sam) == [])
        #expect(net[carl].statistics.refusedRequests == 1)
        #expect(net[sam].statistics.refusedRequests == 1)
        #expect(
            net.notes(alice) == [
                changed(carl, .stateConnecting), changed(sam, .stateConnecting),
                .connectionFailed(20, .declinedError), changed(carl, .stateAvailable),
                .connectionFailed(10, .declinedError), changed(sam, .stateAvailable),
            ])
        net.expectConsistent()
    }

    @Test func aSecondRequestFromTheSamePeerIsRefused() throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let server = net.add("Server", 10, .server)
        net.start()
        net[alice].connect(to: 10, timeout: nil)
        net.deliver()
        net.drain()
        let hello = SessionHello(sessionKey: SessionHello.sessionKey(for: "chess"), peerID: 1, mode: 2, displayName: "Alice").encode()
        net.injectRequest(hello, from: alice, to: server)
        net.deliver()
        let inProgress = SessionDenyReason.inProgress.rawValue
        #expect(net.denials == [inProgress])
        #expect(net[server].statistics.refusedRequests == 1)
        #expect(net.notes(server) == [])

        try net[server].accept(1)
        net.deliver()
        #expect(net.notes(alice) == [changed(server, .stateConnected)])
        #expect(net.notes(server) == [changed(alice, .stateConnected)])
        // Connected: asked again, the same.
        net.injectRequest(hello, from: alice, to: server)
        net.deliver()
        #expect(net.denials == [inProgress, inProgress])
        #expect(net[server].statistics.refusedRequests == 2)
        #expect(net.notes(server) == [])
        #expect(net.notes(alice) == [])
        #expect(net[server].peers(in: .stateConnected) == [1])
        net.expectConsistent()
    }

    // MARK: - 5. Someone else answers

    @Test func aWelcomeFromAnotherPeerFailsTheConnectionAndClosesTheLink() throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let carol = net.add("Carol", 3, .peer)
        for peer in [alice, bob, carol] { net[peer].setAvailable(true) }
        net.sight(alice, bob, at: carol)  // Carol now answers at Bob's address
        net.drain()
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        #expect(net.notes(carol) == [changed(alice, .stateConnecting), .connectionRequest(1)])
        try net[carol].accept(1)
        net.deliver()
        #expect(net.notes(alice) == [changed(bob, .stateConnecting), .connectionFailed(2, .connectionFailedError), changed(bob, .stateAvailable)])
        #expect(net[alice].peers(in: .stateConnected) == [])
        #expect(net[alice].state(of: 3) == nil)
        #expect(net[alice].displayName(of: 2) == "Bob")
        #expect(net.links(from: alice, to: carol).isEmpty)
        #expect(net.links(from: carol, to: alice).isEmpty)
        #expect(net.closeCodes == [SessionMachine.closeWrongPeer])
        #expect(net[carol].peers(in: .stateConnected) == [])
        #expect(net[carol].state(of: 1) == nil)
        #expect(net.notes(bob) == [])
        net.expectConsistent()
    }

    // MARK: - 6. Data

    @Test func dataGoesToConnectedPeersOnly() throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let carol = net.add("Carol", 3, .peer)
        _ = net.add("Dave", 4, .peer)
        net.start()
        try net.establish(alice, bob)
        try net.establish(alice, carol)
        net.drain()

        try net[alice].send(bytes("hello"), to: [2, 3], mode: .reliable)
        net.deliver()
        #expect(net.notes(bob) == [received("hello", from: alice)])
        #expect(net.notes(carol) == [received("hello", from: alice)])
        try net[alice].send(bytes("tick"), to: [3, 3], mode: .unreliable)
        net.deliver()
        #expect(net.notes(carol) == [received("tick", from: alice, .unreliable)])
        #expect(net.notes(bob) == [])
        try net[bob].send(bytes("back"), to: [1], mode: .reliable)
        net.deliver()
        #expect(net.notes(alice) == [received("back", from: bob)])

        #expect(throws: GKSessionError(.invalidParameterError)) { try net[alice].send(bytes("x"), to: [], mode: .reliable) }
        #expect(throws: GKSessionError(.invalidParameterError)) { try net[alice].send(bytes("x"), to: [1], mode: .reliable) }
        #expect(throws: GKSessionError(.peerNotFoundError)) { try net[alice].send(bytes("x"), to: [2, 99], mode: .reliable) }
        #expect(throws: GKSessionError(.notConnectedError)) { try net[alice].send(bytes("x"), to: [2, 4], mode: .unreliable) }
        net.messageLimit = 100  // the one-byte header makes 100 bytes of data too many
        #expect(throws: GKSessionError(.dataTooBigError)) { try net[alice].send(ByteBuffer(repeating: 0, count: 100), to: [2, 3], mode: .reliable) }
        #expect(net.deliver() == 0)
        try net[alice].send(ByteBuffer(repeating: 0, count: 99), to: [2], mode: .reliable)
        #expect(net.deliver() == 1)
    }

    @Test func aSendIsAllOrNothingWhenOneLinkIsFull() throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let carol = net.add("Carol", 3, .peer)
        net.start()
        try net.establish(alice, bob)
        try net.establish(alice, carol)
        net.drain()

        net.setFull(alice, to: carol, true)
        #expect(throws: GKSessionError(.systemError)) { try net[alice].send(bytes("x"), to: [2, 3], mode: .reliable) }
        #expect(throws: GKSessionError(.systemError)) { try net[alice].send(bytes("x"), to: [2, 3], mode: .unreliable) }
        #expect(net.deliver() == 0)
        try net[alice].send(bytes("bob only"), to: [2], mode: .reliable)
        net.deliver()
        #expect(net.notes(bob) == [received("bob only", from: alice)])
        #expect(net.notes(carol) == [])

        net.setFull(alice, to: carol, false)
        net.deliver()
        try net[alice].send(bytes("both"), to: [2, 3], mode: .reliable)
        net.deliver()
        #expect(net.notes(bob) == [received("both", from: alice)])
        #expect(net.notes(carol) == [received("both", from: alice)])
        net.expectConsistent()
    }

    @Test func garbageFromAPeerIsCountedAndDroppedAndTheLinkStaysUp() throws {
        let net = SessionTestNetwork()
        let server = net.add("Server", 10, .server)
        let client = net.add("Client", 20, .client)
        net.start()
        try net.establish(client, server)
        net.drain()
        var random = SplitMix64(state: 0x5E55_1011_CAFE)

        /// Hands `buffer` to `receiver` and checks the counter: up by one exactly when the
        /// message cannot be read, or is one the receiver's mode never takes.
        func feed(_ buffer: ByteBuffer, to receiver: TestPeer, knownBad: Bool) {
            let sender = receiver == server ? client : server
            let decoded = try? SessionMessage.decode(buffer)
            var malformed = decoded == nil
            switch decoded {
            case .roster?, .joined?: malformed = receiver == server
            case .relay?: malformed = receiver == client
            default: break
            }
            if knownBad { #expect(decoded == nil, "not malformed: \(Array(buffer.readableBytesView))") }
            let before = net[receiver].statistics.malformedMessages
            net.injectMessage(buffer, from: sender, to: receiver, mode: Bool.random(using: &random) ? .reliable : .unreliable)
            net.deliver()
            #expect(net[receiver].statistics.malformedMessages == before + (malformed ? 1 : 0), "\(Array(buffer.readableBytesView))")
        }

        func count16(_ value: Int) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
        /// A message that cannot be read, of one of eight kinds.
        func unreadable(_ kind: Int) -> [UInt8] {
            switch kind {
            case 0: return []
            case 1: return [UInt8(random.int(7...255))] + random.bytes(random.int(0...15))  // unknown type
            case 2: return [random.pick(1, 4)] + count16(random.int(1025...65535)) + random.bytes(random.int(0...7))  // too many peers
            case 3: return [random.pick(2, 3, 5, 6)] + random.bytes(random.int(0...3))  // a peer ID cut short
            case 4: return [2] + random.bytes(4) + [UInt8(random.int(1...255))]  // joined: a name longer than what follows
            case 5:  // roster: fewer bytes than its entries need (at least 5 each)
                let count = random.int(1...64)
                return [1] + count16(count) + random.bytes(random.int(0...(5 * count - 1)))
            case 6:  // relay: fewer destinations than counted
                let count = random.int(1...1024)
                return [4] + count16(count) + random.bytes(random.int(0...(4 * count - 1)))
            default: return [random.pick(1, 4)] + random.bytes(random.int(0...1))  // the count cut short
            }
        }
        for round in 0..<600 {
            let bad = unreadable(round % 8)
            feed(ByteBuffer(bytes: bad), to: server, knownBad: true)
            feed(ByteBuffer(bytes: bad), to: client, knownBad: true)
        }
        for _ in 0..<3000 {
            let buffer = ByteBuffer(bytes: [UInt8(random.int(0...8))] + random.bytes(random.int(0...39)))
            feed(buffer, to: server, knownBad: false)
            feed(buffer, to: client, knownBad: false)
        }
        #expect(net[server].statistics.malformedMessages >= 600)
        #expect(net[client].statistics.malformedMessages >= 600)
        net.drain()

        #expect(net[server].state(of: 20) == .stateConnected)
        #expect(net[client].state(of: 10) == .stateConnected)
        try net[client].send(bytes("still here"), to: [10], mode: .reliable)
        try net[server].send(bytes("so am I"), to: [20], mode: .reliable)
        net.deliver()
        #expect(net.notes(server) == [received("still here", from: client)])
        #expect(net.notes(client) == [received("so am I", from: server)])
        net.expectConsistent()
    }

    // MARK: - 7. A server's room

    @Test func aServerIntroducesItsClientsToEachOther() throws {
        let net = SessionTestNetwork()
        let server = net.add("Server", 10, .server, relays: true)
        let ann = net.add("Ann", 1, .client)
        let ben = net.add("Ben", 2, .client)
        let cat = net.add("Cat", 3, .client)
        net.start()
        try net.establish(ann, server)
        #expect(net.notes(ann) == [changed(server, .stateConnecting), changed(server, .stateConnected)])
        #expect(net.notes(server) == [changed(ann, .stateConnecting), .connectionRequest(1), changed(ann, .stateConnected)])
        try net.establish(ben, server)
        #expect(net.notes(ben) == [changed(server, .stateConnecting), changed(server, .stateConnected), changed(ann, .stateConnected)])
        #expect(net.notes(ann) == [changed(ben, .stateConnected)])
        try net.establish(cat, server)
        #expect(
            net.notes(cat) == [
                changed(server, .stateConnecting), changed(server, .stateConnected),
                changed(ann, .stateConnected), changed(ben, .stateConnected),
            ])
        #expect(net.notes(ann) == [changed(cat, .stateConnected)])
        #expect(net.notes(ben) == [changed(cat, .stateConnected)])
        #expect(net.relayed(ann) == [2, 3])
        #expect(net[ann].peers(in: .stateConnected) == [2, 3, 10])
        #expect(net[cat].displayName(of: 1) == "Ann")
        #expect(net[ann].displayName(of: 3) == "Cat")
        #expect(net[server].peers(in: .stateConnected) == [1, 2, 3])
        #expect(net.relayed(server) == [])
        net.expectConsistent()
    }

    @Test func withoutTheOptInAServersClientsReachTheServerOnlyAsInGameKit() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 3, relays: false)
        let (ann, ben, cat) = (clients[0], clients[1], clients[2])
        #expect(net[ann].peers(in: .stateConnected) == [10])
        #expect(net.relayed(ann) == [] && net[ann].allConnectedPeers == [10])
        try net[ann].send(bytes("to all"), to: net[ann].allConnectedPeers, mode: .reliable)
        net.deliver()
        #expect(net.notes(server) == [received("to all", from: ann)])
        #expect(net.notes(ben) == [] && net.notes(cat) == [])
        #expect(throws: GKSessionError(.peerNotFoundError)) { try net[ann].send(bytes("to ben"), to: [2], mode: .reliable) }
        // A relay request is refused and counted, never forwarded.
        net.injectMessage(SessionMessage.relay(to: [2, 3], data: bytes("sneaked")).encode(), from: ann, to: server)
        net.deliver()
        #expect(net.notes(ben) == [] && net.notes(cat) == [] && net.notes(server) == [])
        #expect(net[server].statistics.relayDropped == 1 && net[server].statistics.relayedMessages == 0)
        // A client leaving is news to the server only.
        net[ann].disconnectFromAllPeers()
        net.deliver()
        #expect(net.notes(server) == [changed(ann, .stateDisconnected)])
        #expect(net.notes(ben) == [] && net.notes(cat) == [])
        net.expectConsistent()
    }

    @Test func relayedDataArrivesFromItsSourceExactlyOnce() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 3)
        let (ann, ben, cat) = (clients[0], clients[1], clients[2])
        try net[ann].send(bytes("to ben"), to: [2], mode: .reliable)
        net.deliver()
        #expect(net.notes(ben) == [received("to ben", from: ann)])
        #expect(net.notes(cat) == [])
        #expect(net.notes(server) == [])
        try net[ann].send(bytes("quick"), to: [3], mode: .unreliable)
        net.deliver()
        #expect(net.notes(cat) == [received("quick", from: ann, .unreliable)])

        let everyone = net[ann].allConnectedPeers
        #expect(everyone == [2, 3, 10])
        try net[ann].send(bytes("all"), to: everyone, mode: .reliable)
        net.deliver()
        #expect(net.notes(server) == [received("all", from: ann)])
        #expect(net.notes(ben) == [received("all", from: ann)])
        #expect(net.notes(cat) == [received("all", from: ann)])
        #expect(net.notes(ann) == [])
        #expect(net[server].statistics.relayedMessages == 4)
        #expect(net[server].statistics.relayDropped == 0)

        // A relay naming its own sender (and the server) is not sent back.
        net.injectMessage(SessionMessage.relay(to: [1, 2, 10], data: bytes("echo")).encode(), from: ann, to: server)
        net.deliver()
        #expect(net.notes(server) == [received("echo", from: ann)])
        #expect(net.notes(ben) == [received("echo", from: ann)])
        #expect(net.notes(ann) == [])
        #expect(net[server].statistics.relayedMessages == 5)
        #expect(net[server].statistics.relayDropped == 1)

        try net[server].send(bytes("from the server"), to: [1, 2, 3], mode: .reliable)
        net.deliver()
        for client in clients { #expect(net.notes(client) == [received("from the server", from: server)]) }
        net.expectConsistent()
    }

    @Test func channelDataTravelsBesideTheApplicationsAndNeverReachesIt() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 3)
        let (ann, ben, cat) = (clients[0], clients[1], clients[2])
        let voice = SessionChannel.groupVoice
        // To everyone: the server directly, the other clients through it, all on the channel.
        try net[ann].send(bytes("frame"), to: net[ann].allConnectedPeers, mode: .unreliable, channel: voice)
        net.deliver()
        for peer in [server, ben, cat] {
            #expect(net.notes(peer) == [], "the application hears nothing")
            #expect(net[peer].takeChannelDeliveries() == [SessionChannelDelivery(channel: voice, data: bytes("frame"), from: ann.peerID, mode: .unreliable)])
        }
        #expect(net[ann].takeChannelDeliveries() == [])
        #expect(net[server].statistics.relayedMessages == 2)
        // A relay request naming the server delivers to it too, on the channel.
        net.injectMessage(SessionMessage.channelRelay(to: [2, 10], channel: voice, data: bytes("both")).encode(), from: ann, to: server)
        net.deliver()
        #expect(net[server].takeChannelDeliveries().map(\.data) == [bytes("both")])
        #expect(net[ben].takeChannelDeliveries().map(\.from) == [ann.peerID])
        // Application data still arrives as before, and only to the application.
        try net[ann].send(bytes("move"), to: [2], mode: .reliable)
        net.deliver()
        #expect(net.notes(ben) == [received("move", from: ann)])
        #expect(net[ben].takeChannelDeliveries() == [])
        // Relayed channel data from a peer the server does not reach is dropped and counted.
        let dropped = net[ann].statistics.relayDropped
        net.injectMessage(SessionMessage.channelRelayed(from: 77, channel: voice, data: bytes("forged")).encode(), from: server, to: ann)
        net.deliver()
        #expect(net[ann].takeChannelDeliveries() == [])
        #expect(net[ann].statistics.relayDropped == dropped + 1)
        // A client may not ask another client to relay.
        let malformed = net[ben].statistics.malformedMessages
        net.injectMessage(SessionMessage.channelRelay(to: [3], channel: voice, data: bytes("no")).encode(), from: server, to: ben)
        net.deliver()
        #expect(net[ben].statistics.malformedMessages == malformed + 1)
        #expect(net[cat].takeChannelDeliveries() == [])
        net.expectConsistent()
    }

    @Test func aLeavingClientIsDisconnectedEverywhere() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 3)
        let (ann, ben, cat) = (clients[0], clients[1], clients[2])
        net[cat].disconnectFromAllPeers()
        net.deliver()
        // Still browsing, it sees the server available again.
        #expect(
            unordered(net.notes(cat))
                == unordered([changed(ann, .stateDisconnected), changed(ben, .stateDisconnected), changed(server, .stateDisconnected), changed(server, .stateAvailable)]))
        #expect(net.commands(cat) == [])
        #expect(net[cat].peers(in: .stateAvailable) == [10] && net[cat].peers.count == 1)
        #expect(net.notes(ann) == [changed(cat, .stateDisconnected)])
        #expect(net.notes(ben) == [changed(cat, .stateDisconnected)])
        #expect(net.notes(server) == [changed(cat, .stateDisconnected)])
        #expect(net.relayed(ann) == [2])
        #expect(net[server].peers(in: .stateConnected) == [1, 2])
        net.expectConsistent()
    }

    @Test func losingTheServerDisconnectsEveryPeerReachedThroughIt() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 3)
        let (ann, ben, cat) = (clients[0], clients[1], clients[2])
        net.loseLink(ann, server)
        net.deliver()
        #expect(
            unordered(net.notes(ann))
                == unordered([changed(ben, .stateDisconnected), changed(cat, .stateDisconnected), changed(server, .stateDisconnected), changed(server, .stateAvailable)]))
        #expect(net.commands(ann) == [])
        #expect(net[ann].peers(in: .stateAvailable) == [10] && net[ann].peers.count == 1)
        #expect(net.notes(server) == [changed(ann, .stateDisconnected)])
        #expect(net.notes(ben) == [changed(ann, .stateDisconnected)])
        #expect(net.notes(cat) == [changed(ann, .stateDisconnected)])
        net.expectConsistent()
    }

    @Test func relayedDataFromAnotherThanTheSourcesServerIsDropped() throws {
        let net = SessionTestNetwork()
        let first = net.add("First", 10, .server, relays: true)
        let second = net.add("Second", 11, .server, relays: true)
        let ann = net.add("Ann", 1, .client)
        let ben = net.add("Ben", 2, .client)
        net.start()
        try net.establish(ben, first)
        net[ann].connect(to: 10, timeout: nil)  // both asked before either answers
        net[ann].connect(to: 11, timeout: nil)
        net.deliver()
        try net[first].accept(1)
        try net[second].accept(1)
        net.deliver()
        #expect(net[ann].peers(in: .stateConnected) == [2, 10, 11])
        #expect(net.relayed(ann) == [2])
        net.drain()

        net.injectMessage(SessionMessage.relayed(from: 2, data: bytes("forged")).encode(), from: second, to: ann)
        net.injectMessage(SessionMessage.left(peerID: 2).encode(), from: second, to: ann)
        net.deliver()
        #expect(net.notes(ann) == [])
        #expect(net[ann].statistics.relayDropped == 1)
        #expect(net[ann].state(of: 2) == .stateConnected)

        net.injectMessage(SessionMessage.relayed(from: 2, data: bytes("genuine")).encode(), from: first, to: ann)
        try net[ben].send(bytes("via first"), to: [1], mode: .reliable)
        net.deliver()
        #expect(net.notes(ann) == [received("genuine", from: ben), received("via first", from: ben)])
        net.expectConsistent()
    }

    @Test func anUnreliableRelayWithNoRoomIsCountedAsDroppedNotRelayed() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 2)
        let (ann, ben) = (clients[0], clients[1])
        net.setFull(server, to: ben, true)
        try net[ann].send(bytes("lost"), to: [2], mode: .unreliable)
        net.deliver()
        #expect(net.notes(ben) == [])
        #expect(net[server].statistics.relayDropped == 1)
        #expect(net[server].statistics.relayedMessages == 0)
    }

    @Test func aRelayToMoreThan1024PeersIsSplit() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 1)
        let ann = clients[0]
        // The server names 1030 others (who are not really there).
        let entries = (1000..<2030).map { SessionPeerEntry(peerID: UInt32($0), displayName: "P\($0)") }
        net.injectMessage(SessionMessage.roster(Array(entries.prefix(1024))).encode(), from: server, to: ann)
        for entry in entries.dropFirst(1024) { net.injectMessage(SessionMessage.joined(entry).encode(), from: server, to: ann) }
        net.deliver()
        #expect(net.relayed(ann).count == 1030)
        net.drain()
        try net[ann].send(bytes("crowd"), to: net[ann].allConnectedPeers, mode: .reliable)
        net.deliver()
        #expect(net.notes(server) == [received("crowd", from: ann)])
        #expect(net[server].statistics.malformedMessages == 0)
        #expect(net[server].statistics.relayDropped == 1030)
    }

    /// A message to several peers is encoded once: every link's message is the same buffer
    /// (the transport copies it once per link, into the link's retransmission store).
    @Test func aMessageToSeveralPeersIsEncodedOnce() throws {
        let (net, alice, _, _) = try SessionTestNetwork.mesh()
        let batch = try net[alice].plan(bytes("to both"), to: [2, 3], mode: .reliable)
        #expect(batch.count == 2)
        #expect(Set(batch.map(\.link)).count == 2)
        #expect(batch[0].message == batch[1].message)
        let storage = batch.map { $0.message.withVeryUnsafeBytes { UInt(bitPattern: $0.baseAddress) } }
        #expect(storage[0] == storage[1], "each peer's message was encoded again")
    }

    // MARK: - 8. Disconnecting a peer from everyone

    @Test func droppingAPeerInAMeshDisconnectsItFromEveryone() throws {
        let (net, alice, bob, carol) = try SessionTestNetwork.mesh()
        net[alice].disconnectPeerFromAllPeers(3)
        net.deliver()
        #expect(net[alice].peers(in: .stateConnected) == [2])
        #expect(net[bob].peers(in: .stateConnected) == [1])
        #expect(net[carol].peers(in: .stateConnected) == [])
        #expect(net.links(from: carol, to: alice).isEmpty)
        #expect(net.links(from: carol, to: bob).isEmpty)
        #expect(net.links(from: alice, to: bob).count == 1)
        #expect(net.notes(alice) == [changed(carol, .stateDisconnected), changed(carol, .stateAvailable)])
        #expect(net.notes(bob) == [changed(carol, .stateDisconnected), changed(carol, .stateAvailable)])
        #expect(
            unordered(net.notes(carol)) == unordered([
                changed(alice, .stateDisconnected), changed(alice, .stateAvailable),
                changed(bob, .stateDisconnected), changed(bob, .stateAvailable),
            ]))
        net.expectConsistent()
    }

    @Test func droppingOneselfLeavesEveryone() throws {
        let (net, alice, bob, carol) = try SessionTestNetwork.mesh()
        net[alice].disconnectPeerFromAllPeers(1)
        net.deliver()
        #expect(net[alice].peers(in: .stateConnected) == [])
        #expect(net[bob].peers(in: .stateConnected) == [3])
        #expect(net[carol].peers(in: .stateConnected) == [2])
        #expect(net.notes(bob) == [changed(alice, .stateDisconnected), changed(alice, .stateAvailable)])
        #expect(net.notes(carol) == [changed(alice, .stateDisconnected), changed(alice, .stateAvailable)])
        net.expectConsistent()
    }

    @Test func disconnectingFromAllPeersLeavesTheOthersConnected() throws {
        let (net, alice, bob, carol) = try SessionTestNetwork.mesh()
        net[bob].disconnectFromAllPeers()
        net.deliver()
        #expect(net[bob].peers(in: .stateConnected) == [])
        #expect(net[alice].peers(in: .stateConnected) == [3])
        #expect(net[carol].peers(in: .stateConnected) == [1])
        #expect(net.notes(alice) == [changed(bob, .stateDisconnected), changed(bob, .stateAvailable)])
        #expect(net.commands(bob) == [])  // it advertised all along
        net.expectConsistent()
    }

    @Test func droppingAPeerInAServersRoom() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 3)
        let (ann, ben, cat) = (clients[0], clients[1], clients[2])
        // A client asks (through the server) to drop another.
        net[ann].disconnectPeerFromAllPeers(3)
        net.deliver()
        #expect(net.notes(ann) == [changed(cat, .stateDisconnected)])
        #expect(net.notes(ben) == [changed(cat, .stateDisconnected)])
        #expect(net.notes(server) == [changed(cat, .stateDisconnected)])
        #expect(
            unordered(net.notes(cat))
                == unordered([changed(ann, .stateDisconnected), changed(ben, .stateDisconnected), changed(server, .stateDisconnected), changed(server, .stateAvailable)]))
        #expect(net[cat].peers(in: .stateAvailable) == [10] && net[cat].peers.count == 1)
        #expect(net[server].peers(in: .stateConnected) == [1, 2])

        // The server drops one.
        net[server].disconnectPeerFromAllPeers(2)
        net.deliver()
        #expect(net[server].peers(in: .stateConnected) == [1])
        #expect(net.notes(ann) == [changed(ben, .stateDisconnected)])
        #expect(unordered(net.notes(ben)) == unordered([changed(ann, .stateDisconnected), changed(server, .stateDisconnected), changed(server, .stateAvailable)]))
        #expect(net[ben].peers(in: .stateAvailable) == [10] && net[ben].peers.count == 1)
        #expect(net.relayed(ann) == [])
        net.expectConsistent()
    }

    // MARK: - 9. The outbox

    @Test func controlMessagesWaitForRoomAndGoOutInOrder() throws {
        let net = SessionTestNetwork()
        let server = net.add("Server", 10, .server, relays: true)
        let ann = net.add("Ann", 1, .client)
        let ben = net.add("Ben", 2, .client)
        let cat = net.add("Cat", 3, .client)
        net.start()
        try net.establish(ann, server)
        net.drain()

        net.setFull(server, to: ann, true)
        try net.establish(ben, server)
        #expect(net.notes(ann) == [])  // "joined" waits
        #expect(net.notes(ben) == [changed(server, .stateConnecting), changed(server, .stateConnected), changed(ann, .stateConnected)])
        #expect(throws: GKSessionError(.systemError)) { try net[server].send(bytes("x"), to: [1], mode: .reliable) }
        #expect(throws: GKSessionError(.systemError)) { try net[server].send(bytes("x"), to: [1, 2], mode: .reliable) }
        try net[server].send(bytes("to ben"), to: [2], mode: .reliable)
        try net[ben].send(bytes("hi ann"), to: [1], mode: .reliable)
        net.deliver()
        #expect(net.notes(ben) == [received("to ben", from: server)])
        try net.establish(cat, server)
        #expect(net.notes(ann) == [])
        net.expectConsistent()

        // Room comes back, but until the server has heard so its reliable data must not overtake
        // what waits; unreliable data is not held back.
        net.setFull(server, to: ann, false)
        #expect(throws: GKSessionError(.systemError)) { try net[server].send(bytes("x"), to: [1], mode: .reliable) }
        try net[server].send(bytes("quick"), to: [1], mode: .unreliable)
        net.deliver()
        #expect(
            net.notes(ann) == [
                received("quick", from: server, .unreliable),
                changed(ben, .stateConnected), received("hi ann", from: ben), changed(cat, .stateConnected),
            ])
        #expect(net[server].outboxes.isEmpty)
        try net[server].send(bytes("now"), to: [1], mode: .reliable)
        net.deliver()
        #expect(net.notes(ann) == [received("now", from: server)])
        #expect(net[server].statistics.overloadedLinks == 0)
        net.expectConsistent()
    }

    @Test func aPeerThatFallsTooFarBehindIsDisconnected() throws {
        let (net, server, clients) = try SessionTestNetwork.room(clients: 2)
        let (ann, ben) = (clients[0], clients[1])
        net.setFull(server, to: ann, true)
        try net[ben].send(bytes("small"), to: [1], mode: .reliable)
        net.deliver()
        #expect(net[server].statistics.overloadedLinks == 0)
        try net[ben].send(ByteBuffer(repeating: 7, count: SessionMachine.outboxLimit), to: [1], mode: .reliable)
        net.deliver()
        #expect(net[server].statistics.overloadedLinks == 1)
        #expect(net.closeCodes == [SessionMachine.closeOverloaded])
        #expect(net.notes(server) == [changed(ann, .stateDisconnected)])
        #expect(net.notes(ben) == [changed(ann, .stateDisconnected)])
        #expect(unordered(net.notes(ann)) == unordered([changed(ben, .stateDisconnected), changed(server, .stateDisconnected), changed(server, .stateAvailable)]))
        #expect(net[server].outboxes.isEmpty)
        #expect(net.links(from: server, to: ann).isEmpty)
        net.expectConsistent()
    }

    // MARK: - 10. Listing peers by state

    @Test func peersAreListedByState() throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        let carol = net.add("Carol", 3, .peer)
        let dave = net.add("Dave", 4, .peer)
        let server = net.add("Server", 10, .server, relays: true)
        let eve = net.add("Eve", 5, .client)
        for state in GKPeerConnectionState.allCases { #expect(net[alice].peers(in: state) == []) }
        net.start()
        net.sight(alice, dave, busy: true)
        #expect(net[alice].peers(in: .stateAvailable) == [2, 3, 10])
        #expect(net[alice].peers(in: .stateUnavailable) == [4])
        try net.establish(eve, server)

        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        #expect(net[alice].peers(in: .stateConnecting) == [2])
        #expect(net[bob].peers(in: .stateConnecting) == [1])
        net[carol].connect(to: 1, timeout: nil)
        net.deliver()
        #expect(net[alice].peers(in: .stateConnecting) == [2, 3])  // both directions
        #expect(net[alice].peers(in: .stateAvailable) == [10])
        try net[bob].accept(1)
        net.deliver()
        #expect(net[alice].peers(in: .stateConnected) == [2])
        #expect(net[alice].peers(in: .stateConnecting) == [3])
        try net.establish(alice, server)
        #expect(net[alice].peers(in: .stateConnected) == [2, 5, 10])
        #expect(net.relayed(alice) == [5])
        #expect(net[alice].peers(in: .stateAvailable) == [])
        #expect(net[alice].peers(in: .stateDisconnected) == [])

        net[alice].deny(3)
        net[alice].disconnectFromAllPeers()
        net.deliver()
        #expect(net[alice].peers(in: .stateConnecting) == [])
        #expect(net[alice].peers(in: .stateConnected) == [])
        #expect(net.relayed(alice) == [])
        #expect(net[alice].peers(in: .stateAvailable) == [2, 3, 10])
        net[alice].setAvailable(false)
        for state in GKPeerConnectionState.allCases { #expect(net[alice].peers(in: state) == []) }
        net.expectConsistent()
    }

    // MARK: - 11. Liveness of peers seen but not connected

    @Test func aSightedPeerIsWatchedUntilConnectedAndASilentOneIsUnavailableUntilItAnswers() throws {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        net.start()
        #expect(net.isWatching(alice, bob) && net.isWatching(bob, alice))
        // Bob stops answering probes: unavailable to Alice, and discovery reconfirms him.
        net.liveness(alice, of: bob, alive: false)
        #expect(net.notes(alice) == [changed(bob, .stateUnavailable)])
        #expect(net.commands(alice) == [.reconfirm(2)])
        #expect(net[alice].peers(in: .stateAvailable) == [] && net[alice].peers(in: .stateUnavailable) == [2])
        #expect(net[alice].statistics.silentPeers == 1)
        // A re-announcement changes nothing: only an answer brings him back.
        net.sight(alice, bob)
        #expect(net.notes(alice) == [])
        net.liveness(alice, of: bob, alive: true)
        #expect(net.notes(alice) == [changed(bob, .stateAvailable)])
        // Connected, the link's disconnect timeout watches him instead.
        try net.establish(alice, bob)
        #expect(!net.isWatching(alice, bob) && !net.isWatching(bob, alice))
        net[alice].disconnectFromAllPeers()
        net.deliver()
        #expect(net.isWatching(alice, bob) && net.isWatching(bob, alice))
        // Gone from discovery: not watched.
        net[alice].peerLost(2)
        #expect(!net.isWatching(alice, bob))
        // A late report about a watch that has ended changes nothing.
        net.expectConsistent()
    }

    @Test func aConnectionNobodyAnswersAsksDiscoveryToReconfirmThePeer() {
        let net = SessionTestNetwork()
        let alice = net.add("Alice", 1, .peer)
        let bob = net.add("Bob", 2, .peer)
        net.start()
        net.sight(alice, bob, at: [SessionTestNetwork.nowhere])
        net.drain()
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        net.timeOutUnanswered(from: alice)
        net.deliver()
        #expect(net.notes(alice).contains(.connectionFailed(2, .timedOutError)))
        #expect(net.commands(alice) == [.reconfirm(2)])
        // Declined is an answer: no reconfirmation.
        net.sight(alice, bob)
        net.drain()
        net[bob].setAvailable(true)
        net[alice].connect(to: 2, timeout: nil)
        net.deliver()
        net[bob].deny(1)
        net.deliver()
        #expect(net.notes(alice).contains(.connectionFailed(2, .declinedError)))
        #expect(!net.commands(alice).contains(.reconfirm(2)))
    }
}
