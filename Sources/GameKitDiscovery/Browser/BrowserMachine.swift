@_spi(Machine) import GameKitMachine
import NIOCore

/// The multicast DNS browser, without I/O: continuous querying for service types, the record
/// cache, and resolution of instances into found / updated / lost events (RFC 6762 §5, §7, §10;
/// RFC 6763 §4, §12).
struct BrowserMachine: Sendable {
    /// The query schedule of one question (§5.2): the first query 20–120 ms after starting, then
    /// gaps of 1 s doubling up to an hour.
    struct QuerySchedule: Sendable {
        static let firstDelay: ClosedRange<Int64> = 20...120
        static let firstInterval = TimeAmount.seconds(1)
        static let maximumInterval = TimeAmount.seconds(3600)

        var next: NIODeadline
        var interval: TimeAmount
        /// When the last query went (or counted as gone); the start of the current gap.
        var last: NIODeadline

        init(now: NIODeadline, random: inout MachineRandom) {
            self.next = now + random.milliseconds(Self.firstDelay)
            self.interval = Self.firstInterval
            self.last = now
        }

        mutating func sent(now: NIODeadline) {
            self.last = now
            self.next = now + self.interval
            self.interval = min(self.interval * 2, Self.maximumInterval)
        }

        /// Whether `now` is in the second half of the gap before the next query.
        func isInSecondHalf(now: NIODeadline) -> Bool {
            now < self.next && (now - self.last).nanoseconds * 2 >= (self.next - self.last).nanoseconds
        }
    }

    /// Queries for an instance that is not resolved yet: SRV/TXT, then addresses; at once, then
    /// 1 s, 2 s, 4 s, and no more until something new is heard.
    struct ResolveSchedule: Sendable {
        static let attempts = 4
        /// Nil once every attempt is spent: no more queries until the instance resolves or goes.
        var next: NIODeadline?
        var sent = 0
    }

    /// Unresolved instances asked for per browsed type, at most (a bound against PTR floods).
    static let maximumUnresolvedPerType = 64

    private(set) var browses: [ServiceType: QuerySchedule] = [:]
    private(set) var cache = RecordCache()
    private(set) var reported: [DNSName: ServiceInstance] = [:]
    /// Goodbyes heard for each browsed type's instances (PTR records with TTL 0, once each):
    /// how a browser tells an instance that was withdrawn from one that fell silent.
    private(set) var goodbyesHeard: [DNSName: Int] = [:]
    /// The hosts of reported instances, updated wherever `reported` changes: `isInteresting`
    /// runs for every cached record on every cycle and must not search the instances each time.
    private var reportedHosts: Set<DNSName> = []
    private var resolving: [DNSName: ResolveSchedule] = [:]
    private(set) var interfaces: [Int: NetworkInterface] = [:]
    var random: MachineRandom

    private(set) var outgoing: [OutgoingMessage] = []
    private(set) var events: [BrowseEvent] = []

    init(random: MachineRandom) {
        self.random = random
    }

    // MARK: - Application

    /// Starts browsing for `type` (querying continuously). Instances already known are reported
    /// found at once.
    mutating func startBrowsing(_ type: ServiceType, now: NIODeadline) {
        guard self.browses[type] == nil else { return }
        self.browses[type] = QuerySchedule(now: now, random: &self.random)
        self.resolve(now: now)
    }

    /// Stops browsing for `type`; its instances are forgotten without events.
    mutating func stopBrowsing(_ type: ServiceType) {
        self.browses[type] = nil
        self.reported = self.reported.filter { $0.value.serviceType != type }
        self.reportedHosts = Set(self.reported.values.map(\.host))
    }

    /// The application found an instance's data wrong (e.g. a connection failed): ask again, and
    /// flush its records if nobody answers within ten seconds (RFC 6762 §10.4).
    mutating func reconfirm(_ name: DNSName, now: NIODeadline) {
        guard let instance = self.reported[name] else { return }
        for interface in self.interfaces.values {
            let questions = [DNSQuestion(name: name, type: .srv), DNSQuestion(name: instance.host, type: .a), DNSQuestion(name: instance.host, type: .aaaa)]
            for message in MessagePacker.queries(questions: questions, knownAnswers: []) {
                self.outgoing.append(OutgoingMessage(message: message, interfaceIndex: interface.index, destination: .multicast))
            }
        }
        self.cache.markUnanswered(name: name, now: now)
        self.cache.markUnanswered(name: instance.host, now: now)
    }

