import Crypto
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// Liveness probes between endpoint machines in virtual time: a watched peer that dies is
/// reported silent within seconds, one that comes back alive again; forged, replayed and flooding
/// traffic changes nothing.
@Suite("Liveness probes")
struct LivenessTests {
    /// Node 0 watches node 1.
    static func pair(_ watcher: TransportConfiguration = TransportConfiguration(), _ watched: TransportConfiguration = TransportConfiguration())
        -> (VirtualNetwork, LivenessWatchID)
    {
        var net = VirtualNetwork()
        net.addNode(configuration: watcher)
        net.addNode(configuration: watched)
        let id = try! net.nodes[0].machine.watch(addresses: [net.nodes[1].address], peerKey: net.nodes[1].machine.livenessPublicKey, now: net.now)
        return (net, id)
    }

    static func changes(_ node: SimulatedNode) -> [Bool] {
        node.events.compactMap { if case .liveness(_, let alive) = $0 { alive } else { nil } }
    }

    @Test func aPeerThatAnswersStaysAliveAtOneProbeASecond() {
        var (net, _) = Self.pair()
        net.run(for: .seconds(30))
        #expect(Self.changes(net.nodes[0]) == [])
        let sent = net.nodes[0].machine.endpointStatistics.livenessProbesSent
        #expect(sent >= 29 && sent <= 31, "\(sent) probes in 30 s")
        #expect(net.nodes[1].machine.endpointStatistics.livenessProbesAnswered == sent)
        #expect(net.nodes[0].machine.endpointStatistics.livenessAnswersAccepted == sent)
    }

    @Test func aPeerThatDiesIsSilentWithinFourSecondsAndAConfirmationAndAliveAgainWhenItAnswers() {
        var (net, _) = Self.pair()
        net.run(for: .seconds(10))
        let died = net.now
        nonisolated(unsafe) var dead = true
        net.interceptor = { datagram in !(dead && datagram.destination == VirtualNetwork.address(2)) }
        let silent = net.run(for: .seconds(10)) { Self.changes($0.nodes[0]) == [false] }
        #expect(silent)
        let gone = net.now - died
        // Three intervals unanswered, and the confirmation after them (PROTOCOL §6.6).
        #expect(gone <= .seconds(4) + LivenessWatcher.confirmationDelay && gone >= .seconds(2), "reported after \(gone.nanoseconds / 1_000_000) ms")
        // Probed every 5 s while silent, and alive again at the first answer.
        dead = false
        let back = net.now
        #expect(net.run(for: .seconds(10)) { Self.changes($0.nodes[0]) == [false, true] })
        #expect(net.now - back <= LivenessWatcher.silentInterval)
    }

    /// The watcher's loop runs its timers but has not read its socket (a starved process): three
    /// probes' answers wait there. The timer that finds them unanswered only suspects silence;
    /// the answers read before the confirmation clear it. With no answers waiting, the peer is
    /// silent at the confirmation.
    @Test(arguments: [true, false]) func answersWaitingInTheSocketClearASuspectedSilence(answersWereWaiting: Bool) {
        var (net, id) = Self.pair()
        net.run(for: .seconds(10))
        nonisolated(unsafe) var held: [SimulatedDatagram] = []
        nonisolated(unsafe) var holding = true
        net.interceptor = { datagram in
            guard holding, datagram.destination == VirtualNetwork.address(1) else { return true }
            if answersWereWaiting { held.append(datagram) }
            return false
        }
        // Runs until the silence is suspected (three probes left and went unanswered).
        #expect(net.run(for: .seconds(10)) { $0.nodes[0].machine.livenessWatcher.watches[id]!.suspectedAt != nil })
        let suspected = net.now
        #expect(Self.changes(net.nodes[0]) == [])
        if answersWereWaiting {
            #expect(held.count >= LivenessWatcher.probesBeforeSilence)
            holding = false
            net.injected.append(contentsOf: held)
            net.run(for: .seconds(10))
            #expect(Self.changes(net.nodes[0]) == [])
            #expect(net.nodes[0].machine.endpointStatistics.livenessSuspicionsCleared == 1)
        } else {
            #expect(net.run(for: .seconds(1)) { Self.changes($0.nodes[0]) == [false] })
            #expect(net.now - suspected == LivenessWatcher.confirmationDelay)
        }
    }

