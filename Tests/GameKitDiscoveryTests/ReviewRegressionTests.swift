import NIOCore
import Testing

@testable import GameKitDiscovery

/// Cases a review found, each pinned: multi-homed hosts, finite resolution, what counts as an
/// unanswered query, answers queued before a withdrawal, long names, foreign-port responses.
@Suite("Responder and browser: edge cases")
struct ReviewRegressionTests {
    static let chat = try! ServiceType("_chat._udp")
    static let foreign = try! SocketAddress(ipAddress: "10.0.0.50", port: 5353)

    @Test func aHostWithTwoInterfacesOnOneLinkHearsItsOwnProbesAndStillRegisters() {
        var link = VirtualLink()
        link.addNode()
        // A second interface with other addresses; the virtual link hands every datagram to the
        // node as if it came in on its first interface, so each probe is heard on "the other" one.
        let second = NetworkInterface(index: 9, name: "wifi", ipv4: [IPv4Bytes(192, 168, 1, 5)])
        let first = link.nodes[0].interface
        link.with(0) { machine, now in machine.setInterfaces([first, second], now: now) }
        let id = link.with(0) { machine, now in try! machine.responder.register(.test("Alice"), now: now) }
        link.run(for: .seconds(5))
        #expect(link.nodes[0].responderEvents.contains(.registered(id, name: try! DNSName("Alice._chat._udp.local"))))
        #expect(link.sent(by: 0).filter { !$0.message.isResponse }.count == 6)  // 3 probes × 2 interfaces
    }

