@_spi(Machine) import GameKitMachine
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTraversal

/// A real-time machine on the package's one virtual network: reached at its public address,
/// optionally behind a NAT that filters what it has not contacted.
struct RealTimeHost: VirtualHost {
    var machine: RealTimeMachine
    /// Where others reach it (and where its datagrams come from).
    var publicAddress: SocketAddress
    /// Inbound only from addresses it sent to (an address- and port-dependent filtering NAT).
    var filters = false
    var contacted: Set<SocketAddress> = []
    var events: [RealTimeMachine.Event] = []
    /// Every datagram sent: where, and how long (seeded runs must repeat this exactly).
    var trace: [String] = []

    func source(for destination: SocketAddress) -> SocketAddress { self.publicAddress }

    func accepts(_ destination: SocketAddress, from source: SocketAddress) -> Bool {
        destination == self.publicAddress && (!self.filters || self.contacted.contains(source))
    }

    mutating func didSend(_ bytes: ByteBuffer, to destination: SocketAddress, now: NIODeadline) {
        self.contacted.insert(destination)
        self.trace.append("\(now.uptimeNanoseconds) \(destination) \(bytes.readableBytes)")
    }

    mutating func record(_ event: RealTimeMachine.Event, now: NIODeadline) {
        self.events.append(event)
    }

    var connected: (RealTimePath, TraversalAddress)? {
        for event in self.events { if case .connected(let path, let remote) = event { return (path, remote) } }
        return nil
    }

    var media: [[UInt8]] {
        self.events.compactMap { if case .media(let payload, _) = $0 { return payload } else { return nil } }
    }
}

@Suite("Real-time machine on the virtual network")
struct RealTimeMachineTests {
    static let a = try! SocketAddress(ipAddress: "10.0.1.2", port: 4000)
    static let b = try! SocketAddress(ipAddress: "10.0.2.2", port: 5000)

    /// Two machines that know each other's host candidate (B's may be private: then only its
    /// NAT's address reaches it), connecting with fresh keys; every random choice seeded.
    static func network(
        profile: ImpairmentProfile = .perfect, seed: UInt64 = 1, bPrivate: SocketAddress? = nil, bFilters: Bool = false
    ) -> VirtualNetwork<RealTimeHost> {
        var network = VirtualNetwork<RealTimeHost>()
        network.onSpin = { Issue.record(Comment(rawValue: $0)) }
        let hostsA = [TraversalAddress(Self.a)!], hostsB = [TraversalAddress(bPrivate ?? Self.b)!]
        var machineA = RealTimeMachine(settings: .init(), hostAddresses: hostsA, now: network.now, random: MachineRandom(seed: seed))
        var machineB = RealTimeMachine(settings: .init(), hostAddresses: hostsB, now: network.now, random: MachineRandom(seed: seed + 1))
        let ka = RealTimeKeyExchange(), kb = RealTimeKeyExchange()
        let keysA = try! ka.keys(remotePublicKey: kb.publicKeyBytes, isInitiator: true, context: [7])
        let keysB = try! kb.keys(remotePublicKey: ka.publicKeyBytes, isInitiator: false, context: [7])
        machineA.connect(keys: keysA, remote: machineB.localCandidates, now: network.now)
        machineB.connect(keys: keysB, remote: machineA.localCandidates, now: network.now)
        network.add(RealTimeHost(machine: machineA, publicAddress: Self.a), profile: profile, seed: seed)
        network.add(RealTimeHost(machine: machineB, publicAddress: Self.b, filters: bFilters), profile: profile, seed: seed)
        return network
    }

    static func bothConnected(_ network: VirtualNetwork<RealTimeHost>) -> Bool {
        network.hosts.allSatisfy { $0.connected != nil }
    }

    @Test("Two hosts connect directly and media is sealed end to end, both ways")
    func directConnectionCarriesMedia() {
        var network = Self.network()
        let connected = network.run(for: .seconds(5), until: Self.bothConnected)
        #expect(connected)
        #expect(network.hosts[0].connected?.0 == .direct)
        #expect(network.hosts[0].connected?.1 == TraversalAddress(Self.b))
        #expect(network.hosts[1].connected?.1 == TraversalAddress(Self.a))
        network.hosts[0].machine.queueMedia([1, 2, 3])
        network.hosts[1].machine.queueMedia([4, 5])
        network.run(for: .milliseconds(10))
        #expect(network.hosts[1].media == [[1, 2, 3]])
        #expect(network.hosts[0].media == [[4, 5]])
    }

    @Test("Behind a filtering NAT, the other side is found at its NAT's address (peer-reflexive)")
    func peerReflexiveThroughAFilteringNAT() {
        // B offers only its private address, which A cannot reach; B's checks open its NAT.
        var network = Self.network(bPrivate: try! SocketAddress(ipAddress: "192.168.9.9", port: 5000), bFilters: true)
        let connected = network.run(for: .seconds(5), until: Self.bothConnected)
        #expect(connected)
        #expect(network.hosts[0].connected?.1 == TraversalAddress(Self.b))
    }

    @Test("With 30 % loss each way the checks still converge", arguments: 1...10 as ClosedRange<UInt64>)
    func lossyChecksConverge(seed: UInt64) {
        var network = Self.network(profile: ImpairmentProfile(loss: 0.3), seed: seed)
        let connected = network.run(for: .seconds(10), until: Self.bothConnected)
        #expect(connected, "seed \(seed): \(network.hosts.map { $0.events.filter { if case .media = $0 { false } else { true } } }) \(network.hosts.map(\.machine.pairSummary))")
    }

    @Test("A seeded run repeats exactly: the same datagrams at the same instants")
    func seededRunsRepeat() {
        func trace(seed: UInt64) -> [String] {
            var network = Self.network(profile: ImpairmentProfile(loss: 0.2, delay: .milliseconds(5), jitter: .milliseconds(3)), seed: seed)
            network.run(for: .seconds(12))
            return network.hosts.flatMap(\.trace)
        }
        let first = trace(seed: 3)
        #expect(first.count > 20)
        #expect(trace(seed: 3) == first)
        // And the seed matters (so the comparison above can fail).
        #expect(trace(seed: 4) != first)
    }
}