    /// A watcher held up for seconds (stopped, or starved) never reports a live peer silent,
    /// whichever it runs first when it resumes: its timers or the answers that waited.
    @Test(arguments: [true, false]) func aStalledWatcherNeverReportsALivePeerSilent(timersFirst: Bool) {
        var (net, _) = Self.pair()
        net.timersFirstOnResume = timersFirst
        net.run(for: .seconds(10))
        for stall in [1, 3, 7] {
            net.pause(0, for: .seconds(Int64(stall)))
            net.run(for: .seconds(Int64(stall) + 5))
        }
        #expect(Self.changes(net.nodes[0]) == [])
        #expect(net.pausedUntil.isEmpty)
    }

    /// A peer that dies while the watcher is held up is reported within 5 s plus the stall; and
    /// on a machine so busy that the watcher's loop loses 300 ms of every 1.3 s, within 5 s plus
    /// the time it lost.
    @Test func aDeadPeerIsReportedWithinFiveSecondsPlusTheStall() {
        var (net, _) = Self.pair()
        net.run(for: .seconds(10))
        nonisolated(unsafe) var dead = true
        net.interceptor = { datagram in !(dead && datagram.destination == VirtualNetwork.address(2)) }
        var died = net.now
        net.pause(0, for: .seconds(3))
        #expect(net.run(for: .seconds(20)) { Self.changes($0.nodes[0]) == [false] })
        #expect(net.now - died <= .seconds(5 + 3), "reported after \(net.now - died)")

        // Alive again, then a busy machine: the watcher is held up 300 ms of every 1.3 s.
        dead = false
        #expect(net.run(for: .seconds(10)) { Self.changes($0.nodes[0]) == [false, true] })
        net.run(for: .seconds(3))
        dead = true
        died = net.now
        var lost = TimeAmount.nanoseconds(0)
        while Self.changes(net.nodes[0]).count < 3, net.now - died < .seconds(30) {
            net.run(for: .seconds(1))
            net.pause(0, for: .milliseconds(300))
            lost = lost + .milliseconds(300)
            net.run(for: .milliseconds(300))
        }
        #expect(Self.changes(net.nodes[0]) == [false, true, false])
        #expect(net.now - died <= .seconds(5) + lost, "reported after \(net.now - died), \(lost) of it held up")
    }

    @Test func forgedAndReplayedAnswersAreIgnored() {
        var (net, _) = Self.pair()
        // Capture a real answer, then kill the peer and replay it, and forge others with the
        // nonces of live probes but a wrong MAC.
        nonisolated(unsafe) var captured: ByteBuffer?
        nonisolated(unsafe) var dead = false
        nonisolated(unsafe) var probes: [UInt64] = []
        net.interceptor = { datagram in
            let type = datagram.bytes.getInteger(at: datagram.bytes.readerIndex, as: UInt8.self)
            if type == PacketType.probeReply.rawValue, captured == nil { captured = datagram.bytes }
            if type == PacketType.probe.rawValue, let nonce = datagram.bytes.getInteger(at: datagram.bytes.readerIndex + 36, as: UInt64.self) {
                probes.append(nonce)
            }
            return !(dead && datagram.destination == VirtualNetwork.address(2))
        }
        net.run(for: .seconds(3))
        let answer = try! #require(captured)
        dead = true
        for second in 0..<8 {
            net.run(for: .seconds(1))
            net.injected.append(SimulatedDatagram(source: VirtualNetwork.address(2), destination: VirtualNetwork.address(1), bytes: answer))
            var forged = LivenessMessage.reply(nonce: probes.last ?? 0, key: SymmetricKey(size: .bits256))
            forged.setInteger(UInt8(second), at: 20)
            net.injected.append(SimulatedDatagram(source: VirtualNetwork.address(2), destination: VirtualNetwork.address(1), bytes: forged))
        }
        net.run(for: .milliseconds(10))
        #expect(Self.changes(net.nodes[0]) == [false])
        #expect(net.nodes[0].machine.endpointStatistics.livenessAnswersIgnored >= 16)
    }

    @Test func aPeerWithAnotherPasswordNeverAnswersAndLooksSilent() {
        var (net, _) = Self.pair(TransportConfiguration(password: "one"), TransportConfiguration(password: "two"))
        net.nodes[1].recordSent = true
        #expect(net.run(for: .seconds(10)) { Self.changes($0.nodes[0]) == [false] })
        #expect(net.nodes[1].sent.isEmpty)
        #expect(net.nodes[1].machine.endpointStatistics.livenessProbesDropped >= 3)
    }

