import NIOCore
import Testing

@testable import GameKitDiscovery

@Suite("Responder: conflicts and tie-breaking")
struct ConflictTests {
    static func registeredNames(_ link: VirtualLink, _ index: Int) -> [DNSName] {
        link.nodes[index].responderEvents.compactMap {
            if case .registered(_, let name) = $0 { return name }
            return nil
        }
    }

    @Test func aLateComerFindsTheNameTakenAndRenamesItself() {
        var link = VirtualLink()
        link.addNode()
        link.addNode()
        link.with(0) { machine, now in _ = try! machine.responder.register(.test("Alice"), now: now) }
        link.run(for: .seconds(10))
        link.with(1) { machine, now in _ = try! machine.responder.register(.test("Alice", port: 7001), now: now) }
        link.run(for: .seconds(10))
        #expect(Self.registeredNames(link, 0) == [try! DNSName("Alice._chat._udp.local")])
        #expect(Self.registeredNames(link, 1) == [try! DNSName("Alice (2)._chat._udp.local")])
        #expect(link.nodes[1].responderEvents.contains { if case .renamed = $0 { true } else { false } })
    }

    @Test func simultaneousProbesForOneNameEndWithTwoDistinctNames() {
        var link = VirtualLink()
        // The same seed: both wait the same random time, so their probes cross.
        link.addNode(hostLabel: "host-a", seed: 42)
        link.addNode(hostLabel: "host-b", seed: 42)
        link.with(0) { machine, now in _ = try! machine.responder.register(.test("Alice"), now: now) }
        link.with(1) { machine, now in _ = try! machine.responder.register(.test("Alice"), now: now) }
        link.run(for: .seconds(15))
        let a = Self.registeredNames(link, 0)
        let b = Self.registeredNames(link, 1)
        #expect(a.count == 1 && b.count == 1)
        #expect(a != b)
        // host-b's SRV data (target host-b.local) sorts after host-a's, so host-b keeps the name.
        #expect(b == [try! DNSName("Alice._chat._udp.local")])
        #expect(a == [try! DNSName("Alice (2)._chat._udp.local")])
    }