    /// The interfaces to query on. Records of interfaces that went away are dropped (§10.3);
    /// a new interface restarts the query schedules.
    mutating func setInterfaces(_ interfaces: [NetworkInterface], now: NIODeadline) {
        let old = self.interfaces
        self.interfaces = Dictionary(interfaces.map { ($0.index, $0) }, uniquingKeysWith: { first, _ in first })
        for index in old.keys where self.interfaces[index] == nil {
            self.cache.removeInterface(index)
        }
        if self.interfaces.keys.contains(where: { old[$0] == nil }) {
            for type in self.browses.keys { self.browses[type] = QuerySchedule(now: now, random: &self.random) }
        }
        self.resolve(now: now)
    }

    // MARK: - Receiving

    /// Caches the records of a response; notes queries for passive failure detection and
    /// duplicate-question suppression.
    mutating func receive(_ incoming: IncomingMessage, now: NIODeadline) {
        let message = incoming.message
        guard message.opcode == 0, message.responseCode == 0, self.interfaces[incoming.interfaceIndex] != nil else { return }
        if message.isResponse {
            // Unicast replies to our QU questions come from port 5353 too; legacy replies are
            // not for us (we never send from another port).
            guard incoming.isFromMulticastDNSPort else { return }
            // Addresses last: they are relevant only for hosts that an SRV (perhaps in this very
            // message) names.
            let records = message.answers + message.additionals
            let isAddress = { (record: DNSResourceRecord) in record.type == .a || record.type == .aaaa }
            // Resolution is recomputed only when the set of records changed (a refresh of a
            // record already held changes nothing anyone reports).
            var changed = false
            for record in records.filter({ !isAddress($0) }) where self.isRelevant(record) {
                let change = self.cache.insert(record, interfaceIndex: incoming.interfaceIndex, now: now, random: &self.random)
                changed = changed || change == .added || change == .goodbye
                if change == .goodbye, case .ptr = record.data { self.goodbyesHeard[record.name, default: 0] += 1 }
            }
            let addresses = records.filter(isAddress)
            if !addresses.isEmpty {
                let targets = self.cache.srvTargets
                for record in addresses where targets.contains(record.name) {
                    let change = self.cache.insert(record, interfaceIndex: incoming.interfaceIndex, now: now, random: &self.random)
                    changed = changed || change == .added || change == .goodbye
                }
            }
            if changed { self.resolve(now: now) }
        } else if !self.isOwn(incoming) {
            self.cache.observeQuery(message, interfaceIndex: incoming.interfaceIndex, now: now, interesting: self.isInteresting)
            self.suppressDuplicateQuestions(message, interfaceIndex: incoming.interfaceIndex, now: now)
        }
    }

    /// Whether a query came from this host's port 5353: our own queries looped back (or another
    /// mDNS stack on this host). They are neither evidence of failures nor duplicates to
    /// suppress ours for.
    private func isOwn(_ incoming: IncomingMessage) -> Bool {
        guard incoming.isFromMulticastDNSPort, let interface = self.interfaces[incoming.interfaceIndex] else { return false }
        return interface.addresses.contains { address in
            switch (address, incoming.source) {
            case (.v4(let bytes), .v4(let source)):
                return withUnsafeBytes(of: source.address.sin_addr) { Array($0) } == bytes.array
            case (.v6(let bytes), .v6(let source)):
                return withUnsafeBytes(of: source.address.sin6_addr) { Array($0) } == bytes.array
            default:
                return false
            }
        }
    }

    /// Whether a record concerns a browsed type: a PTR of the type, SRV/TXT of an instance of
    /// it, or an address of a host such an SRV names. Others are not cached (bounded memory,
    /// nothing to report).
    private func isRelevant(_ record: DNSResourceRecord) -> Bool {
        switch record.data {
        case .ptr:
            return self.browses.keys.contains { $0.domainName == record.name }
        case .srv, .txt:
            return self.browses.keys.contains { record.name.isChild(of: $0.domainName) }
        case .a, .aaaa:
            return self.cache.srvTargets.contains(record.name)
        default:
            return false
        }
    }

    /// Records whose refresh the browser asks for: PTRs of browsed types and the SRV, TXT and
    /// addresses of instances it reported.
    private func isInteresting(_ entry: RecordCache.Entry) -> Bool {
        let record = entry.record
        switch record.data {
        case .ptr: return self.browses.keys.contains { $0.domainName == record.name }
        case .srv, .txt: return self.reported[record.name] != nil
        case .a, .aaaa: return self.reportedHosts.contains(record.name)
        default: return false
        }
    }

