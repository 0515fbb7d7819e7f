@_spi(Machine) import GameKitMachine
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTraversal

/// An ICE agent as a datagram machine, to run on the package's one virtual network: each
/// datagram carries the address it was sent to, so the agent knows which of its bases (its own
/// socket or its relay) received it.
struct AgentMachine: DatagramMachine {
    /// Where a datagram goes: out of which base, to which address.
    struct Destination: Hashable { var base: ICEAgent.Base; var to: TraversalAddress }
    /// Where it came from, and the address it was sent to.
    struct Source: Hashable { var from: TraversalAddress; var to: TraversalAddress }

    var agent: ICEAgent
    /// This side's public address of each base.
    let ports: [ICEAgent.Base: TraversalAddress]

    mutating func handle(datagram: ByteBuffer, from source: Source, now: NIODeadline) {
        guard let base = self.ports.first(where: { $0.value == source.to })?.key,
            let decoded = try? STUNMessage.decode(Array(datagram.readableBytesView))
        else { return }
        _ = self.agent.receive(decoded, from: source.from, base: base, now: now)
    }

    mutating func handleTimeout(now: NIODeadline) {
        self.agent.handleTimeout(now: now)
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> Destination? {
        guard let output = self.agent.pollTransmit() else { return nil }
        buffer.writeBytes(output.bytes)
        return Destination(base: output.base, to: output.to)
    }

    /// The tests read the agent's state instead.
    mutating func pollEvent() -> Never? { nil }

    var nextDeadline: NIODeadline? { self.agent.nextDeadline }
}

/// One side: an agent, its bases' public addresses, and which of them sit behind a NAT that
/// lets in only addresses that base has sent to.
struct AgentHost: VirtualHost {
    var machine: AgentMachine
    var filtering: Set<ICEAgent.Base> = []
    var contacted: [ICEAgent.Base: Set<TraversalAddress>] = [:]

    func source(for destination: AgentMachine.Destination) -> AgentMachine.Source {
        AgentMachine.Source(from: self.machine.ports[destination.base]!, to: destination.to)
    }

    func accepts(_ destination: AgentMachine.Destination, from source: AgentMachine.Source) -> Bool {
        guard let base = self.machine.ports.first(where: { $0.value == destination.to })?.key else { return false }
        return !self.filtering.contains(base) || self.contacted[base, default: []].contains(source.from)
    }

    mutating func didSend(_ bytes: ByteBuffer, to destination: AgentMachine.Destination, now: NIODeadline) {
        self.contacted[destination.base, default: []].insert(destination.to)
    }

    mutating func record(_ event: Never, now: NIODeadline) {}
}

/// Two ICE agents on the virtual network in virtual time: addresses, optional NAT-style
/// filtering (inbound only from addresses a base has sent to), seeded loss.
struct ICESimulation {
    /// One base of one agent, as a test describes it.
    struct Port {
        var agent: Int
        var base: ICEAgent.Base
        /// The address others see and send to.
        var publicAddress: TraversalAddress
        var filters = false
    }

    var network: VirtualNetwork<AgentHost>
    /// Set to cut both ways at once (every datagram dropped).
    var blocked = false {
        didSet {
            let blocked = self.blocked
            self.network.interceptor = blocked ? { _ in false } : nil
        }
    }

    init(agents: [ICEAgent], ports: [Port], loss: Double = 0, seed: UInt64 = 7) {
        self.network = VirtualNetwork(start: .uptimeNanoseconds(1_000_000_000))
        self.network.onSpin = { Issue.record(Comment(rawValue: $0)) }
        // A success can make nomination due at once (a direct pair after a relayed one shortens
        // the wait, which may be over); the agent nominates at its next timeout, which a real
        // event loop runs at once: a second pass at the same instant, not a busy loop.
        // (Nominating inside the success itself connected calls sooner, which changed the
        // outcome of a call whose far side's audio fails: see issue 18's closing note.)
        self.network.timeoutPassesPerInstant = 2
        for (index, agent) in agents.enumerated() {
            let mine = ports.filter { $0.agent == index }
            let machine = AgentMachine(agent: agent, ports: Dictionary(uniqueKeysWithValues: mine.map { ($0.base, $0.publicAddress) }))
            self.network.add(
                AgentHost(machine: machine, filtering: Set(mine.filter(\.filters).map(\.base))),
                profile: ImpairmentProfile(loss: loss), seed: seed)
        }
    }