    @Test func identicalProbesLoopedBackAreNoConflict() {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in _ = try! machine.responder.register(.test("Alice"), now: now) }
        link.run(for: .seconds(10))
        #expect(Self.registeredNames(link, 0) == [try! DNSName("Alice._chat._udp.local")])
        #expect(link.sent(by: 0).filter { !$0.message.isResponse }.count == 3)
    }

    @Test func tieBreakComparesClassTypeThenRdata() {
        let name = try! DNSName("x.local")
        let low = DNSResourceRecord(name: name, data: .a(IPv4Bytes(10, 0, 0, 1)), ttl: 120, cacheFlush: true)
        let high = DNSResourceRecord(name: name, data: .a(IPv4Bytes(10, 0, 0, 2)), ttl: 120, cacheFlush: false)
        #expect(ProbeTieBreak.compare(ours: [low], theirs: [high]) == .theirsWins)
        #expect(ProbeTieBreak.compare(ours: [high], theirs: [low]) == .oursWins)
        #expect(ProbeTieBreak.compare(ours: [low], theirs: [low]) == .tie)
        // A later type wins regardless of rdata; a longer set beats its own prefix.
        let aaaa = DNSResourceRecord(name: name, data: .aaaa(IPv6Bytes([UInt8](repeating: 0, count: 16))!), ttl: 120)
        #expect(ProbeTieBreak.compare(ours: [high], theirs: [aaaa]) == .theirsWins)
        #expect(ProbeTieBreak.compare(ours: [low, high], theirs: [low]) == .oursWins)
        // Order of the records as sent does not matter.
        #expect(ProbeTieBreak.compare(ours: [high, low], theirs: [low, high]) == .tie)
    }

    @Test func aConflictingAnswerAfterAnnouncingMakesTheResponderProbeAgain() {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in _ = try! machine.responder.register(.test("Alice"), now: now) }
        link.run(for: .seconds(10))
        link.log.removeAll()
        let instance = try! DNSName("Alice._chat._udp.local")
        let foreign = DNSResourceRecord(name: instance, data: .srv(priority: 0, weight: 0, port: 9, target: try! DNSName("other.local")), ttl: 120, cacheFlush: true)
        link.inject(DNSMessage(isResponse: true, answers: [foreign]), from: try! SocketAddress(ipAddress: "10.0.0.50", port: 5353))
        link.run(for: .seconds(2))
        let probes = link.log.filter { !$0.message.isResponse && $0.message.questions.contains { $0.name == instance } }
        #expect(probes.count == 3)
    }

    /// A TXT record we sent before an update can reach a busy receiver long after it (seen in CI:
    /// a looped-back copy read seconds late renamed the service). Our former TXTs are ours at any
    /// age; a TXT we never had still makes the responder probe again.
    @Test func ourFormerTXTHeardLateIsNoConflictButAnUnknownOneIs() {
        var link = VirtualLink()
        link.addNode()
        let id = link.with(0) { machine, now in try! machine.responder.register(.test("Alice", txt: try! TXTRecord(["v": "1"])), now: now) }
        link.run(for: .seconds(10))
        link.with(0) { machine, now in machine.responder.updateTXT(id, try! TXTRecord(["v": "2"]), now: now) }
        link.run(for: .seconds(10))
        link.log.removeAll()
        let instance = try! DNSName("Alice._chat._udp.local")
        let stale = DNSResourceRecord(name: instance, data: .txt([Array("v=1".utf8)]), ttl: 4500, cacheFlush: true)
        link.inject(DNSMessage(isResponse: true, answers: [stale]), from: try! SocketAddress(ipAddress: "127.0.0.1", port: 5353))
        link.run(for: .seconds(2))
        #expect(link.log.filter { !$0.message.isResponse }.isEmpty)
        #expect(link.nodes[0].machine.responder.instanceName(of: id) == instance)

        let unknown = DNSResourceRecord(name: instance, data: .txt([Array("v=9".utf8)]), ttl: 4500, cacheFlush: true)
        link.inject(DNSMessage(isResponse: true, answers: [unknown]), from: try! SocketAddress(ipAddress: "10.0.0.50", port: 5353))
        link.run(for: .seconds(2))
        #expect(link.log.filter { !$0.message.isResponse && $0.message.questions.contains { $0.name == instance } }.count == 3)
    }

    @Test func aConflictWhileProbingRenamesAndFifteenConflictsInTenSecondsSlowProbingDown() {
        var link = VirtualLink()
        link.addNode()
        let id = link.with(0) { machine, now in try! machine.responder.register(.test("Alice"), now: now) }
        // Answer every probe with a conflicting record for whatever name is probed.
        for round in 0..<16 {
            link.run(for: .milliseconds(260))
            guard let name = link.nodes[0].machine.responder.instanceName(of: id) else { break }
            let foreign = DNSResourceRecord(name: name, data: .srv(priority: 0, weight: 0, port: 9, target: try! DNSName("other.local")), ttl: 120, cacheFlush: true)
            link.inject(DNSMessage(isResponse: true, answers: [foreign]), from: try! SocketAddress(ipAddress: "10.0.0.50", port: 5353))
            _ = round
        }
        let renames = link.nodes[0].responderEvents.filter { if case .renamed = $0 { true } else { false } }
        #expect(renames.count == 16)
        #expect(link.nodes[0].machine.responder.instanceName(of: id) == (try! DNSName("Alice (17)._chat._udp.local")))
        // After the fifteenth conflict within ten seconds the next probe waits five seconds.
        let lastProbe = link.log.last { !$0.message.isResponse }!.time
        link.run(for: .seconds(4))
        #expect(link.log.last { !$0.message.isResponse }!.time == lastProbe)
        link.run(for: .seconds(2))
        #expect(link.log.last { !$0.message.isResponse }!.time > lastProbe)
    }
}