    @Test func resolutionQueriesStopAfterFourAttempts() {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in machine.browser.startBrowsing(Self.chat, now: now) }
        let ptr = DNSResourceRecord(name: Self.chat.domainName, data: .ptr(try! DNSName("Ghost._chat._udp.local")), ttl: 4500)
        link.inject(DNSMessage(isResponse: true, answers: [ptr]), from: Self.foreign)
        link.run(for: .seconds(120))
        let srvQueries = link.sent(by: 0).filter { $0.message.questions.contains { $0.type == .srv } }
        #expect(srvQueries.count == 4)
    }

    @Test(arguments: [true, false])
    func quOrTruncatedQueriesAreNotEvidenceOfFailure(truncated: Bool) {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in machine.browser.startBrowsing(Self.chat, now: now) }
        let alice = try! DNSName("Alice._chat._udp.local")
        let host = try! DNSName("alice.local")
        link.inject(DNSMessage(isResponse: true, answers: [
            DNSResourceRecord(name: Self.chat.domainName, data: .ptr(alice), ttl: 4500),
            DNSResourceRecord(name: alice, data: .srv(priority: 0, weight: 0, port: 1, target: host), ttl: 4500, cacheFlush: true),
            DNSResourceRecord(name: alice, data: .txt([]), ttl: 4500, cacheFlush: true),
            DNSResourceRecord(name: host, data: .a(IPv4Bytes(10, 0, 0, 50)), ttl: 4500, cacheFlush: true),
        ]), from: Self.foreign)
        var query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: alice, type: .srv, unicastResponse: !truncated)])
        query.isTruncated = truncated
        let other = try! SocketAddress(ipAddress: "10.0.0.60", port: 5353)
        link.inject(query, from: other)
        link.run(for: .seconds(1))
        link.inject(query, from: other)
        link.run(for: .seconds(20))
        #expect(link.nodes[0].browseEvents.count == 1)  // found, never lost
    }

    @Test func anAnswerQueuedBeforeAWithdrawalIsNotSentAfterTheGoodbye() {
        var (link, id) = ResponderTests.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)]), from: try! SocketAddress(ipAddress: "10.0.0.99", port: 5353))
        link.with(0) { machine, now in machine.responder.unregister(id, now: now) }
        link.run(for: .seconds(1))
        #expect(link.log.count == 1)
        #expect(link.log.allSatisfy { $0.message.answers.allSatisfy { $0.ttl == 0 } })
    }

    @Test func renamingALongNameKeepsTheSuffix() {
        var link = VirtualLink()
        link.addNode()
        link.addNode()
        let long = String(repeating: "é", count: 31)  // 62 bytes
        link.with(0) { machine, now in _ = try! machine.responder.register(.test(long), now: now) }
        link.run(for: .seconds(10))
        let id = link.with(1) { machine, now in try! machine.responder.register(.test(long, port: 7001), now: now) }
        link.run(for: .seconds(10))
        let name = link.nodes[1].machine.responder.instanceName(of: id)!
        #expect(name.firstLabel.hasSuffix(" (2)"))
        #expect(name.labels[0].count <= 63)
        #expect(link.nodes[1].responderEvents.contains(.registered(id, name: name)))
    }

    @Test func aGoodbyeAfterUnansweredQueriesLeavesNoDeadlineInThePast() {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in machine.browser.startBrowsing(Self.chat, now: now) }
        let alice = try! DNSName("Alice._chat._udp.local")
        let ptr = DNSResourceRecord(name: Self.chat.domainName, data: .ptr(alice), ttl: 4500)
        link.inject(DNSMessage(isResponse: true, answers: [ptr]), from: Self.foreign)
        let other = try! SocketAddress(ipAddress: "10.0.0.60", port: 5353)
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)])
        link.inject(query, from: other)
        link.inject(query, from: other)
        link.run(for: .milliseconds(9500))
        var goodbye = ptr
        goodbye.ttl = 0
        link.inject(DNSMessage(isResponse: true, answers: [goodbye]), from: Self.foreign)
        link.run(for: .seconds(3))  // the virtual link records an issue if a deadline stays due
    }

    @Test func responsesFromAnotherPortAreIgnored() {
        var link = VirtualLink()
        link.addNode()
        let id = link.with(0) { machine, now in try! machine.responder.register(.test("Alice"), now: now) }
        link.run(for: .milliseconds(300))
        let srv = DNSResourceRecord(name: try! DNSName("Alice._chat._udp.local"), data: .srv(priority: 0, weight: 0, port: 9, target: try! DNSName("x.local")), ttl: 120, cacheFlush: true)
        link.inject(DNSMessage(isResponse: true, answers: [srv]), from: try! SocketAddress(ipAddress: "10.0.0.50", port: 40000))
        link.run(for: .seconds(5))
        #expect(link.nodes[0].responderEvents == [.registered(id, name: try! DNSName("Alice._chat._udp.local"))])
    }

    @Test func serviceTypesCompareWithoutCase() throws {
        #expect(try ServiceType("_Chat._UDP") == ServiceType("_chat._udp"))
        #expect(Set([try ServiceType("_Chat._udp"), try ServiceType("_chat._udp")]).count == 1)
    }

    @Test func manyQuestionsAreSpreadOverSeveralQueries() {
        let questions = (0..<200).map { DNSQuestion(name: try! DNSName("instance-\($0)._chat._udp.local"), type: .srv) }
        let messages = MessagePacker.queries(questions: questions, knownAnswers: [])
        #expect(messages.count > 1)
        #expect(messages.flatMap(\.questions) == questions)
        #expect(messages.allSatisfy { $0.encoded().readableBytes <= MessagePacker.limit })
    }

    @Test func aFloodOfPointersStaysBoundedAndEveryQueryFitsADatagram() {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in machine.browser.startBrowsing(Self.chat, now: now) }
        for packet in 0..<20 {
            let records = (0..<200).map { index in
                DNSResourceRecord(name: Self.chat.domainName, data: .ptr(try! DNSName("flood-\(packet)-\(index)._chat._udp.local")), ttl: 4500)
            }
            link.inject(DNSMessage(isResponse: true, answers: records), from: Self.foreign)
        }
        link.run(for: .seconds(10))
        let asked = Set(link.sent(by: 0).flatMap(\.message.questions).filter { $0.type == .srv }.map(\.name))
        #expect(asked.count == BrowserMachine.maximumUnresolvedPerType)
        #expect(link.sent(by: 0).allSatisfy { $0.bytes.readableBytes <= MessagePacker.limit })
        #expect(link.nodes[0].machine.browser.cache.entries.count <= RecordCache.capacity)
    }

    @Test func unicastRepliesAreRateLimitedAgainstAmplification() {
        var (link, _) = ResponderTests.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let question = DNSQuestion(name: try! DNSName("Alice._chat._udp.local"), type: .srv)
        // 100 legacy queries from forged sources within one instant: at most the burst is answered.
        for index in 0..<100 {
            link.inject(DNSMessage(id: UInt16(index), isResponse: false, questions: [question]), from: try! SocketAddress(ipAddress: "10.9.\(index / 250).\(index % 250 + 1)", port: 40000))
        }
        #expect(link.log.count == Int(ResponderMachine.unicastReplyBurst))
        // The budget refills with time.
        link.run(for: .seconds(1))
        link.inject(DNSMessage(id: 1, isResponse: false, questions: [question]), from: try! SocketAddress(ipAddress: "10.9.9.9", port: 40000))
        #expect(link.log.count == Int(ResponderMachine.unicastReplyBurst) + 1)
    }
}
