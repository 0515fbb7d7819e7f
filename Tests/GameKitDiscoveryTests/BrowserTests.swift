@_spi(Machine) import GameKitMachine
import NIOCore
import Testing

@testable import GameKitDiscovery

@Suite("Browser: querying, cache, resolution")
struct BrowserTests {
    static let chat = try! ServiceType("_chat._udp")
    static let alice = try! DNSName("Alice._chat._udp.local")
    static let host = try! DNSName("alice-host.local")
    static let foreign = try! SocketAddress(ipAddress: "10.0.0.50", port: 5353)

    static func ptr(ttl: UInt32 = 4500) -> DNSResourceRecord {
        DNSResourceRecord(name: chat.domainName, data: .ptr(alice), ttl: ttl)
    }
    static func srv(port: UInt16 = 7000, ttl: UInt32 = 120) -> DNSResourceRecord {
        DNSResourceRecord(name: alice, data: .srv(priority: 0, weight: 0, port: port, target: host), ttl: ttl, cacheFlush: true)
    }
    static func txt(_ strings: [String] = ["v=1"], ttl: UInt32 = 4500) -> DNSResourceRecord {
        DNSResourceRecord(name: alice, data: .txt(strings.map { Array($0.utf8) }), ttl: ttl, cacheFlush: true)
    }
    static func a(_ last: UInt8 = 50, ttl: UInt32 = 120) -> DNSResourceRecord {
        DNSResourceRecord(name: host, data: .a(IPv4Bytes(10, 0, 0, last)), ttl: ttl, cacheFlush: true)
    }

    /// A link with one browsing node.
    static func browsing() -> VirtualLink {
        var link = VirtualLink()
        link.addNode()
        link.with(0) { machine, now in machine.browser.startBrowsing(Self.chat, now: now) }
        return link
    }

    /// A link with a browsing node (0) and a node (1) that registers "Alice".
    static func respondingAndBrowsing() -> VirtualLink {
        var link = VirtualLink()
        link.addNode()
        link.addNode()
        link.with(1) { machine, now in _ = try! machine.responder.register(.test("Alice"), now: now) }
        link.with(0) { machine, now in machine.browser.startBrowsing(Self.chat, now: now) }
        return link
    }