    /// §7.3: another host asked our browse question with all our known answers, so our next
    /// query can wait, if it was due in the second half of its interval.
    private mutating func suppressDuplicateQuestions(_ message: DNSMessage, interfaceIndex: Int, now: NIODeadline) {
        guard !message.isTruncated, message.authorities.isEmpty else { return }
        for (type, schedule) in self.browses {
            let question = DNSQuestion(name: type.domainName, type: .ptr)
            guard message.questions.contains(where: { $0.name == question.name && ($0.type == .ptr || $0.type == .any) && !$0.unicastResponse }) else { continue }
            guard schedule.isInSecondHalf(now: now) else { continue }
            // With one schedule for all interfaces, only a single-interface browser can rely on
            // another host's query: on several links, one link's query says nothing of the others.
            guard self.interfaces.count == 1, let index = self.interfaces.keys.first, index == interfaceIndex else { continue }
            let ours = self.cache.knownAnswers(for: question, interfaceIndex: index, now: now)
            guard ours.allSatisfy({ known in message.answers.contains { $0.isSameRecord(as: known) } }) else { continue }
            var updated = schedule
            updated.sent(now: now)
            self.browses[type] = updated
        }
    }

    // MARK: - Time

    var nextDeadline: NIODeadline? {
        var deadlines = self.browses.values.map(\.next) + self.resolving.values.compactMap(\.next)
        if let cache = self.cache.nextDeadline { deadlines.append(cache) }
        return deadlines.min()
    }

    /// Sends due queries and refreshes, expires records, and reports what changed.
    ///
    /// Each query sent counts as unanswered for the cached records it asks for without listing
    /// them as known answers, as another host's query would: a record whose owner stopped
    /// answering is flushed two unanswered queries later (§10.4), not only when its TTL runs out.
    mutating func handleTimeout(now: NIODeadline) {
        let (expiredEntries, refreshes) = self.cache.handleTimeout(now: now, interesting: self.isInteresting)
        let expired = !expiredEntries.isEmpty

        var questions: [Int: [DNSQuestion]] = [:]
        func ask(_ question: DNSQuestion, on index: Int) {
            if !(questions[index]?.contains(question) ?? false) { questions[index, default: []].append(question) }
        }
        // Sorted, so that a seeded run sends the same messages in the same order.
        for (type, schedule) in self.browses.sorted(by: { $0.key.domainName.description < $1.key.domainName.description }) where schedule.next <= now {
            var updated = schedule
            updated.sent(now: now)
            self.browses[type] = updated
            for index in self.interfaces.keys.sorted() { ask(DNSQuestion(name: type.domainName, type: .ptr), on: index) }
        }
        for (index, question) in refreshes where self.interfaces[index] != nil {
            ask(question, on: index)
        }
        for (name, schedule) in self.resolving.sorted(by: { $0.key.description < $1.key.description }) where schedule.next.map({ $0 <= now }) ?? false {
            var updated = schedule
            updated.sent += 1
            updated.next = updated.sent >= ResolveSchedule.attempts ? nil : now + .seconds(Int64(1) << (updated.sent - 1))
            self.resolving[name] = updated
            for question in self.missingRecords(of: name, now: now) {
                for index in self.interfaces.keys.sorted() { ask(question, on: index) }
            }
        }
        for (index, list) in questions.sorted(by: { $0.key < $1.key }) {
            let known = list.flatMap { self.cache.knownAnswers(for: $0, interfaceIndex: index, now: now) }
            for message in MessagePacker.queries(questions: list, knownAnswers: known) {
                self.outgoing.append(OutgoingMessage(message: message, interfaceIndex: index, destination: .multicast))
                self.cache.observeQuery(message, interfaceIndex: index, now: now, interesting: self.isInteresting)
            }
        }
        if expired { self.resolve(now: now) }
    }

    mutating func takeOutgoing() -> [OutgoingMessage] {
        defer { self.outgoing.removeAll() }
        return self.outgoing
    }

    mutating func takeEvents() -> [BrowseEvent] {
        defer { self.events.removeAll() }
        return self.events
    }

    /// The next event, in order.
    mutating func popEvent() -> BrowseEvent? {
        self.events.isEmpty ? nil : self.events.removeFirst()
    }

    // MARK: - Resolution

