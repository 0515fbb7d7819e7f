import NIOCore
import NetworkImpairment
import Testing

@_spi(Testing) @testable import GameKitTransport

/// What an attacker can learn about the password (PROTOCOL §6.3): offline from recorded
/// handshakes, nothing; online, one guess per challenge, rate-limited per source address.
@Suite("Password guessing")
struct PasswordGuessingTests {
    static let words = ["123456", "password", "qwerty", "dragon", "letmein", "monkey", "swordfish", "trustno1", "sunshine", ""]

    @Test func aRecordedHandshakeGivesAnOfflineDictionaryAttackNothingToTest() throws {
        var network = VirtualNetwork()
        let b = network.addNode(configuration: TransportConfiguration(password: "swordfish"))
        network.nodes[b].recordSent = true
        let scalar = CPace.randomScalar()
        let secret = HandshakeSecret(password: Array("swordfish".utf8))
        var initiator = try InitiatorHandshake(
            localIndex: 7, remoteAddress: network.nodes[b].address, secret: secret,
            parameters: TransportConfiguration().localParameters, payload: ByteBuffer(string: "I am Alice"), maxDatagramSize: 1200,
            now: network.now, timeout: .seconds(10), scalar: scalar)
        let initiation = initiator.datagram()
        network.injected.append(SimulatedDatagram(source: VirtualNetwork.address(9), destination: network.nodes[b].address, bytes: initiation))
        network.run(for: .milliseconds(1))
        let challengeBytes = try #require(network.nodes[b].sent.first?.bytes)
        let challenge = try #require(ChallengeMessage.decode(challengeBytes))
        guard case .request(let request) = initiator.handleChallenge(challenge, datagram: challengeBytes, now: network.now) else {
            Issue.record("the right password's challenge did not confirm")
            return
        }
        let sealed = try #require(RequestMessage.decode(request)).sealed
        let initiationHeader = initiation.getSlice(at: 0, length: InitiationMessage.headerSize)!
        let challengeHeader = challengeBytes.getSlice(at: 0, length: ChallengeMessage.headerSize)!
        let requestHeader = request.getSlice(at: 0, length: RequestMessage.headerSize)!
        let ya = Array(initiation.getSlice(at: 8, length: 32)!.readableBytesView)
        let yb = Array(challenge.share.readableBytesView)
        let transcript = KeySchedule.transcriptHash(initiationHeader: initiationHeader, challengeHeader: challengeHeader)

        func opens(point: [UInt8]) -> Bool {
            let isk = CPace.intermediateKey(sessionID: [], sharedPoint: point, initiatorShare: ya, initiatorData: [], responderShare: yb, responderData: [])
            let keys = KeySchedule.handshakeKeys(intermediateKey: isk, transcriptHash: transcript)
            return AEAD.open(challenge.tag, key: keys.challenge, counter: 0, authenticating: challengeHeader) != nil
                || AEAD.open(sealed, key: keys.request, counter: 0, authenticating: requestHeader) != nil
        }
        // Control: one who holds a secret scalar (here the initiator's) does open them: the test
        // can tell a transcript that gives the password away from one that does not.
        #expect(opens(point: try #require(CPace.multiply(scalar, yb))))
        // An observer has the shares, and for every word its generator: every group element it
        // can compute without a scalar opens nothing, for the right word as for the others.
        for word in Self.words {
            let generator = HandshakeSecret(password: Array(word.utf8)).generator
            for point in [generator, ya, yb] {
                #expect(!opens(point: point), "word \(word)")
            }
        }
        // The bytes on the wire hold no keyed digest of the password either (0.1's initiation was
        // sealed under HKDF(password, share)): the initiation is the share and zeros.
        #expect(initiation.getSlice(at: 40, length: 32)!.readableBytesView.allSatisfy { $0 == 0 })
    }

