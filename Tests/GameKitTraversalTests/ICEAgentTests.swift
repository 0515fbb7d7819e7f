import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTraversal

/// Two ICE agents over a simulated network in virtual time: addresses, optional NAT-style
/// filtering (inbound only from addresses a port has sent to), seeded loss.
struct ICESimulation {
    struct Port {
        var agent: Int
        var base: ICEAgent.Base
        /// The address others see and send to.
        var publicAddress: TraversalAddress
        var filters = false
        var contacted: Set<TraversalAddress> = []
    }

    var agents: [ICEAgent]
    var ports: [Port]
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    var lossPercent = 0
    var random = SeededRandom(seed: 7)
    var blocked = false
    var delivered = 0

    static func keys() -> (RealTimeKeys, RealTimeKeys) {
        let a = RealTimeKeyExchange(), b = RealTimeKeyExchange()
        return (try! a.keys(remotePublicKey: b.publicKeyBytes, isInitiator: true, context: [1]),
                try! b.keys(remotePublicKey: a.publicKeyBytes, isInitiator: false, context: [1]))
    }

    /// Runs until `until` holds or `limit` of virtual time passes.
    mutating func run(for limit: TimeAmount, until done: (ICESimulation) -> Bool = { _ in false }) {
        let end = self.now + limit
        while self.now < end && !done(self) {
            for index in self.agents.indices {
                self.agents[index].handleTimeout(now: self.now)
                while let output = self.agents[index].pollTransmit() { self.route(output, from: index) }
            }
            self.now = self.now + .milliseconds(1)
        }
    }

    private mutating func route(_ output: ICEAgent.Output, from agent: Int) {
        guard let sender = self.ports.firstIndex(where: { $0.agent == agent && $0.base == output.base }) else { return }
        self.ports[sender].contacted.insert(output.to)
        let source = self.ports[sender].publicAddress
        guard !self.blocked, self.random.next(below: 100) >= self.lossPercent,
            let receiver = self.ports.firstIndex(where: { $0.publicAddress == output.to })
        else { return }
        if self.ports[receiver].filters && !self.ports[receiver].contacted.contains(source) { return }
        let port = self.ports[receiver]
        let decoded = try! STUNMessage.decode(output.bytes)
        _ = self.agents[port.agent].receive(decoded, from: source, base: port.base, now: self.now)
        self.delivered += 1
    }

    var bothSelected: Bool {
        self.agents.allSatisfy { if case .selected = $0.state { return true } else { return false } }
    }
}

@Suite("ICE connectivity checks (virtual time)")
struct ICEAgentTests {
    static let a = TraversalAddress("10.0.1.2", port: 4000)!
    static let b = TraversalAddress("10.0.2.2", port: 5000)!

    static func pair(configuration: ICEAgent.Configuration = .init(), keysB: RealTimeKeys? = nil) -> [ICEAgent] {
        let (ka, kb) = ICESimulation.keys()
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        return [
            ICEAgent(role: .controlling, credentials: ka.credentials, configuration: configuration, socketAcceptsIPv6: false, now: start),
            ICEAgent(role: .controlled, credentials: (keysB ?? kb).credentials, configuration: configuration, socketAcceptsIPv6: false, now: start),
        ]
    }

    /// A and B on one network, each offering its host address.
    static func hosts(configuration: ICEAgent.Configuration = .init(), keysB: RealTimeKeys? = nil) -> ICESimulation {
        var agents = Self.pair(configuration: configuration, keysB: keysB)
        agents[0].addRemote([ICECandidate(kind: .host, address: Self.b)])
        agents[1].addRemote([ICECandidate(kind: .host, address: Self.a)])
        return ICESimulation(agents: agents, ports: [.init(agent: 0, base: .socket, publicAddress: Self.a), .init(agent: 1, base: .socket, publicAddress: Self.b)])
    }

    @Test("Two hosts that reach each other select the same pair, both sides")
    func directPair() {
        var net = Self.hosts()
        net.run(for: .seconds(5)) { $0.bothSelected }
        #expect(net.agents[0].state == .selected(base: .socket, remote: Self.b))
        #expect(net.agents[1].state == .selected(base: .socket, remote: Self.a))
    }

    @Test("A side behind a NAT is found as a peer-reflexive candidate")
    func peerReflexive() {
        let natB = TraversalAddress("198.51.100.7", port: 61000)!
        var agents = Self.pair()
        // B only knows its private host address; A cannot reach it, B's NAT maps it to natB.
        agents[0].addRemote([ICECandidate(kind: .host, address: TraversalAddress("192.168.9.9", port: 5000)!)])
        agents[1].addRemote([ICECandidate(kind: .host, address: Self.a)])
        var net = ICESimulation(agents: agents, ports: [
            .init(agent: 0, base: .socket, publicAddress: Self.a),
            .init(agent: 1, base: .socket, publicAddress: natB, filters: true),
        ])
        net.run(for: .seconds(5)) { $0.bothSelected }
        #expect(net.agents[0].state == .selected(base: .socket, remote: natB))
        #expect(net.agents[1].state == .selected(base: .socket, remote: Self.a))
        #expect(net.agents[0].selectedPair?.remoteKind == .peerReflexive)
    }