    /// The questions that would complete an instance: SRV and TXT, then the host's addresses.
    private func missingRecords(of name: DNSName, now: NIODeadline) -> [DNSQuestion] {
        var questions: [DNSQuestion] = []
        let srv = self.cache.live(name: name, type: .srv, now: now)
        if srv.isEmpty { questions.append(DNSQuestion(name: name, type: .srv)) }
        if self.cache.live(name: name, type: .txt, now: now).isEmpty { questions.append(DNSQuestion(name: name, type: .txt)) }
        for entry in srv {
            guard case .srv(_, _, _, let target) = entry.record.data else { continue }
            if self.cache.live(name: target, type: .a, now: now).isEmpty, self.cache.live(name: target, type: .aaaa, now: now).isEmpty {
                questions.append(DNSQuestion(name: target, type: .a))
                questions.append(DNSQuestion(name: target, type: .aaaa))
            }
        }
        return questions
    }

    /// Compares what the cache resolves now with what was reported, and reports the difference.
    private mutating func resolve(now: NIODeadline) {
        let eventsBefore = self.events.count
        defer {
            if self.events.count != eventsBefore { self.reportedHosts = Set(self.reported.values.map(\.host)) }
        }
        var present: Set<DNSName> = []
        for type in self.browses.keys.sorted(by: { $0.description < $1.description }) {
            var names: [DNSName] = []
            var seen: Set<DNSName> = []
            for entry in self.cache.live(name: type.domainName, type: .ptr, now: now) {
                if case .ptr(let target) = entry.record.data, target.isChild(of: type.domainName), seen.insert(target).inserted { names.append(target) }
            }
            var unresolved = self.resolving.keys.reduce(0) { $0 + ($1.isChild(of: type.domainName) ? 1 : 0) }
            for name in names {
                present.insert(name)
                guard let instance = self.resolveInstance(name, type: type, now: now) else {
                    if self.reported[name] == nil, self.resolving[name] == nil, unresolved < Self.maximumUnresolvedPerType {
                        self.resolving[name] = ResolveSchedule(next: now)
                        unresolved += 1
                    }
                    continue
                }
                self.resolving[name] = nil
                if let old = self.reported[name] {
                    if old != instance {
                        self.reported[name] = instance
                        self.events.append(.updated(instance))
                    }
                } else {
                    self.reported[name] = instance
                    self.events.append(.found(instance))
                }
            }
        }
        for (name, instance) in self.reported where !present.contains(name) || self.cache.live(name: name, type: .srv, now: now).isEmpty {
            self.reported[name] = nil
            self.events.append(.lost(instance))
        }
        self.resolving = self.resolving.filter { present.contains($0.key) }
    }

    /// The instance if its SRV, TXT and at least one address are in the cache.
    private func resolveInstance(_ name: DNSName, type: ServiceType, now: NIODeadline) -> ServiceInstance? {
        // Where old and new data coexist (the old lingers a second after a cache-flush), the new.
        let newest = { (lhs: RecordCache.Entry, rhs: RecordCache.Entry) in (lhs.firstReceived, lhs.received) < (rhs.firstReceived, rhs.received) }
        guard let srv = self.cache.live(name: name, type: .srv, now: now).max(by: newest),
            case .srv(_, _, let port, let target) = srv.record.data,
            let txtEntry = self.cache.live(name: name, type: .txt, now: now).max(by: newest),
            case .txt(let strings) = txtEntry.record.data
        else { return nil }
        var addresses: [ScopedAddress] = []
        let entries = (self.cache.live(name: target, type: .a, now: now) + self.cache.live(name: target, type: .aaaa, now: now))
            .sorted { lhs, rhs in
                (lhs.record.type.rawValue, lhs.interfaceIndex) != (rhs.record.type.rawValue, rhs.interfaceIndex)
                    ? (lhs.record.type.rawValue, lhs.interfaceIndex) < (rhs.record.type.rawValue, rhs.interfaceIndex)
                    : lhs.record.data.uncompressedBytes.lexicographicallyPrecedes(rhs.record.data.uncompressedBytes)
            }
        for entry in entries {
            let address: IPAddress
            switch entry.record.data {
            case .a(let bytes): address = .v4(bytes)
            case .aaaa(let bytes): address = .v6(bytes)
            default: continue
            }
            let scoped = ScopedAddress(address: address, interfaceIndex: entry.interfaceIndex)
            if !addresses.contains(scoped) { addresses.append(scoped) }
        }
        guard !addresses.isEmpty else { return nil }
        let txt = (try? TXTRecord(strings: strings)) ?? TXTRecord()
        return ServiceInstance(name: name, serviceType: type, host: target, port: port, txt: txt, addresses: addresses)
    }
}