    var now: NIODeadline { self.network.now }

    var agents: [ICEAgent] { self.network.hosts.map(\.machine.agent) }

    mutating func addRemote(_ candidates: [ICECandidate], to index: Int) {
        self.network.hosts[index].machine.agent.addRemote(candidates)
    }

    static func keys() -> (RealTimeKeys, RealTimeKeys) {
        let a = RealTimeKeyExchange(), b = RealTimeKeyExchange()
        return (try! a.keys(remotePublicKey: b.publicKeyBytes, isInitiator: true, context: [1]),
                try! b.keys(remotePublicKey: a.publicKeyBytes, isInitiator: false, context: [1]))
    }

    /// Runs until `done` holds or `limit` of virtual time passes; the clock ends at the limit.
    mutating func run(for limit: TimeAmount, until done: (ICESimulation) -> Bool = { _ in false }) {
        let end = self.network.now + limit
        var simulation = self
        let held = self.network.run(for: limit) { network in
            simulation.network = network
            return done(simulation)
        }
        if !held { self.network.advance(by: max(.zero, end - self.network.now)) }
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
    static func hosts(configuration: ICEAgent.Configuration = .init(), keysB: RealTimeKeys? = nil, loss: Double = 0, seed: UInt64 = 7) -> ICESimulation {
        var agents = Self.pair(configuration: configuration, keysB: keysB)
        agents[0].addRemote([ICECandidate(kind: .host, address: Self.b)])
        agents[1].addRemote([ICECandidate(kind: .host, address: Self.a)])
        return ICESimulation(
            agents: agents, ports: [.init(agent: 0, base: .socket, publicAddress: Self.a), .init(agent: 1, base: .socket, publicAddress: Self.b)],
            loss: loss, seed: seed)
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
            var net = Self.hosts(loss: 0.3, seed: seed)
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
        net.addRemote([ICECandidate(kind: .serverReflexive, address: Self.a), ICECandidate(kind: .relayed, address: relayA)], to: 1)
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

    /// Consent as online sessions run it (ConnectivityChecker's timing).
    static var consentTiming: ICEAgent.Configuration {
        var configuration = ICEAgent.Configuration()
        configuration.consentInterval = .milliseconds(1500)
        configuration.consentTimeout = .seconds(5)
        return configuration
    }

    static func isSelected(_ agent: ICEAgent) -> Bool {
        if case .selected = agent.state { return true } else { return false }
    }

    @Test("Consent is lost once the timeout has passed and three checks went unanswered, confirmed 50 ms later")
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
        let lastAnswer = net.agents[0].consent!.lastAnswer
        net.run(for: .seconds(10)) { $0.agents[0].consent?.suspectedAt != nil }
        let suspected = net.now
        // Suspected when the timeout has passed since the last answer and the third check since
        // then has been out for its allowance (checks every 0.8–1.2 s here), not before.
        #expect(net.agents[0].consent!.checksSinceAnswer >= ConsentFreshness.checksBeforeLoss)
        #expect(suspected - lastAnswer >= .seconds(4))
        #expect(suspected - lastAnswer <= .milliseconds(3 * 1200) + ConsentFreshness.answerAllowance)
        net.run(for: .seconds(1)) { $0.agents[0].state == .consentLost }
        #expect(net.agents[0].state == .consentLost)
        #expect(net.now - suspected == ConsentFreshness.confirmationDelay)
        #expect(net.now - cut <= .seconds(5))
        #expect(net.agents[0].nextDeadline == nil)
    }

    /// A side held up for seconds (stopped, or starved) keeps consent, whichever it runs first
    /// when it resumes: its timers or the answers that waited. It sent no check while held up,
    /// so its silence is no evidence against the path. (The far side, which had no answers for
    /// as long, may lose consent: to it the path was silent.)
    @Test(arguments: [true, false]) func aStalledSideKeepsConsent(timersFirst: Bool) {
        var net = Self.hosts(configuration: Self.consentTiming)
        net.network.timersFirstOnResume = timersFirst
        // 40 ms each way: an answer to a check sent on resuming takes longer than the
        // confirmation delay, so only the evidence rule keeps consent.
        for index in 0..<2 { net.network.paths[index] = ImpairmentModel(profile: ImpairmentProfile(delay: .milliseconds(40)), seed: 5) }
        net.run(for: .seconds(5)) { $0.bothSelected }
        net.run(for: .seconds(10))
        for stall in [2, 4, 6, 12] {
            net.network.pause(0, for: .seconds(Int64(stall)))
            net.run(for: .seconds(Int64(stall) + 6))
            #expect(Self.isSelected(net.agents[0]), "after a stall of \(stall) s: \(net.agents[0].state)")
        }
        #expect(net.network.pausedUntil.isEmpty)
    }

    /// The side's loop runs its timers but has not read its socket (a starved process): the
    /// answers to its checks wait there. The timer that finds them missing only suspects a loss;
    /// answers read before the confirmation clear it. With none waiting, consent is lost at the
    /// confirmation.
    @Test(arguments: [true, false]) func answersWaitingInTheSocketClearASuspectedLoss(answersWereWaiting: Bool) {
        var net = Self.hosts(configuration: Self.consentTiming)
        net.run(for: .seconds(5)) { $0.bothSelected }
        net.run(for: .seconds(10))
        nonisolated(unsafe) var held: [VirtualNetwork<AgentHost>.Datagram] = []
        nonisolated(unsafe) var holding = true
        net.network.interceptor = { datagram in
            guard holding, datagram.destination.to == Self.a else { return true }
            if answersWereWaiting { held.append(datagram) }
            return false
        }
        net.run(for: .seconds(10)) { $0.agents[0].consent?.suspectedAt != nil }
        #expect(net.agents[0].consent?.suspectedAt != nil)
        let suspected = net.now
        #expect(Self.isSelected(net.agents[0]))
        if answersWereWaiting {
            #expect(held.count >= ConsentFreshness.checksBeforeLoss)
            holding = false
            net.network.injected.append(contentsOf: held)
            net.run(for: .seconds(10))
            #expect(Self.isSelected(net.agents[0]))
            #expect(net.agents[0].consent?.suspicionsCleared == 1)
        } else {
            net.run(for: .seconds(1)) { $0.agents[0].state == .consentLost }
            #expect(net.agents[0].state == .consentLost)
            #expect(net.now - suspected == ConsentFreshness.confirmationDelay)
        }
    }

    /// A far side that answers later than the interval between checks (each answer arrives after
    /// the next check has replaced its own) still gives consent: an answer to any check since
    /// the last answer counts.
    @Test func lateAnswersToEarlierChecksKeepConsent() {
        var net = Self.hosts(configuration: Self.consentTiming)
        net.run(for: .seconds(5)) { $0.bothSelected }
        net.network.paths[1] = ImpairmentModel(profile: ImpairmentProfile(delay: .milliseconds(2500)), seed: 3)
        net.run(for: .seconds(30))
        #expect(Self.isSelected(net.agents[0]), "\(net.agents[0].state)")
    }

    /// Consent lost on a dead path while the side was held up: reported within the timeout plus
    /// the stall plus the three checks it needs once it runs again.
    @Test func aDeadPathIsLostAfterAStallToo() {
        var net = Self.hosts(configuration: Self.consentTiming)
        net.run(for: .seconds(5)) { $0.bothSelected }
        net.run(for: .seconds(10))
        net.blocked = true
        let cut = net.now
        net.network.pause(0, for: .seconds(3))
        net.run(for: .seconds(20)) { $0.agents[0].state == .consentLost }
        #expect(net.agents[0].state == .consentLost)
        #expect(net.now - cut <= .seconds(3) + .milliseconds(3 * 1800) + ConsentFreshness.answerAllowance + ConsentFreshness.confirmationDelay)
    }
}