    @Test("With 30 % loss the checks still converge on one pair")
    func lossyChecks() {
        for seed in 1...5 as ClosedRange<UInt64> {
            var net = Self.hosts()
            net.lossPercent = 30
            net.random = SeededRandom(seed: seed)
            net.run(for: .seconds(10)) { $0.bothSelected }
            #expect(net.bothSelected, "seed \(seed)")
        }
    }

    @Test("A direct pair is preferred over a relayed one when both work")
    func directBeatsRelay() {
        let relayA = TraversalAddress("203.0.113.1", port: 50000)!
        var agents = Self.pair()
        agents[0].addRelay(relayA, remoteCandidates: [])
        agents[0].addRemote([ICECandidate(kind: .host, address: Self.b)])
        agents[1].addRemote([ICECandidate(kind: .host, address: Self.a), ICECandidate(kind: .relayed, address: relayA)])
        var net = ICESimulation(agents: agents, ports: [
            .init(agent: 0, base: .socket, publicAddress: Self.a), .init(agent: 0, base: .relay, publicAddress: relayA),
            .init(agent: 1, base: .socket, publicAddress: Self.b),
        ])
        net.run(for: .seconds(5)) { $0.bothSelected }
        #expect(net.agents[0].state == .selected(base: .socket, remote: Self.b))
        #expect(net.agents[1].state == .selected(base: .socket, remote: Self.a))
    }

    @Test("A direct pair that needs hole punching wins over a relay that answers first")
    func holePunchingBeatsRelay() {
        // Both sides behind filtering NATs; B learns A's candidates 150 ms late (a late trickle),
        // so A's direct checks are dropped by B's NAT until then, while A's relay reaches B's
        // relay at once.
        let relayA = TraversalAddress("203.0.113.1", port: 50000)!
        let relayB = TraversalAddress("203.0.113.1", port: 50001)!
        var agents = Self.pair()
        agents[0].addRelay(relayA, remoteCandidates: [])
        agents[0].addRemote([ICECandidate(kind: .serverReflexive, address: Self.b), ICECandidate(kind: .relayed, address: relayB)])
        agents[1].addRelay(relayB, remoteCandidates: [])
        var net = ICESimulation(agents: agents, ports: [
            .init(agent: 0, base: .socket, publicAddress: Self.a, filters: true), .init(agent: 0, base: .relay, publicAddress: relayA),
            .init(agent: 1, base: .socket, publicAddress: Self.b, filters: true), .init(agent: 1, base: .relay, publicAddress: relayB),
        ])
        net.run(for: .milliseconds(150))
        net.agents[1].addRemote([ICECandidate(kind: .serverReflexive, address: Self.a), ICECandidate(kind: .relayed, address: relayA)])
        net.run(for: .seconds(5)) { $0.bothSelected }
        #expect(net.agents[0].state == .selected(base: .socket, remote: Self.b))
        #expect(net.agents[1].state == .selected(base: .socket, remote: Self.a))
    }

    @Test("Relay-only policy selects the relayed pair")
    func relayOnly() {
        let relayA = TraversalAddress("203.0.113.1", port: 50000)!
        var configuration = ICEAgent.Configuration()
        configuration.relayOnly = true
        var agents = Self.pair(configuration: configuration)
        agents[0].addRelay(relayA, remoteCandidates: [ICECandidate(kind: .host, address: Self.b)])
        agents[1] = ICEAgent(role: .controlled, credentials: agents[1].credentials, socketAcceptsIPv6: false, now: .uptimeNanoseconds(1_000_000_000))
        agents[1].addRemote([ICECandidate(kind: .host, address: Self.a), ICECandidate(kind: .relayed, address: relayA)])
        var net = ICESimulation(agents: agents, ports: [
            .init(agent: 0, base: .socket, publicAddress: Self.a), .init(agent: 0, base: .relay, publicAddress: relayA),
            .init(agent: 1, base: .socket, publicAddress: Self.b),
        ])
        net.run(for: .seconds(5)) { $0.bothSelected }
        #expect(net.agents[0].state == .selected(base: .relay, remote: Self.b))
        #expect(net.agents[1].state == .selected(base: .socket, remote: relayA))
    }

    @Test("Checks with the wrong password are refused and every pair fails")
    func wrongCredentials() {
        let (_, other) = ICESimulation.keys()
        var net = Self.hosts(keysB: other)
        net.run(for: .seconds(8))
        #expect(net.agents.allSatisfy { $0.state == .checking && $0.allPairsFailed })
        #expect(net.agents[0].rejectedChecks + net.agents[1].rejectedChecks > 0)
    }

    @Test("Consent is lost exactly when the timeout passes without answers")
    func consentLost() {
        var configuration = ICEAgent.Configuration()
        configuration.consentInterval = .seconds(1)
        configuration.consentTimeout = .seconds(4)
        var net = Self.hosts(configuration: configuration)
        net.run(for: .seconds(5)) { $0.bothSelected }
        // Answered consent keeps it alive well past the timeout.
        net.run(for: .seconds(12))
        #expect(net.bothSelected)
        net.blocked = true
        let cut = net.now
        net.run(for: .seconds(10)) { $0.agents[0].state == .consentLost }
        #expect(net.agents[0].state == .consentLost)
        let lostAfter = net.now - cut
        #expect(lostAfter <= .seconds(4) + .milliseconds(2))
        #expect(lostAfter >= .seconds(4) - .milliseconds(1200) - .milliseconds(2))
    }
}
