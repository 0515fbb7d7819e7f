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

    @Test func handshakeTakesTwoRoundTripsForTheInitiator() {
        var network = VirtualNetwork()
        let a = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let b = network.addNode(profile: ImpairmentProfile(delay: .milliseconds(10)))
        let start = network.now
        let link = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .seconds(1)) { $0.nodes[a].openedLinks.contains(link) }
        // Share and challenge, then request and response (PROTOCOL §6.1).
        #expect(network.now - start == .milliseconds(40))
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
        // 0, 0.25, 0.75, 1.75, 2.75, 3.75, 4.75 s: repeated with doubling gaps, at most 1 s,
        // until the deadline.
        #expect(initiations.count == 7)
        #expect(Set(initiations.map(\.bytes)).count == 1)
    }

    /// The handshake is two round trips, each needing both its datagrams through. Under 25 % loss
    /// each way, every one of 1,000 seeded handshakes opens within the default 10 s (with repeats
    /// capped at 2 s apart, 6 of these seeds timed out; a property test met one in CI).
    @Test func handshakesOpenWithinTheDefaultTimeoutUnderHeavyLossEachWay() {
        var timedOut: [UInt64] = []
        for seed in UInt64(1)...1000 {
            var network = VirtualNetwork()
            let profile = ImpairmentProfile(loss: 0.25, delay: .milliseconds(3))
            let a = network.addNode(profile: profile, seed: seed)
            let b = network.addNode(profile: profile, seed: seed &* 31 &+ 7)
            if network.openLink(from: a, to: b, limit: .seconds(12)) == nil { timedOut.append(seed) }
        }
        #expect(timedOut.isEmpty, "seeds whose handshake did not open: \(timedOut)")
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
        // The challenge is back at 100 ms; B accepts the request at 150 ms; its response is in
        // flight when A cancels at 160 ms.
        network.run(for: .milliseconds(160))
        let cancelled = network.nodes[a].machine.cancelConnect(link, now: network.now)
        #expect(cancelled)
        network.run(for: .seconds(1))
        #expect(network.nodes[a].connectFailures == [.cancelled])
        #expect(network.nodes[a].openedLinks.isEmpty)
        #expect(network.nodes[b].closeReasons == [.cancelledByPeer])
        #expect(network.nodes[b].openedLinks.isEmpty)
    }

    @Test func acceptPayloadLargerThanADatagramIsRefused() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.nodes[b].answer = nil
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(string: "hi"), timeout: nil, now: network.now)
        network.run(for: .milliseconds(10))
        let id = ConnectionRequest.ID(rawValue: 1)
        let limit = 1200 - ResponseMessage.minimumSize
        #expect(throws: TransportError.payloadTooLarge(size: limit + 1, limit: limit)) {
            try network.nodes[b].machine.accept(id, payload: ByteBuffer(repeating: 1, count: limit + 1), now: network.now)
        }
        // A response larger than the request it answers: the request proved its source's address.
        #expect(throws: Never.self) {
            try network.nodes[b].machine.accept(id, payload: ByteBuffer(repeating: 1, count: limit), now: network.now)
        }
    }

    @Test func initiationPayloadTooLargeForADatagramIsRefused() {
        var network = VirtualNetwork()
        let a = network.addNode()
        let limit = 1200 - RequestMessage.minimumSize
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
        // The smallest message an initiator sends (initiations are 72 bytes, requests at least 44).
        let initiationSizes = network.nodes.flatMap(\.sent).filter { $0.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.initiation.rawValue }.map(\.bytes.readableBytes)
        let smallestInitiation = initiationSizes.min()!
        var repliesChecked = 0
        for node in [b, c] {
            // Every reply to an address not yet proven (challenges, cookies, rejects); a response
            // answers a request that opened under the challenge's keys, so its source is proven.
            for reply in network.nodes[node].sent where reply.bytes.getInteger(at: 0, as: UInt8.self) != PacketType.data.rawValue {
                if reply.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.response.rawValue, HandshakeKind.of(reply.bytes) == .sealed { continue }
                let isChallenge = reply.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.response.rawValue
                // A challenge answers an initiation; cookies and rejects fit in anything an initiator sends.
                #expect(reply.bytes.readableBytes <= (isChallenge ? InitiationMessage.size : smallestInitiation))
                repliesChecked += 1
            }
        }
        #expect(repliesChecked >= 4)
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

    @Test func underLoadStateStaysBoundedAndChallengesExpire() {
        var configuration = TransportConfiguration()
        configuration.cookieThreshold = 4
        var network = VirtualNetwork()
        let b = network.addNode(configuration: configuration)
        Self.flood(&network, target: b, count: 300)
        var stats = network.nodes[b].machine.endpointStatistics
        #expect(stats.challengesSent == 4 && stats.pendingChallenges == 4)
        #expect(stats.cookieRepliesSent == 296)
        #expect(stats.connectionRequestsReceived == 0)
        network.run(for: .seconds(7))
        stats = network.nodes[b].machine.endpointStatistics
        #expect(stats.pendingChallenges == 0 && stats.challengesExpired == 4)
        #expect(network.nodes[b].events.isEmpty)
        #expect(network.nodes[b].machine.guesses.count == 4)
    }

    @Test func anAcceptedLinkTheInitiatorNeverConfirmsExpires() {
        var configuration = TransportConfiguration()
        configuration.handshakeTimeout = .seconds(3)
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode(configuration: configuration)
        // Everything A sends after its request is lost: B's link never hears from it.
        var requestSeen = false
        let initiatorAddress = network.nodes[a].address
        network.interceptor = { datagram in
            guard datagram.source == initiatorAddress else { return true }
            if requestSeen { return false }
            if datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.initiation.rawValue, HandshakeKind.of(datagram.bytes) == .sealed {
                requestSeen = true
            }
            return true
        }
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .milliseconds(10))
        #expect(network.nodes[b].machine.endpointStatistics.unconfirmedLinks == 1)
        network.run(for: .seconds(4))
        #expect(network.nodes[b].machine.endpointStatistics.unconfirmedLinks == 0)
        #expect(network.nodes[b].closeReasons == [.handshakeNotConfirmed])
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

    /// An OpenGameKit 0.1 initiator (version 1, whose initiation was sealed under the password)
    /// and a future one (version 3) are both refused with the version this side speaks.
    @Test(arguments: [UInt8(1), 3])
    func unsupportedVersionIsAnsweredWithTheSpokenVersion(version: UInt8) {
        var network = VirtualNetwork()
        let a = network.addNode()
        let b = network.addNode()
        network.interceptor = { datagram in
            if datagram.bytes.getInteger(at: 0, as: UInt8.self) == PacketType.initiation.rawValue {
                datagram.bytes.setInteger(version, at: 1)
            }
            return true
        }
        _ = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .seconds(5)) { !$0.nodes[a].connectFailures.isEmpty }
        #expect(network.nodes[a].connectFailures == [.unsupportedVersion(remote: ProtocolVersion.current)])
        #expect(network.nodes[b].events.isEmpty)
        #expect(network.nodes[b].machine.endpointStatistics.unsupportedVersions >= 1)
        #expect(network.nodes[b].machine.endpointStatistics.challengesSent == 0)
    }

    /// A 0.1 initiation as it was on the wire (type 4, version 1, an ephemeral key and a sealed
    /// part), byte for byte in layout: the reject names version 2, which a 0.1 initiator reports
    /// as `unsupportedVersion(remote: 2)`.
    @Test func aVersionOneInitiationGetsARejectNamingVersionTwo() throws {
        var network = VirtualNetwork()
        let b = network.addNode()
        network.nodes[b].recordSent = true
        var old = ByteBuffer()
        old.writeInteger(PacketType.initiation.rawValue)
        old.writeInteger(UInt8(1))
        old.writeInteger(UInt16(0))
        old.writeInteger(UInt32(0xC0FFEE))
        old.writeRepeatingByte(0x42, count: 32 + TransportParameters.encodedSize + 16 + 16)
        network.injected.append(SimulatedDatagram(source: VirtualNetwork.address(9), destination: network.nodes[b].address, bytes: old))
        network.run(for: .milliseconds(1))
        let reply = try #require(network.nodes[b].sent.first?.bytes)
        let reject = try #require(RejectMessage.decode(reply))
        #expect(reject.reason == .unsupportedVersion && reject.version == 2 && reject.receiverIndex == 0xC0FFEE)
        #expect(reject.echo == ByteBuffer(repeating: 0x42, count: 16))
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

    /// CPace's abort: an initiation whose share is the identity, or no group element at all, gets
    /// no challenge (and the responder keeps nothing).
    @Test(arguments: [
        [UInt8](repeating: 0, count: 32),
        CPaceTests.Vector.invalidEncoding,
    ])
    func aShareThatIsNotAGroupElementGetsNoChallenge(share: [UInt8]) throws {
        var network = VirtualNetwork()
        let b = network.addNode()
        network.nodes[b].recordSent = true
        var datagram = ByteBuffer()
        InitiationMessage(version: ProtocolVersion.current, senderIndex: 77, share: ByteBuffer(bytes: share), mac2: ByteBuffer())
            .encodeWithoutMAC(into: &datagram)
        datagram.writeRepeatingByte(0, count: WireSize.mac)
        network.injected.append(SimulatedDatagram(source: VirtualNetwork.address(9), destination: network.nodes[b].address, bytes: datagram))
        network.run(for: .milliseconds(1))
        let stats = network.nodes[b].machine.endpointStatistics
        #expect(network.nodes[b].sent.isEmpty)
        #expect(stats.challengesSent == 0 && stats.pendingChallenges == 0 && stats.droppedMalformed == 1)
        #expect(network.nodes[b].machine.guesses.count == 0)
    }

    @Test func aFloodOfInitiationsGetsChallengesOnlyUpToTheCookieThreshold() {
        var network = VirtualNetwork()
        let b = network.addNode(configuration: TransportConfiguration(password: "right"))
        for index in 0..<300 {
            let datagram = try! TransportEndpoint.makeInitiation(configuration: TransportConfiguration(password: "wrong"))
            network.injected.append(SimulatedDatagram(source: try! SocketAddress(ipAddress: "10.7.\(index / 250).\(index % 250 + 1)", port: 2000), destination: network.nodes[b].address, bytes: datagram))
        }
        network.run(for: .milliseconds(1))
        let stats = network.nodes[b].machine.endpointStatistics
        // Sixteen challenges (the default cookie threshold), then cookies before any group operation.
        #expect(stats.challengesSent == 16)
        #expect(stats.cookieRepliesSent == 284)
    }

    @Test func repeatedCookiesDoNotMakeTheInitiatorSendFasterThanItsTimer() throws {
        var handshake = try InitiatorHandshake(
            localIndex: 1, remoteAddress: VirtualNetwork.address(2), secret: HandshakeSecret(password: nil),
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
                localIndex: 4242, remoteAddress: network.nodes[b].address, secret: HandshakeSecret(password: nil),
                parameters: TransportConfiguration().localParameters, payload: ByteBuffer(), maxDatagramSize: 1200,
                now: network.now, timeout: .seconds(10)
            ).datagram()
        }
        for datagram in [try initiation(), try initiation()] {
            network.injected.append(SimulatedDatagram(source: source, destination: network.nodes[b].address, bytes: datagram))
        }
        network.run(for: .milliseconds(1))
        #expect(network.nodes[b].machine.endpointStatistics.challengesSent == 1)
        #expect(network.nodes[b].machine.endpointStatistics.droppedStrayHandshake == 1)
    }
}
