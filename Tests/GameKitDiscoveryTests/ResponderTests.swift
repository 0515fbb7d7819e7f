import NIOCore
import Testing

@testable import GameKitDiscovery

@Suite("Responder: probing, announcing, answering")
struct ResponderTests {
    static let chat = try! ServiceType("_chat._udp")

    /// A link with one responder that registered `service` and nothing else running.
    static func registered(_ service: ServiceDescription = .test()) -> (VirtualLink, ServiceID) {
        var link = VirtualLink()
        link.addNode()
        let id = link.with(0) { machine, now in try! machine.responder.register(service, now: now) }
        return (link, id)
    }

    @Test func probesThreeTimes250msApartAfterARandomWaitWithProposedRecordsInAuthority() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(5))
        let probes = link.sent(by: 0).filter { !$0.message.isResponse }
        #expect(probes.count == 3)
        let firstDelay = probes[0].time - VirtualLink.start
        #expect(firstDelay >= .zero && firstDelay <= .milliseconds(250))
        #expect(probes[1].time - probes[0].time == .milliseconds(250))
        #expect(probes[2].time - probes[1].time == .milliseconds(250))
        let instance = try! DNSName("Alice._chat._udp.local")
        for (index, probe) in probes.enumerated() {
            let message = probe.message
            #expect(message.id == 0)
            #expect(message.questions.contains { $0.name == instance && $0.type == .any })
            #expect(message.questions.contains { $0.name.firstLabel.hasPrefix("host0") && $0.type == .any })
            // The first probe asks for unicast replies (QU); the others are QM.
            #expect(message.questions.allSatisfy { $0.unicastResponse == (index == 0) })
            #expect(Set(message.authorities.filter { $0.name == instance }.map(\.type)) == [.srv, .txt])
            #expect(message.authorities.contains { $0.type == .a && $0.data == .a(IPv4Bytes(10, 0, 0, 1)) })
            #expect(message.answers.isEmpty)
        }
    }

    /// The endpoint reads the port's sockets only while a claim is unestablished (what the QU
    /// flag is for): waiting and probing say so, announcing and announced do not, a new
    /// registration does again.
    @Test func unestablishedClaimsAreThoseWaitingOrProbing() {
        var (link, _) = Self.registered()
        #expect(link.nodes[0].machine.responder.hasUnestablishedClaims)
        link.run(for: .milliseconds(300))
        #expect(link.nodes[0].machine.responder.hasUnestablishedClaims)
        link.run(for: .seconds(1))
        #expect(!link.nodes[0].machine.responder.hasUnestablishedClaims)
        link.run(for: .seconds(10))
        #expect(!link.nodes[0].machine.responder.hasUnestablishedClaims)
        _ = link.with(0) { machine, now in try! machine.responder.register(.test("Bob"), now: now) }
        #expect(link.nodes[0].machine.responder.hasUnestablishedClaims)
    }

    /// RFC 6762 §15.1: with another mDNS stack on the port, a unicast reply might reach its
    /// socket instead of ours, so even the first probe is QM; a rename's probes follow the flag
    /// as it is when they go.
    @Test func noProbeAsksForUnicastWhileAnotherStackSharesThePort() {
        var link = VirtualLink()
        link.addNode()
        link.nodes[0].machine.responder.mayAskForUnicast = false
        _ = link.with(0) { machine, now in try! machine.responder.register(.test(), now: now) }
        link.run(for: .seconds(5))
        let probes = link.sent(by: 0).filter { !$0.message.isResponse }
        #expect(probes.count == 3)
        #expect(probes.allSatisfy { $0.message.questions.allSatisfy { !$0.unicastResponse } })
        // The other stack has gone: the next service's first probe asks for unicast again.
        link.nodes[0].machine.responder.mayAskForUnicast = true
        _ = link.with(0) { machine, now in try! machine.responder.register(.test("Bob"), now: now) }
        link.run(for: .seconds(5))
        let later = link.sent(by: 0).filter { !$0.message.isResponse }.dropFirst(3)
        #expect(later.count == 3)
        #expect(later.first?.message.questions.allSatisfy(\.unicastResponse) == true)
        #expect(later.dropFirst().allSatisfy { $0.message.questions.allSatisfy { !$0.unicastResponse } })
    }

    /// Sockets on the mDNS port, counted from /proc/net/udp and /proc/net/udp6 as Linux writes
    /// them (one header line; the local port is the hexadecimal after the last colon).
    @Test func socketsOnThePortAreCountedFromTheKernelsTables() {
        let udp = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
             1021: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000   108        0 31011 2 0000000000000000 0
             1021: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 41011 2 0000000000000000 0
             4012: 0100007F:C14E 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 41012 2 0000000000000000 0
            """
        let udp6 = """
              sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
             1021: 00000000000000000000000000000000:14E9 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000   108        0 31012 2 0000000000000000 0
            """
        #expect(PortSharing.socketCount(inTable: udp, port: 5353) == 2)
        #expect(PortSharing.socketCount(inTable: udp6, port: 5353) == 1)
        #expect(PortSharing.socketCount(inTable: udp, port: 0xC14E) == 1)
        #expect(PortSharing.socketCount(inTable: "", port: 5353) == 0)
        #expect(PortSharing.socketCount(inTable: "header\ngarbage line\n 1: x:y z", port: 5353) == 0)
    }

    @Test func announcesThreeTimesWithDoublingGapsCacheFlushOnUniqueRecordsAndRFCTTLs() {
        var (link, id) = Self.registered()
        link.run(for: .seconds(10))
        let probes = link.sent(by: 0).filter { !$0.message.isResponse }
        let announcements = link.sent(by: 0).filter(\.message.isResponse)
        #expect(announcements.count == 3)
        #expect(announcements[0].time - probes[2].time == .milliseconds(250))
        #expect(announcements[1].time - announcements[0].time == .seconds(1))
        #expect(announcements[2].time - announcements[1].time == .seconds(2))
        #expect(link.nodes[0].responderEvents == [.registered(id, name: try! DNSName("Alice._chat._udp.local"))])
        for announcement in announcements {
            let message = announcement.message
            #expect(message.isAuthoritative && message.questions.isEmpty)
            for record in message.answers {
                switch record.type {
                case .ptr:
                    #expect(!record.cacheFlush)
                    #expect(record.ttl == 4500)
                case .txt:
                    #expect(record.cacheFlush)
                    #expect(record.ttl == 4500)
                case .srv, .a, .aaaa:
                    #expect(record.cacheFlush)
                    #expect(record.ttl == 120)
                case .nsec:
                    #expect(record.cacheFlush)
                default:
                    Issue.record("unexpected record \(record)")
                }
            }
            #expect(Set(message.answers.map(\.type)).isSuperset(of: [.ptr, .srv, .txt, .a]))
        }
    }

    @Test func anEmptyTXTRecordGoesOutAsOneZeroByte() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(2))
        let announcement = link.sent(by: 0).first(where: \.message.isResponse)!
        // Find the TXT record's rdata in the encoded bytes: type 16, class 0x8001, TTL 4500, then
        // rdlength 1 and a single zero byte.
        let bytes = Array(announcement.bytes.readableBytesView)
        let pattern: [UInt8] = [0x00, 0x10, 0x80, 0x01, 0x00, 0x00, 0x11, 0x94, 0x00, 0x01, 0x00]
        #expect(bytes.indices.contains { bytes[$0...].starts(with: pattern) })
    }

    @Test func answersAPTRQueryWithSRVTXTAndAddressesAsAdditionalsAfter20To120ms() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)]), from: querier)
        let asked = link.now
        #expect(link.log.isEmpty)  // shared answer: delayed
        link.run(for: .milliseconds(200))
        #expect(link.log.count == 1)
        let reply = link.log[0]
        #expect(reply.destination == .multicast)
        #expect(reply.time - asked >= .milliseconds(20) && reply.time - asked <= .milliseconds(120))
        #expect(reply.message.answers.map(\.type) == [.ptr])
        #expect(Set(reply.message.additionals.map(\.type)).isSuperset(of: [.srv, .txt, .a]))
    }

    @Test func answersAUniqueQuestionAtOnce() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: try! DNSName("Alice._chat._udp.local"), type: .srv)]), from: querier)
        #expect(link.log.count == 1)
        #expect(link.log.first?.message.answers.map(\.type) == [.srv])
        #expect(link.log.first?.message.additionals.contains { $0.type == .a } == true)
    }

    @Test(arguments: [(UInt32(4500), false), (UInt32(2250), false), (UInt32(2249), true)])
    func knownAnswerSuppressionNeedsAtLeastHalfTheTTL(knownTTL: UInt32, answered: Bool) {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let known = DNSResourceRecord(name: Self.chat.domainName, data: .ptr(try! DNSName("Alice._chat._udp.local")), ttl: knownTTL)
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)], answers: [known]), from: querier)
        link.run(for: .milliseconds(200))
        #expect(link.log.isEmpty == !answered)
    }

    @Test func aRecordIsMulticastAtMostOnceASecondAndALaterQueryIsAnsweredWhenTheSecondHasPassed() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)])
        link.inject(query, from: querier)
        link.run(for: .milliseconds(300))
        #expect(link.log.count == 1)
        let first = link.log[0].time
        link.inject(query, from: querier)
        link.run(for: .milliseconds(600))
        #expect(link.log.count == 1)  // not again within the second…
        link.run(for: .milliseconds(300))
        #expect(link.log.count == 2)  // …but as soon as it has passed
        #expect(link.log[1].time - first == .seconds(1))
        #expect(link.log[1].message.answers.map(\.type) == [.ptr])
    }

    @Test func knownAnswersInTheContinuationOfATruncatedQuerySuppressAnswers() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        var query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)])
        query.isTruncated = true
        link.inject(query, from: querier)
        // The continuation: no questions, our PTR among the known answers.
        let known = DNSResourceRecord(name: Self.chat.domainName, data: .ptr(try! DNSName("Alice._chat._udp.local")), ttl: 4500)
        link.run(for: .milliseconds(100))
        link.inject(DNSMessage(isResponse: false, answers: [known]), from: querier)
        link.run(for: .seconds(1))
        #expect(link.log.isEmpty)
        // Without the continuation, the answer comes 400–500 ms after the truncated query.
        link.inject(query, from: querier)
        let asked = link.now
        link.run(for: .seconds(1))
        #expect(link.log.count == 1)
        #expect(link.log.first.map { $0.time - asked >= .milliseconds(400) && $0.time - asked <= .milliseconds(500) } == true)
    }

    @Test func duplicateAnswerSuppressionDropsAnAnswerAnotherResponderJustGave() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)]), from: querier)
        // Before our delayed answer goes, another responder multicasts the same PTR.
        let same = DNSResourceRecord(name: Self.chat.domainName, data: .ptr(try! DNSName("Alice._chat._udp.local")), ttl: 4500)
        link.inject(DNSMessage(isResponse: true, answers: [same]), from: try! SocketAddress(ipAddress: "10.0.0.98", port: 5353))
        link.run(for: .milliseconds(200))
        #expect(link.log.isEmpty)
    }

    @Test func aLegacyUnicastQueryGetsAConventionalReply() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 40000)
        let question = DNSQuestion(name: try! DNSName("Alice._chat._udp.local"), type: .srv)
        link.inject(DNSMessage(id: 0x1234, isResponse: false, questions: [question]), from: querier)
        #expect(link.log.count == 1)
        let reply = link.log[0]
        #expect(reply.destination == .unicast(querier))
        #expect(reply.message.id == 0x1234)
        #expect(reply.message.questions == [question])
        #expect(reply.message.answers.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush })
        #expect(reply.message.additionals.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush })
    }

    @Test func aQUQuestionIsAnsweredByUnicastWhenTheRecordWasMulticastRecently() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: try! DNSName("Alice._chat._udp.local"), type: .srv, unicastResponse: true)]), from: querier)
        #expect(link.log.count == 1)
        #expect(link.log.first?.destination == .unicast(querier))
    }

    @Test func aQuestionForATypeTheHostLacksIsAnsweredWithNSEC() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let host = link.nodes[0].machine.responder.hostName!
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: host, type: .aaaa)]), from: try! SocketAddress(ipAddress: "10.0.0.99", port: 5353))
        #expect(link.log.count == 1)
        let answer = link.log.first?.message.answers.first
        #expect(answer?.type == .nsec)
        #expect(answer?.data == .nsec(next: host, types: [.a]))
    }

    @Test func withdrawingSendsGoodbyesWithTTLZero() {
        var (link, id) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        link.with(0) { machine, now in machine.responder.unregister(id, now: now) }
        #expect(!link.log.isEmpty)
        let goodbyes = link.log.flatMap(\.message.answers)
        #expect(goodbyes.allSatisfy { $0.ttl == 0 })
        #expect(Set(goodbyes.map(\.type)).isSuperset(of: [.ptr, .srv, .txt, .a]))
        link.run(for: .seconds(30))
        #expect(link.log.count == 1)  // nothing after the goodbye
    }

    @Test func aTXTUpdateIsAnnouncedAgain() {
        var (link, id) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        link.with(0) { machine, now in machine.responder.updateTXT(id, try! TXTRecord(["state": "busy"]), now: now) }
        link.run(for: .seconds(5))
        #expect(link.log.count == 3)
        for sent in link.log {
            #expect(sent.message.answers.contains { $0.data == .txt([Array("state=busy".utf8)]) && $0.cacheFlush })
        }
    }

    @Test func nothingIsAnsweredWhileProbing() {
        var (link, _) = Self.registered()
        link.run(for: .milliseconds(300))
        let querier = try! SocketAddress(ipAddress: "10.0.0.99", port: 5353)
        let before = link.log.count
        link.inject(DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)]), from: querier)
        link.run(for: .milliseconds(150))
        #expect(link.log[before...].allSatisfy { !$0.message.isResponse })
    }

    @Test func queriesWithOtherOpcodesOrResponseCodesAreIgnored() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        var query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: try! DNSName("Alice._chat._udp.local"), type: .srv)])
        query.opcode = 2
        link.inject(query, from: try! SocketAddress(ipAddress: "10.0.0.99", port: 5353))
        query.opcode = 0
        query.responseCode = 3
        link.inject(query, from: try! SocketAddress(ipAddress: "10.0.0.99", port: 5353))
        #expect(link.log.isEmpty)
    }

    @Test func aNewInterfaceIsAnnouncedOnAndALostAddressGetsAGoodbye() {
        var (link, _) = Self.registered()
        link.run(for: .seconds(10))
        link.log.removeAll()
        let old = link.nodes[0].interface
        var moved = old
        moved.ipv4 = [IPv4Bytes(10, 0, 0, 77)]
        let second = NetworkInterface(index: 9, name: "second", ipv4: [IPv4Bytes(192, 168, 1, 5)])
        link.with(0) { machine, now in machine.setInterfaces([moved, second], now: now) }
        // At once: a goodbye for the address that went away, then announcements with the new one.
        let first = link.log.first
        #expect(first?.message.answers == [DNSResourceRecord(name: link.nodes[0].machine.responder.hostName!, data: .a(IPv4Bytes(10, 0, 0, 1)), ttl: 0, cacheFlush: true)])
        link.run(for: .seconds(5))
        let announced = link.log.dropFirst().filter(\.message.isResponse)
        #expect(announced.count == 6)  // three on each interface (the virtual link does not tell them apart)
        #expect(announced.contains { $0.message.answers.contains { $0.data == .a(IPv4Bytes(10, 0, 0, 77)) } })
        #expect(announced.contains { $0.message.answers.contains { $0.data == .a(IPv4Bytes(192, 168, 1, 5)) } })
        // Each interface's announcements carry its own addresses only.
        #expect(!announced.contains { sent in
            sent.message.answers.contains { $0.data == .a(IPv4Bytes(10, 0, 0, 77)) } && sent.message.answers.contains { $0.data == .a(IPv4Bytes(192, 168, 1, 5)) }
        })
    }

    @Test func withoutInterfacesNothingIsSentAndNothingSpins() {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in machine.setInterfaces([], now: now) }
        _ = link.with(0) { machine, now in try! machine.responder.register(.test(), now: now) }
        link.run(for: .seconds(10))
        #expect(link.log.isEmpty)
    }
}