    /// A browsing node holding Alice's records (SRV TTL 4500 s) that hears another host ask for
    /// the SRV twice, `gap` apart, with no answer.
    static func askedTwiceForTheSRV(gap: TimeAmount) -> VirtualLink {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(ttl: 4500), Self.txt(), Self.a()]), from: Self.foreign)
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.alice, type: .srv)])
        let other = try! SocketAddress(ipAddress: "10.0.0.60", port: 5353)
        link.inject(query, from: other)
        link.run(for: gap)
        link.inject(query, from: other)
        return link
    }

    static func events(_ link: VirtualLink) -> [BrowseEvent] { link.nodes[0].browseEvents.map(\.event) }

    @Test func queriesFirstAfter20To120msThenWithGapsThatDouble() {
        var link = Self.browsing()
        link.run(for: .seconds(70))
        let queries = link.sent(by: 0).filter { !$0.message.isResponse }
        #expect(queries.count == 7)  // ~0.1, 1, 3, 7, 15, 31, 63 s
        let first = queries[0].time - VirtualLink.start
        #expect(first >= .milliseconds(20) && first <= .milliseconds(120))
        for index in 1..<queries.count {
            #expect(queries[index].time - queries[index - 1].time == .seconds(Int64(1) << (index - 1)))
        }
        #expect(queries.allSatisfy { $0.message.questions == [DNSQuestion(name: Self.chat.domainName, type: .ptr)] })
    }

    @Test func anInstanceIsFoundOnlyWhenSRVTXTAndAnAddressAreKnown() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr()]), from: Self.foreign)
        link.inject(DNSMessage(isResponse: true, answers: [Self.srv()]), from: Self.foreign)
        link.inject(DNSMessage(isResponse: true, answers: [Self.txt()]), from: Self.foreign)
        #expect(Self.events(link).isEmpty)
        link.inject(DNSMessage(isResponse: true, answers: [Self.a()]), from: Self.foreign)
        let events = Self.events(link)
        #expect(events.count == 1)
        guard case .found(let instance) = events.first else { return }
        #expect(instance.name == Self.alice)
        #expect(instance.instanceName == "Alice")
        #expect(instance.port == 7000)
        #expect(instance.host == Self.host)
        #expect(instance.txt["v"] == "1")
        #expect(instance.addresses == [ScopedAddress(address: .v4(IPv4Bytes(10, 0, 0, 50)), interfaceIndex: VirtualLink.interfaceIndex)])
    }

    @Test func anUnresolvedInstanceIsAskedForItsMissingRecords() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr()]), from: Self.foreign)
        link.run(for: .milliseconds(10))
        let asked = link.sent(by: 0).flatMap(\.message.questions)
        #expect(asked.contains(DNSQuestion(name: Self.alice, type: .srv)))
        #expect(asked.contains(DNSQuestion(name: Self.alice, type: .txt)))
        link.inject(DNSMessage(isResponse: true, answers: [Self.srv(), Self.txt()]), from: Self.foreign)
        link.run(for: .seconds(2))
        let later = link.sent(by: 0).flatMap(\.message.questions)
        #expect(later.contains(DNSQuestion(name: Self.host, type: .a)))
    }

    @Test func aGoodbyeIsReportedLostAtOnceAndTheRecordLingersOneSecond() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        #expect(Self.events(link).count == 1)
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(ttl: 0)]), from: Self.foreign)
        #expect(Self.events(link).count == 2)
        guard case .lost(let instance) = Self.events(link).last else {
            Issue.record("expected lost")
            return
        }
        #expect(instance.name == Self.alice)
        let key = RecordCache.Key(interfaceIndex: VirtualLink.interfaceIndex, name: Self.chat.domainName, data: .ptr(Self.alice))
        #expect(link.nodes[0].machine.browser.cache.entries[key]?.isGoodbye == true)
        link.run(for: .milliseconds(999))
        #expect(link.nodes[0].machine.browser.cache.entries[key] != nil)
        link.run(for: .milliseconds(2))
        #expect(link.nodes[0].machine.browser.cache.entries[key] == nil)
    }

    /// The same goodbye again (its copy on the other address family, or a repeat) changes
    /// nothing: no event, and the record still goes one second after the first.
    @Test func aRepeatedGoodbyeChangesNothing() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(ttl: 0)]), from: Self.foreign)
        #expect(Self.events(link).count == 2)
        var cache = link.nodes[0].machine.browser.cache
        var random = MachineRandom(seed: 1)
        #expect(cache.insert(Self.ptr(ttl: 0), interfaceIndex: VirtualLink.interfaceIndex, now: link.now, random: &random) == .ignored)
        link.run(for: .milliseconds(500))
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(ttl: 0)]), from: Self.foreign)
        #expect(Self.events(link).count == 2)
        let key = RecordCache.Key(interfaceIndex: VirtualLink.interfaceIndex, name: Self.chat.domainName, data: .ptr(Self.alice))
        link.run(for: .milliseconds(501))
        #expect(link.nodes[0].machine.browser.cache.entries[key] == nil)
    }

    /// An answer sent before the goodbye but read after it (on the other address family's
    /// socket; seen under load in GoodbyeProcessTests: lost, found, lost within 2 ms) brings
    /// nothing back while the goodbye lingers; the same records after that second are a new
    /// sighting (a responder that comes back probes first, which takes longer).
    @Test func anAnswerReadAfterTheGoodbyeBringsNothingBack() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(ttl: 0)]), from: Self.foreign)
        #expect(Self.events(link).count == 2)
        link.run(for: .milliseconds(2))
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.run(for: .milliseconds(2))
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(ttl: 0)]), from: Self.foreign)
        #expect(Self.events(link).count == 2, "\(Self.events(link))")
        link.run(for: .milliseconds(1000))
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        #expect(Self.events(link).count == 3, "\(Self.events(link))")
        guard case .found(let instance) = Self.events(link).last else {
            Issue.record("expected found, got \(Self.events(link))")
            return
        }
        #expect(instance.name == Self.alice)
    }

    @Test func aTXTChangeIsReportedUpdated() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.run(for: .seconds(2))
        link.inject(DNSMessage(isResponse: true, answers: [Self.txt(["v=2"])]), from: Self.foreign)
        // The cache-flush bit retires the old TXT one second later; the new one wins at once.
        guard case .updated(let instance) = Self.events(link).last else {
            Issue.record("expected updated, got \(Self.events(link))")
            return
        }
        #expect(instance.txt["v"] == "2")
        link.run(for: .seconds(2))
        #expect(link.nodes[0].machine.browser.cache.live(name: Self.alice, type: .txt, now: link.now).count == 1)
    }

    /// A copy of the old TXT sent before the new one but read after it (on the other address
    /// family's socket; seen beside the in-process pass on a busy machine, where the browser then
    /// reported the old TXT again when an address arrived next) changes nothing: flushed, it is
    /// ignored while it lingers; heard less than a second before the new one (so not flushed), the
    /// new one, first heard last, stays current.
    @Test(arguments: [false, true])
    func aLateCopyOfTheOldTXTDoesNotDisplaceTheNew(refreshedJustBefore: Bool) {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.run(for: .seconds(2))
        if refreshedJustBefore {
            link.inject(DNSMessage(isResponse: true, answers: [Self.txt()]), from: Self.foreign)
            link.run(for: .milliseconds(500))
        }
        link.inject(DNSMessage(isResponse: true, answers: [Self.txt(["v=2"])]), from: Self.foreign)
        #expect(Self.events(link).count == 2, "\(Self.events(link))")
        link.run(for: .milliseconds(2))
        link.inject(DNSMessage(isResponse: true, answers: [Self.txt()]), from: Self.foreign)
        link.run(for: .milliseconds(2))
        #expect(Self.events(link).count == 2, "\(Self.events(link))")
        // Anything that makes the browser resolve again (here a second address) shows the new TXT.
        link.inject(DNSMessage(isResponse: true, answers: [Self.a(51)]), from: Self.foreign)
        #expect(Self.events(link).count == 3, "\(Self.events(link))")
        guard case .updated(let instance) = Self.events(link).last else {
            Issue.record("expected updated, got \(Self.events(link))")
            return
        }
        #expect(instance.txt["v"] == "2")
        #expect(instance.addresses.count == 2)
        // The responder's next announcement retires the old one where it was not flushed yet.
        link.run(for: .seconds(1))
        link.inject(DNSMessage(isResponse: true, answers: [Self.txt(["v=2"])]), from: Self.foreign)
        link.run(for: .seconds(2))
        #expect(link.nodes[0].machine.browser.cache.live(name: Self.alice, type: .txt, now: link.now).count == 1)
        // Every report since the update (the first address, flushed by the second, goes too) has
        // the new TXT.
        let since = Self.events(link).dropFirst()
        #expect(since.allSatisfy { event in
            if case .updated(let instance) = event { return instance.txt["v"] == "2" }
            return false
        }, "\(Self.events(link))")
    }

    @Test func anAddressChangeIsReportedUpdated() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a(50)]), from: Self.foreign)
        link.run(for: .seconds(2))
        link.inject(DNSMessage(isResponse: true, answers: [Self.a(51)]), from: Self.foreign)
        #expect(Self.events(link).count == 2)
        link.run(for: .seconds(2))
        guard case .updated(let instance) = Self.events(link).last else {
            Issue.record("expected updated")
            return
        }
        #expect(instance.addresses.map(\.address) == [.v4(IPv4Bytes(10, 0, 0, 51))])
    }

    @Test func refreshPointsAre80To95PercentOfTheTTLAndUnansweredRefreshesFlushTheRecordEarly() throws {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(ttl: 4500), Self.srv(ttl: 100), Self.txt(ttl: 4500), Self.a(ttl: 4500)]), from: Self.foreign)
        let start = link.now
        let key = RecordCache.Key(interfaceIndex: VirtualLink.interfaceIndex, name: Self.alice, data: Self.srv().data)
        let points = try #require(link.nodes[0].machine.browser.cache.entries[key]?.refreshPoints)
        #expect(points.count == 4)
        for (point, fraction) in zip(points, [0.80, 0.85, 0.90, 0.95]) {
            let elapsed = Double((point - start).nanoseconds) / 1e9
            #expect(elapsed >= 100 * fraction && elapsed <= 100 * (fraction + 0.02))
        }
        link.log.removeAll()
        link.run(for: .seconds(101))
        let refreshes = link.sent(by: 0).filter { $0.message.questions.contains(DNSQuestion(name: Self.alice, type: .srv)) }
        try #require(refreshes.count >= 2)
        #expect(refreshes[0].time == points[0] && refreshes[1].time == points[1])
        // Nobody answers them: the SRV is flushed ten seconds after the first, and at least a
        // second after the second, before its TTL runs out; the instance is lost then.
        let flush = max(refreshes[0].time + .seconds(10), refreshes[1].time + .seconds(1))
        let lost = link.nodes[0].browseEvents.filter { if case .lost = $0.event { true } else { false } }
        #expect(lost.map(\.time) == [flush])
        #expect(flush < start + .seconds(100))
    }

    @Test func aResponderThatFallsSilentIsLostAfterTwoUnansweredRefreshesBeforeItsTTLRunsOut() throws {
        // The responder's host vanishes without a goodbye. The browser's own refresh queries for
        // the SRV (TTL 120 s), from 80 % of its TTL on, go unanswered, and the instance is
        // reported lost ten seconds after the first of them (RFC 6762 §10.4), not at expiry.
        var link = Self.respondingAndBrowsing()
        link.run(for: .seconds(10))
        guard case .found = Self.events(link).first else {
            Issue.record("expected found, got \(Self.events(link))")
            return
        }
        link.deliver = { from, _ in from != 1 }
        let srv = try #require(link.nodes[0].machine.browser.cache.entries.values.first { $0.record.type == .srv })
        link.log.removeAll()
        link.run(for: .seconds(130))
        let asked = link.sent(by: 0).filter { sent in
            sent.message.questions.contains(DNSQuestion(name: Self.alice, type: .srv)) && !sent.message.answers.contains { $0.type == .srv }
        }
        try #require(asked.count >= 2)
        #expect(asked[0].time >= srv.received + .seconds(96))
        let flush = max(asked[0].time + .seconds(10), asked[1].time + .seconds(1))
        let lost = link.nodes[0].browseEvents.filter { if case .lost = $0.event { true } else { false } }
        #expect(lost.map(\.time) == [flush])
        #expect(flush < srv.expires)
    }

    @Test func anAnsweredRefreshKeepsTheInstance() {
        var link = Self.respondingAndBrowsing()
        link.run(for: .seconds(400))
        #expect(Self.events(link).count == 1)
        guard case .found = Self.events(link).first else {
            Issue.record("expected found")
            return
        }
    }

    @Test func reconfirmationFlushesAnInstanceNobodyAnswersForInTenSeconds() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.with(0) { machine, now in machine.browser.reconfirm(Self.alice, now: now) }
        link.run(for: .seconds(9))
        #expect(Self.events(link).count == 1)
        link.run(for: .seconds(2))
        guard case .lost = Self.events(link).last else {
            Issue.record("expected lost, got \(Self.events(link))")
            return
        }
    }

    @Test func reconfirmationOfALiveInstanceKeepsIt() {
        var link = Self.respondingAndBrowsing()
        link.run(for: .seconds(5))
        link.with(0) { machine, now in machine.browser.reconfirm(Self.alice, now: now) }
        link.run(for: .seconds(20))
        #expect(Self.events(link).count == 1)
    }

    @Test func queriesOthersSendWithoutAnswersFlushARecordAfterTenSeconds() {
        // Passive observation of failures (RFC 6762 §10.5): two queries for the SRV go
        // unanswered, so it is flushed although its TTL has long to run.
        var link = Self.askedTwiceForTheSRV(gap: .seconds(1))
        link.run(for: .seconds(8))
        #expect(Self.events(link).count == 1)
        link.run(for: .seconds(2))
        guard case .lost = Self.events(link).last else {
            Issue.record("expected lost")
            return
        }
    }

    @Test func aSecondUnansweredQueryLongAfterTheFirstStillGetsASecondForItsAnswer() {
        var link = Self.askedTwiceForTheSRV(gap: .seconds(60))
        // The answer comes 100 ms after the second query: the record stays.
        link.run(for: .milliseconds(100))
        link.inject(DNSMessage(isResponse: true, answers: [Self.srv(ttl: 4500)]), from: Self.foreign)
        link.run(for: .seconds(30))
        #expect(Self.events(link).count == 1)
    }

    @Test func browseQueriesListKnownAnswersWithMoreThanHalfTheirTTL() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(ttl: 100), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.log.removeAll()
        link.run(for: .seconds(3))
        let early = link.sent(by: 0).filter { $0.message.questions.contains(DNSQuestion(name: Self.chat.domainName, type: .ptr)) }
        #expect(!early.isEmpty)
        #expect(early.allSatisfy { $0.message.answers.contains { $0.data == .ptr(Self.alice) && $0.ttl <= 100 && $0.ttl > 50 } })
    }

    @Test func anotherHostsIdenticalQuestionSuppressesOurNextQuery() {
        var link = Self.browsing()
        link.run(for: .seconds(3))  // queries at ~0.1 s and ~1.1 s; the next is due ~3.1 s + 4 s gap follows
        let before = link.sent(by: 0).filter { !$0.message.isResponse }.count
        // Half way into the 2-second gap before the third query, another host asks the same.
        let question = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.chat.domainName, type: .ptr)])
        link.inject(question, from: try! SocketAddress(ipAddress: "10.0.0.60", port: 5353))
        link.run(for: .milliseconds(500))
        #expect(link.sent(by: 0).filter { !$0.message.isResponse }.count == before)
    }

    @Test func anInterfaceThatGoesAwayTakesItsInstancesWithIt() {
        var link = Self.browsing()
        link.inject(DNSMessage(isResponse: true, answers: [Self.ptr(), Self.srv(), Self.txt(), Self.a()]), from: Self.foreign)
        link.with(0) { machine, now in machine.setInterfaces([], now: now) }
        guard case .lost = Self.events(link).last else {
            Issue.record("expected lost")
            return
        }
    }

    @Test func aBrowserOnTheSameLinkFindsAResponderAndLosesItOnGoodbye() {
        var link = VirtualLink()
        link.addNode()
        link.addNode()
        let id = link.with(1) { machine, now in try! machine.responder.register(.test("Alice", txt: try! TXTRecord(["k": "v"])), now: now) }
        link.with(0) { machine, now in machine.browser.startBrowsing(Self.chat, now: now) }
        link.run(for: .seconds(3))
        guard case .found(let instance) = Self.events(link).first else {
            Issue.record("expected found")
            return
        }
        #expect(instance.port == 7000 && instance.txt["k"] == "v")
        #expect(instance.addresses.map(\.address) == [.v4(IPv4Bytes(10, 0, 0, 2))])
        link.with(1) { machine, now in machine.responder.unregister(id, now: now) }
        guard case .lost = Self.events(link).last else {
            Issue.record("expected lost")
            return
        }
    }

    @Test func recordsOfOtherTypesAreNotCached() {
        var link = Self.browsing()
        let other = DNSResourceRecord(name: try! DNSName("_other._udp.local"), data: .ptr(try! DNSName("X._other._udp.local")), ttl: 4500)
        link.inject(DNSMessage(isResponse: true, answers: [other]), from: Self.foreign)
        #expect(link.nodes[0].machine.browser.cache.entries.isEmpty)
    }

    @Test func addressesAreCachedOnlyForHostsAnSRVNames() {
        var link = Self.browsing()
        let stranger = DNSResourceRecord(name: try! DNSName("printer.local"), data: .a(IPv4Bytes(10, 0, 0, 9)), ttl: 120, cacheFlush: true)
        // The address comes before the SRV that names its host, in one message: still cached.
        link.inject(DNSMessage(isResponse: true, answers: [Self.a(), stranger, Self.ptr(), Self.srv(), Self.txt()]), from: Self.foreign)
        #expect(Self.events(link).count == 1)
        #expect(link.nodes[0].machine.browser.cache.entries.values.contains { $0.record.name == Self.host })
        #expect(!link.nodes[0].machine.browser.cache.entries.values.contains { $0.record.name == stranger.name })
    }
}
