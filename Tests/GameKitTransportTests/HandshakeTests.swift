import NIOCore
import NetworkImpairment
import Testing

@_spi(Testing) @testable import GameKitTransport

@Suite("Handshake")
struct HandshakeTests {
    @Test func acceptedHandshakeOpensLinkOnBothSidesWithBothPayloads() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = .accept(ByteBuffer(string: "welcome"))
        let links = network.openLink(from: a, to: b, payload: ByteBuffer(string: "I am Alice"))
        #expect(links != nil)
        let request = network.nodes[b].events.compactMap { event -> ConnectionRequest? in
            if case .connectionRequest(let request) = event { return request } else { return nil }
        }
        #expect(request.count == 1)
        #expect(request.first?.payload == ByteBuffer(string: "I am Alice"))
        #expect(request.first?.remoteAddress == network.nodes[a].address)
        let initiatorOpened = network.nodes[a].events.compactMap { event -> ByteBuffer? in
            if case .linkOpened(_, _, let payload) = event { return payload } else { return nil }
        }
        #expect(initiatorOpened == [ByteBuffer(string: "welcome")])
        let responderOpened = network.nodes[b].events.compactMap { event -> ByteBuffer? in
            if case .linkOpened(_, _, let payload) = event { return payload } else { return nil }
        }
        #expect(responderOpened == [ByteBuffer(string: "I am Alice")])
    }

    @Test func bothEndsShowOneVerificationCodeAndAnInterposerCannotMatchIt() throws {
        // A believes it reaches B, but M answers and runs its own handshake with B (a relay
        // that interposes): each pair agrees on its code, A's and B's differ.
        var network = VirtualNetwork()
        let a = network.addNode()
        let m = network.addNode()
        let b = network.addNode()
        network.nodes[m].answer = .accept(ByteBuffer())
        network.nodes[b].answer = .accept(ByteBuffer())
        let first = network.openLink(from: a, to: m)
        let second = network.openLink(from: m, to: b)
        let (aToM, mFromA) = try #require(first)
        let (mToB, bFromM) = try #require(second)
        let codeA = try #require(network.nodes[a].machine.verificationCode(aToM))
        let codeB = try #require(network.nodes[b].machine.verificationCode(bFromM))
        #expect(codeA.count == 5)
        #expect(network.nodes[m].machine.verificationCode(mFromA) == codeA)
        #expect(network.nodes[m].machine.verificationCode(mToB) == codeB)
        #expect(codeA != codeB)
        #expect(network.nodes[a].machine.verificationCode(LinkID(rawValue: 0xDEAD)) == nil)
    }

    @Test func handshakeCompletesInOneRoundTripForTheInitiator() {
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let start = network.now
        let link = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .seconds(1)) { $0.nodes[a].openedLinks.contains(link) }
        #expect(network.now - start == .milliseconds(20))
    }

    @Test func wrongPasswordFailsOnBothSidesWithAuthenticationError() {
        var network = VirtualNetwork()
        let a = network.addNode(configuration: TransportConfiguration(password: "right"))
        let b = network.addNode(configuration: TransportConfiguration(password: "wrong"))
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        let start = network.now
        network.run(for: .seconds(30)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.authenticationFailed])
        // Failed at once, not by timeout.
        #expect(network.now == start)
        let responderFailures = network.nodes[b].events.compactMap { event -> TransportError? in
            if case .handshakeFailed(_, let error) = event { return error } else { return nil }
        }
        #expect(responderFailures == [.authenticationFailed])
        #expect(network.nodes[b].machine.endpointStatistics.pendingRequests == 0)
        #expect(network.nodes[b].openedLinks.isEmpty)
    }

    @Test(arguments: [(String?.none, String?.some("secret")), (String?.some("secret"), String?.none)])
    func missingPasswordOnEitherSideFailsWithAuthenticationError(initiator: String?, responder: String?) {
        var network = VirtualNetwork()
        let a = network.addNode(configuration: TransportConfiguration(password: initiator))
        let b = network.addNode(configuration: TransportConfiguration(password: responder))
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .seconds(30)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.authenticationFailed])
    }

    @Test func samePasswordOpensTheLink() {
        var network = VirtualNetwork()
        let a = network.addNode(configuration: TransportConfiguration(password: "hunter2"))
        let b = network.addNode(configuration: TransportConfiguration(password: "hunter2"))
        #expect(network.openLink(from: a, to: b) != nil)
    }

    @Test func deniedRequestReachesInitiatorWithItsCode() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = .deny(42)
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .seconds(30)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.denied(code: 42)])
        #expect(network.nodes[b].openedLinks.isEmpty)
    }

    @Test func denialSurvivesLossOfTheRejectThroughRepeats() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = .deny(7)
        var dropped = 0
        network.interceptor = { datagram in
            // Drop the first two rejects.
            if datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.reject.rawValue, dropped < 2 {
                dropped += 1
                return false
            }
            return true
        }
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .seconds(30)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.denied(code: 7)])
        // One request only: the repeats were recognised.
        let requests = network.nodes[b].events.filter { if case .connectionRequest = $0 { true } else { false } }
        #expect(requests.count == 1)
    }

    @Test func unansweredRequestTimesOutOnBothSides() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = nil
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: .seconds(3), now: network.now)
        network.run(for: .seconds(30)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.timedOut])
        network.run(for: .seconds(1))
        let withdrawals = network.nodes[b].events.compactMap { event -> ConnectionRequestWithdrawal? in
            if case .connectionRequestWithdrawn(_, let reason) = event { return reason } else { return nil }
        }
        #expect(withdrawals == [.timedOut])
        #expect(network.nodes[b].machine.endpointStatistics.pendingRequests == 0)
    }

    @Test func silentResponderTimesOutAfterRepeatingTheInitiation() {
        var network = VirtualNetwork()
        let a = network.addNode()
        network.nodes[a].recordSent = true
        let nowhere = VirtualNetwork.address(99)
        _ = try! network.nodes[a].machine.connect(to: nowhere, payload: ByteBuffer(), timeout: .seconds(5), now: network.now)
        network.run(for: .seconds(30)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.timedOut])
        let initiations = network.nodes[a].sent.filter { $0.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.initiation.rawValue }
        // 0, 0.25, 0.75, 1.75, 3.75 s: repeated with doubling gaps until the deadline.
        #expect(initiations.count == 5)
        #expect(Set(initiations.map(\.bytes)).count == 1)
    }

    @Test func requestExpiresWhenTheInitiatorVanishes() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = nil
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: .seconds(60), now: network.now)
        network.run(for: .seconds(1))
        // A disappears: nothing more of it reaches B.
        let vanished = network.nodes[a].address
        network.interceptor = { $0.source != vanished }
        network.run(for: .seconds(10))
        let withdrawals = network.nodes[b].events.compactMap { event -> ConnectionRequestWithdrawal? in
            if case .connectionRequestWithdrawn(_, let reason) = event { return reason } else { return nil }
        }
        #expect(withdrawals == [.expired])
    }

    @Test func cancelledRequestIsWithdrawnAtTheResponder() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = nil
        let link = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .milliseconds(100))
        let cancelled = network.nodes[a].machine.cancelConnect(link, now: network.now)
        #expect(cancelled)
        network.run(for: .milliseconds(100))
        #expect(network.nodes[a].connectFailures == [.cancelled])
        let withdrawals = network.nodes[b].events.compactMap { event -> ConnectionRequestWithdrawal? in
            if case .connectionRequestWithdrawn(_, let reason) = event { return reason } else { return nil }
        }
        #expect(withdrawals == [.cancelled])
        // Accepting the withdrawn request is refused.
        #expect(throws: TransportError.unknownConnectionRequest) {
            try network.nodes[b].machine.accept(ConnectionRequest.ID(rawValue: 1), payload: ByteBuffer(), now: network.now)
        }
    }

    @Test func cancelAfterAcceptClosesTheUnconfirmedLink() {
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(50)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(50)))
        let link = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        // B accepts at 50 ms; its response is in flight when A cancels at 60 ms.
        network.run(for: .milliseconds(60))
        let cancelled = network.nodes[a].machine.cancelConnect(link, now: network.now)
        #expect(cancelled)
        network.run(for: .seconds(1))
        #expect(network.nodes[a].connectFailures == [.cancelled])
        #expect(network.nodes[a].openedLinks.isEmpty)
        #expect(network.nodes[b].closeReasons == [.cancelledByPeer])
        #expect(network.nodes[b].openedLinks.isEmpty)
    }

    @Test func acceptPayloadLargerThanTheInitiationAllowsIsRefused() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = nil
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(string: "hi"), timeout: nil, now: network.now)
        network.run(for: .milliseconds(10))
        let id = ConnectionRequest.ID(rawValue: 1)
        // The initiation is 94 bytes; a response may carry 94 - 80 = 14 bytes.
        #expect(throws: TransportError.payloadTooLarge(size: 15, limit: 14)) {
            try network.nodes[b].machine.accept(id, payload: ByteBuffer(repeating: 1, count: 15), now: network.now)
        }
        #expect(throws: Never.self) {
            try network.nodes[b].machine.accept(id, payload: ByteBuffer(repeating: 1, count: 14), now: network.now)
        }
    }

    @Test func initiationPayloadTooLargeForADatagramIsRefused() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let limit = 1200 - InitiationMessage.minimumSize
        #expect(throws: TransportError.payloadTooLarge(size: limit + 1, limit: limit)) {
            try network.nodes[a].machine.connect(to: VirtualNetwork.address(2), payload: ByteBuffer(repeating: 0, count: limit + 1), timeout: nil, now: network.now)
        }
    }

    @Test func noReplyIsLargerThanTheDatagramItAnswers() {
        var network = VirtualNetwork()
        let a = network.addNode(configuration: TransportConfiguration(password: "x"))
        var config = TransportConfiguration()
        config.cookieThreshold = 0
        let b = network.addNode(configuration: config)
        let c = network.addNode(configuration: config)
        network.nodes[c].answer = .deny(1)
        for index in network.nodes.indices { network.nodes[index].recordSent = true }
        // Cookie reply, authentication reject; then accepted and denied handshakes.
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: .seconds(2), now: network.now)
        network.run(for: .seconds(3))
        var plain = TransportConfiguration()
        plain.cookieThreshold = 0
        let d = network.addNode(configuration: plain)
        network.nodes[d].recordSent = true
        _ = network.openLink(from: d, to: b, payload: ByteBuffer(repeating: 9, count: 40))
        _ = try! network.nodes[d].machine.connect(to: network.nodes[c].address, payload: ByteBuffer(), timeout: .seconds(2), now: network.now)
        network.run(for: .seconds(3))
        let initiationSizes = network.nodes.flatMap(\.sent).filter { $0.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.initiation.rawValue }.map(\.bytes.readableBytes)
        let smallestInitiation = initiationSizes.min()!
        for node in [b, c] {
            for reply in network.nodes[node].sent where reply.bytes.getInteger(at: 0, as: UInt8.self) != PacketType.data.rawValue {
                #expect(reply.bytes.readableBytes <= smallestInitiation)
            }
        }
    }

    // MARK: - Defence against floods

    /// Valid initiations from `count` distinct spoofed sources, delivered to node `target`.
    static func flood(_ network: inout VirtualNetwork, target: Int, count: Int) {
        for index in 0..<count {
            let datagram = try! TransportEndpoint.makeInitiation()
            network.injected.append(SimulatedDatagram(
                source: try! SocketAddress(ipAddress: "10.9.\(index / 250).\(index % 250 + 1)", port: 1000 + index),
                destination: network.nodes[target].address,
                bytes: datagram
            ))
        }
        network.run(for: .milliseconds(1))
    }

    @Test func withCookiesRequiredAFloodLeavesNoStateAtAll() {
        var configuration = TransportConfiguration()
        configuration.cookieThreshold = 0
        var network = VirtualNetwork()
        let b = network.addNode(configuration: configuration)
        Self.flood(&network, target: b, count: 500)
        let stats = network.nodes[b].machine.endpointStatistics
        #expect(stats.cookieRepliesSent == 500)
        #expect(stats.pendingRequests == 0 && stats.unconfirmedLinks == 0 && stats.links == 0)
        #expect(stats.connectionRequestsReceived == 0)
        #expect(network.nodes[b].events.isEmpty)
    }

    @Test func underLoadStateStaysBoundedAndUnconfirmedLinksExpire() {
        var configuration = TransportConfiguration()
        configuration.cookieThreshold = 4
        configuration.handshakeTimeout = .seconds(3)
        var network = VirtualNetwork()
        let b = network.addNode(configuration: configuration)  // accepts every request
        Self.flood(&network, target: b, count: 300)
        var stats = network.nodes[b].machine.endpointStatistics
        #expect(stats.connectionRequestsReceived == 4)
        #expect(stats.unconfirmedLinks + stats.pendingRequests == 4)
        #expect(stats.cookieRepliesSent == 296)
        network.run(for: .seconds(4))
        stats = network.nodes[b].machine.endpointStatistics
        #expect(stats.unconfirmedLinks == 0 && stats.links == 0)
        #expect(network.nodes[b].closeReasons == Array(repeating: .handshakeNotConfirmed, count: 4))
        #expect(network.nodes[b].openedLinks.isEmpty)
    }

    @Test func genuineInitiatorGetsThroughTheCookieRoundTrip() {
        var configuration = TransportConfiguration()
        configuration.cookieThreshold = 0
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode(configuration: configuration)
        #expect(network.openLink(from: a, to: b) != nil)
        #expect(network.nodes[b].machine.endpointStatistics.cookieRepliesSent == 1)
    }

    @Test func unsupportedVersionIsAnsweredWithTheSpokenVersion() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.interceptor = { datagram in
            // A future initiator: same layout, version 2.
            if datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.initiation.rawValue {
                datagram.bytes.setInteger(UInt8(2), at: 1)
            }
            return true
        }
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .seconds(5)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.unsupportedVersion(remote: 1)])
        #expect(network.nodes[b].events.isEmpty)
        #expect(network.nodes[b].machine.endpointStatistics.unsupportedVersions >= 1)
    }

    // MARK: - Review findings

    @Test func aLateDuplicateOfAnInitiationAfterConfirmationIsAbsorbed() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        var initiation: SimulatedDatagram?
        network.interceptor = { datagram in
            if datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.initiation.rawValue { initiation = datagram }
            return true
        }
        _ = network.openLink(from: a, to: b)!
        network.interceptor = nil
        network.injected.append(initiation!)
        network.run(for: .seconds(1))
        let requests = network.nodes[b].events.filter { if case .connectionRequest = $0 { true } else { false } }
        #expect(requests.count == 1)
    }

    @Test func aLowOrderEphemeralKeyIsRefusedAtAccept() throws {
        var network = VirtualNetwork()
        let b = network.addNode()
        network.nodes[b].answer = nil
        network.nodes[b].recordSent = true
        // A hand-made initiation whose ephemeral key is the point of order one (all zeros).
        let zeroKey = ByteBuffer(repeating: 0, count: 32)
        var header = ByteBuffer()
        header.writeInteger(PacketType.initiation.rawValue)
        header.writeInteger(ProtocolVersion.current)
        header.writeInteger(UInt16(0))
        header.writeInteger(UInt32(77))
        header.writeImmutableBuffer(zeroKey)
        var plaintext = ByteBuffer()
        TransportConfiguration().localParameters.encode(into: &plaintext)
        var datagram = header
        AEAD.seal(plaintext, key: KeySchedule.initiationKey(psk: PreSharedKey(password: nil), initiatorEphemeral: zeroKey), counter: 0, authenticating: header, into: &datagram)
        datagram.writeRepeatingByte(0, count: 16)
        network.injected.append(SimulatedDatagram(source: VirtualNetwork.address(9), destination: network.nodes[b].address, bytes: datagram))
        network.run(for: .milliseconds(1))
        let request = try #require(network.nodes[b].events.compactMap { event -> ConnectionRequest? in
            if case .connectionRequest(let request) = event { return request } else { return nil }
        }.first)
        #expect(throws: TransportError.authenticationFailed) {
            try network.nodes[b].machine.accept(request.id, payload: ByteBuffer(), now: network.now)
        }
        network.run(for: .milliseconds(1))
        #expect(network.nodes[b].sent.contains { $0.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.reject.rawValue })
        #expect(network.nodes[b].machine.links.isEmpty)
    }

    @Test func failedAuthenticationsBeyondTheReplyBudgetRequireCookies() {
        var network = VirtualNetwork()
        let b = network.addNode(configuration: TransportConfiguration(password: "right"))
        for index in 0..<300 {
            let datagram = try! TransportEndpoint.makeInitiation(configuration: TransportConfiguration(password: "wrong"))
            network.injected.append(SimulatedDatagram(source: try! SocketAddress(ipAddress: "10.7.\(index / 250).\(index % 250 + 1)", port: 2000), destination: network.nodes[b].address, bytes: datagram))
        }
        network.run(for: .milliseconds(1))
        let stats = network.nodes[b].machine.endpointStatistics
        // About one bucket of rejects (100), then cookies before any key is derived.
        #expect(stats.handshakeAuthenticationFailures <= 101)
        #expect(stats.cookieRepliesSent >= 199)
    }

    @Test func repeatedCookiesDoNotMakeTheInitiatorSendFasterThanItsTimer() throws {
        var handshake = try InitiatorHandshake(
            localIndex: 1, remoteAddress: VirtualNetwork.address(2), psk: PreSharedKey(password: nil),
            parameters: TransportConfiguration().localParameters, payload: ByteBuffer(), maxDatagramSize: 1200,
            now: .uptimeNanoseconds(0), timeout: .seconds(10)
        )
        let cookie = ByteBuffer(repeating: 3, count: 16)
        let now = NIODeadline.uptimeNanoseconds(1_000_000)
        #expect(handshake.acceptCookie(cookie, now: now) != nil)
        for step in 1...5 {
            #expect(handshake.acceptCookie(cookie, now: now + .milliseconds(Int64(step * 10))) == nil)
        }
        #expect(handshake.acceptCookie(cookie, now: now + .milliseconds(300)) != nil)
    }

    @Test func unknownRejectReasonsFailTheHandshakeAsADenial() {
        var bytes = ByteBuffer()
        RejectMessage(version: 1, reason: .denied, receiverIndex: 5, code: 8, echo: ByteBuffer(repeating: 1, count: 16)).encode(into: &bytes)
        bytes.setInteger(UInt8(200), at: 2)
        #expect(RejectMessage.decode(bytes)?.reason == .denied)
    }

    @Test func anIdleEndpointStillRotatesItsCookieSecrets() {
        var network = VirtualNetwork()
        let b = network.addNode()
        let deadline = network.nodes[b].machine.nextDeadline
        #expect(deadline != nil && deadline! <= network.now + CookieGenerator.rotationInterval)
    }

    @Test func aSecondInitiationWithTheSameIndexButAnotherKeyIsDropped() throws {
        var network = VirtualNetwork()
        let b = network.addNode()
        network.nodes[b].answer = nil
        let source = VirtualNetwork.address(9)
        func initiation() throws -> ByteBuffer {
            try InitiatorHandshake(
                localIndex: 4242, remoteAddress: network.nodes[b].address, psk: PreSharedKey(password: nil),
                parameters: TransportConfiguration().localParameters, payload: ByteBuffer(), maxDatagramSize: 1200,
                now: network.now, timeout: .seconds(10)
            ).datagram()
        }
        for datagram in [try initiation(), try initiation()] {
            network.injected.append(SimulatedDatagram(source: source, destination: network.nodes[b].address, bytes: datagram))
        }
        network.run(for: .milliseconds(1))
        let requests = network.nodes[b].events.filter { if case .connectionRequest = $0 { true } else { false } }
        #expect(requests.count == 1)
        #expect(network.nodes[b].machine.endpointStatistics.droppedStrayHandshake == 1)
    }
}