    @Test func malformedProbesAreDroppedAndNoAnswerIsLargerThanItsProbe() {
        var (net, _) = Self.pair()
        net.nodes[1].recordSent = true
        var random = SeededRandom(seed: 7)
        for size in [0, 1, 27, 28, 59, 61, 75, 77, 200] {
            var bytes = ByteBuffer(bytes: (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) })
            if size > 0 { bytes.setInteger(PacketType.probe.rawValue, at: 0) }
            if size > 1 { bytes.setInteger(UInt8(1), at: 1) }
            net.injected.append(SimulatedDatagram(source: VirtualNetwork.address(9), destination: VirtualNetwork.address(2), bytes: bytes))
        }
        net.run(for: .seconds(5))
        #expect(Self.changes(net.nodes[0]) == [])
        #expect(net.nodes[1].machine.endpointStatistics.livenessProbesDropped >= 7)
        #expect(net.nodes[1].sent.allSatisfy { $0.destination == VirtualNetwork.address(1) && $0.bytes.readableBytes == LivenessMessage.replySize })
    }

    @Test func aFloodOfProbesFromAnyoneCannotSilenceALivePeerAndANewProberGetsThroughWithACookie() {
        // Node 0 watches node 1 and is known to it. An attacker sends 2,000 probes a second under
        // new keys, half of them from node 0's own address. Node 2 starts watching node 1 in the
        // middle of it.
        var (net, _) = Self.pair()
        net.addNode()
        net.run(for: .seconds(3))
        var random = SeededRandom(seed: 11)
        for tick in 0..<200 {
            for flood in 0..<20 {
                let key = Curve25519.KeyAgreement.PrivateKey()
                let probe = LivenessMessage.probe(
                    .init(proberKey: Array(key.publicKey.rawRepresentation), nonce: random.next(), cookie: nil), key: SymmetricKey(size: .bits256))
                let source = flood % 2 == 0 ? VirtualNetwork.address(1) : VirtualNetwork.address(50 + flood)
                net.injected.append(SimulatedDatagram(source: source, destination: VirtualNetwork.address(2), bytes: probe))
            }
            if tick == 50 {
                _ = try! net.nodes[2].machine.watch(addresses: [net.nodes[1].address], peerKey: net.nodes[1].machine.livenessPublicKey, now: net.now)
            }
            net.run(for: .milliseconds(10))
        }
        #expect(Self.changes(net.nodes[0]) == [])
        #expect(Self.changes(net.nodes[2]) == [])
        #expect(net.nodes[2].machine.endpointStatistics.livenessAnswersAccepted >= 1)
        let responder = net.nodes[1].machine.endpointStatistics
        #expect(responder.livenessCookiesSent >= 1)
        #expect(responder.livenessProbesDropped >= 3_000)
    }

    @Test func manyWatchedPeersShareFiftyProbesASecond() {
        var net = VirtualNetwork()
        net.addNode()
        for peer in 0..<200 {
            let key = Array(Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation)
            _ = try! net.nodes[0].machine.watch(addresses: [VirtualNetwork.address(100 + peer % 100)], peerKey: key, now: net.now)
        }
        #expect(LivenessWatcher.interval(watching: 200) == .seconds(4))
        net.run(for: .seconds(4))
        let start = net.nodes[0].machine.endpointStatistics.livenessProbesSent
        net.run(for: .seconds(20))
        let rate = Double(net.nodes[0].machine.endpointStatistics.livenessProbesSent - start) / 20
        // Nobody answers: after three probes each peer is probed every 5 s (silent), 40 a second.
        #expect(rate <= Double(LivenessWatcher.maximumProbesPerSecond), "\(rate) probes a second")
        #expect(Self.changes(net.nodes[0]).count == 200 && Self.changes(net.nodes[0]).allSatisfy { !$0 })
    }

    @Test func watchingABadKeyIsRefused() {
        var net = VirtualNetwork()
        net.addNode()
        #expect(throws: TransportError.self) { try net.nodes[0].machine.watch(addresses: [VirtualNetwork.address(2)], peerKey: [1, 2, 3], now: net.now) }
        #expect(throws: TransportError.self) {
            try net.nodes[0].machine.watch(addresses: [VirtualNetwork.address(2)], peerKey: [UInt8](repeating: 0, count: 32), now: net.now)
        }
        #expect(throws: TransportError.self) { try net.nodes[0].machine.watch(addresses: [], peerKey: net.nodes[0].machine.livenessPublicKey, now: net.now) }
    }
}