    @Test func wrongPasswordGuessesFromOneAddressAreCountedAndRateLimited() {
        var network = VirtualNetwork()
        let attacker = network.addNode(configuration: TransportConfiguration(password: "guess"))
        let honest = network.addNode(configuration: TransportConfiguration(password: "right"))
        let b = network.addNode(configuration: TransportConfiguration(password: "right"))
        func attempt() -> TransportError? {
            let before = network.nodes[attacker].connectFailures.count
            _ = try! network.nodes[attacker].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: .seconds(1), now: network.now)
            network.run(for: .seconds(2)) { $0.nodes[attacker].connectFailures.count > before }
            return network.nodes[attacker].connectFailures.last
        }
        // A burst of guesses, each told "wrong password" at once, on both sides.
        for _ in 0..<Int(GuessLimiter.failureBurst) { #expect(attempt() == .authenticationFailed) }
        let refused = network.nodes[b].events.filter { if case .handshakeFailed(_, .authenticationFailed) = $0 { true } else { false } }
        #expect(refused.count == Int(GuessLimiter.failureBurst))
        // Then no challenge at all: the next attempt hears nothing.
        #expect(attempt() == .timedOut)
        #expect(network.nodes[b].machine.endpointStatistics.guessesLimited >= 1)
        // Another address with the password is not held back meanwhile.
        #expect(network.openLink(from: honest, to: b) != nil)
        // Two seconds later the source has one guess again.
        network.run(for: .seconds(2))
        #expect(attempt() == .authenticationFailed)
        #expect(network.nodes[b].machine.endpointStatistics.handshakeAuthenticationFailures == UInt64(GuessLimiter.failureBurst) + 1)
    }

    @Test func manyHandshakesAtOnceFromOneAddressWithThePasswordSpendNoGuesses() {
        var network = VirtualNetwork()
        let a = network.addNode(configuration: TransportConfiguration(password: "right"))
        let b = network.addNode(configuration: TransportConfiguration(password: "right"))
        let links = (0..<40).map { _ in
            try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        }
        network.run(for: .seconds(5)) { network in links.allSatisfy { network.nodes[a].openedLinks.contains($0) } }
        #expect(links.allSatisfy { network.nodes[a].openedLinks.contains($0) })
        #expect(network.nodes[b].machine.endpointStatistics.guessesLimited == 0)
        // Nothing kept for the address once its challenges ended well.
        #expect(network.nodes[b].machine.guesses.count == 0)
    }

    /// An initiator that gives up before its challenge arrives (its timeout, or a path of a
    /// session's attempt that lost the race) answers the challenge when it comes with a cancel
    /// under the exchange's keys: the responder forgets it at once and counts no failed guess.
    /// With another password the challenge gets no cancel, expires, and counts.
    @Test(arguments: [("right", true), ("wrong", false)])
    func aHandshakeWithdrawnBeforeItsChallengeSpendsNoGuessWithThePassword(password: String, refunded: Bool) {
        var network = VirtualNetwork()
        let a = network.addNode(configuration: TransportConfiguration(password: password), profile: ImpairmentProfile(delay: .milliseconds(50)))
        let b = network.addNode(configuration: TransportConfiguration(password: "right"), profile: ImpairmentProfile(delay: .milliseconds(50)))
        let link = try! network.nodes[a].machine.connect(to: network.nodes[b].address, payload: ByteBuffer(), timeout: nil, now: network.now)
        network.run(for: .milliseconds(10))
        let cancelled = network.nodes[a].machine.cancelConnect(link, now: network.now)
        #expect(cancelled)
        network.run(for: .seconds(1))
        #expect(network.nodes[a].connectFailures == [.cancelled])
        var stats = network.nodes[b].machine.endpointStatistics
        #expect(stats.challengesSent == 1)
        #expect(stats.challengesCancelled == (refunded ? 1 : 0))
        #expect(stats.pendingChallenges == (refunded ? 0 : 1))
        #expect(network.nodes[b].machine.guesses.count == (refunded ? 0 : 1))
        network.run(for: .seconds(7))
        stats = network.nodes[b].machine.endpointStatistics
        #expect(stats.pendingChallenges == 0 && stats.challengesExpired == (refunded ? 0 : 1))
        #expect(network.nodes[b].events.isEmpty)
        // A repeat of the challenge gets the same cancel; nothing reaches the application either way.
        #expect(network.nodes[a].openedLinks.isEmpty)
    }

    @Test func theGuessTableStaysBoundedAgainstManySources() throws {
        var limiter = GuessLimiter()
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        for index in 0..<(GuessLimiter.maximumSources + 500) {
            let address = try SocketAddress(ipAddress: "10.\(index / 65536 % 256).\(index / 256 % 256).\(index % 256)", port: 1)
            _ = limiter.admit(address, now: now)
            limiter.finish(address, failed: true, now: now)
        }
        #expect(limiter.count <= GuessLimiter.maximumSources)
    }
}
