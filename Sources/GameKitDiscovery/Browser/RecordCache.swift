@_spi(Machine) import GameKitMachine
import NIOCore

/// Records heard on the network, with their expiry (RFC 6762 §5.2, §10).
///
/// Entries are kept per interface, because the same name may carry different addresses on
/// different links. A received record with TTL 0 (a goodbye) is kept for one more second, marked
/// as such, then removed (§10.1); while it lingers, the same record received again with a TTL is
/// ignored: a responder sends nothing for a record after its goodbye (it probes first when it
/// comes back, which takes longer than the second), so such a copy is one sent before the goodbye
/// and read after it, on the other address family's socket. A record with the cache-flush bit set makes older records of its
/// name and type on that interface expire one second later (§10.2); while such a flushed record
/// lingers, a copy of it is ignored in the same way (it was sent before the record that replaced
/// it), and where records of one name and type coexist, the one first heard last is current
/// (``Entry/firstReceived``), so that a late copy of the old data cannot displace the new. For records the browser
/// cares about, the cache knows the refresh points at 80, 85, 90 and 95 % of the TTL (plus up to
/// 2 % random, §5.2), and counts queries that went unanswered: the browser's own (§10.4) and
/// other hosts' (§10.5). A record two such queries did not bring back is flushed early.
struct RecordCache: Sendable {
    struct Key: Hashable, Sendable {
        var interfaceIndex: Int
        var name: DNSName
        var data: DNSRecordData
    }

    struct Entry: Sendable {
        var record: DNSResourceRecord
        var interfaceIndex: Int
        var received: NIODeadline
        /// When this data was first heard (refreshes keep it): of records of one name and type,
        /// the one first heard last is the current one.
        var firstReceived: NIODeadline
        var expires: NIODeadline
        /// A goodbye was heard: the entry goes when `expires` passes and counts as gone now.
        var isGoodbye: Bool
        /// A newer record of its name and type with the cache-flush bit retired it (§10.2): it
        /// goes when `expires` passes, and copies of it heard meanwhile are ignored.
        var isFlushed = false
        /// The refresh points not yet passed, earliest first.
        var refreshPoints: [NIODeadline]
        /// When queries that this record answers were sent or seen without it among their
        /// known answers, since it was last received (§10.4 for our own queries, §10.5 for
        /// others').
        var unansweredQueries: [NIODeadline] = []

        /// When the record is flushed unless heard again: once two queries went unanswered,
        /// ten seconds after the first, and never before the second has had time for an answer.
        var failureDeadline: NIODeadline? {
            guard self.unansweredQueries.count >= 2, !self.isGoodbye else { return nil }
            return max(self.unansweredQueries[0] + RecordCache.failureWindow, self.unansweredQueries[1] + RecordCache.answerWait)
        }

        /// The first of its expiry, next refresh point and failure deadline.
        var earliestDeadline: NIODeadline {
            var earliest = self.expires
            if let refresh = self.refreshPoints.first { earliest = min(earliest, refresh) }
            if let failure = self.failureDeadline { earliest = min(earliest, failure) }
            return earliest
        }

        /// Seconds of TTL left at `now`.
        func remainingTTL(now: NIODeadline) -> UInt32 {
            guard self.expires > now else { return 0 }
            return UInt32(clamping: (self.expires - now).nanoseconds / 1_000_000_000)
        }
    }

    /// Goodbyes and flushed records linger this long (RFC 6762 §10.1, §10.2).
    static let lingering = TimeAmount.seconds(1)
    /// A record that two queries did not bring back within this time is flushed (§10.4, §10.5).
    static let failureWindow = TimeAmount.seconds(10)
    /// How long the second unanswered query is given for its answer, at least (answers to
    /// shared records wait up to 120 ms, to truncated queries up to 500 ms: §6, §7.2).
    static let answerWait = TimeAmount.seconds(1)
    /// The most records the cache holds; beyond it new records are ignored (a bound against
    /// floods; real networks hold far fewer).
    static let capacity = 4096

    private(set) var entries: [Key: Entry] = [:]

    /// No entry has an expiry, refresh point or failure deadline before this: lowered by every
    /// change, made exact by every `advance`. Cycles with nothing due cost no walk of the cache
    /// (every process on a LAN handles every multicast packet; a walk per packet per process
    /// adds up to the whole CPU when a few dozen sessions share a host).
    private var horizon = NIODeadline.distantFuture

    /// Stores an entry and lowers the horizon to its earliest deadline.
    private mutating func store(_ entry: Entry, at key: Key) {
        self.entries[key] = entry
        self.horizon = min(self.horizon, entry.earliestDeadline)
    }

    struct NameAndType: Hashable, Sendable {
        var name: DNSName
        var type: DNSRecordType
    }

    /// The keys of each name and type: lookups by name stay cheap when the cache is full.
    private var index: [NameAndType: Set<Key>] = [:]

    /// What a received record changed. A repeated goodbye (the same packet on IPv4 and IPv6,
    /// or sent twice) changes nothing.
    enum Change: Equatable { case added, refreshed, goodbye, ignored }

    /// Adds or refreshes `record` heard on `interfaceIndex` at `now`.
    @discardableResult
    mutating func insert(_ record: DNSResourceRecord, interfaceIndex: Int, now: NIODeadline, random: inout MachineRandom) -> Change {
        var stored = record
        stored.cacheFlush = false
        let key = Key(interfaceIndex: interfaceIndex, name: record.name, data: record.data)
        if record.ttl == 0 {
            guard var entry = self.entries[key] else { return .ignored }
            let repeated = entry.isGoodbye
            entry.isGoodbye = true
            entry.expires = min(entry.expires, now + Self.lingering)
            entry.refreshPoints = []
            self.store(entry, at: key)
            return repeated ? .ignored : .goodbye
        }
        // A goodbye's lingering second: a copy sent before it, read after it, brings nothing back
        // (seen: a goodbye read on the IPv4 socket, then an answer sent just before it on the
        // IPv6 socket, then the IPv6 goodbye, and the peer was lost, found and lost again).
        // The same for a record a newer one flushed (seen: a TXT update, then the old TXT's copy
        // from the other family's socket, read after it, and the browser reported the old one).
        if let entry = self.entries[key], entry.isGoodbye || entry.isFlushed, entry.expires > now { return .ignored }
        if record.cacheFlush {
            // §10.2: other records of this name and type from more than a second ago go too.
            for otherKey in self.index[NameAndType(name: record.name, type: record.type)] ?? [] {
                guard var other = self.entries[otherKey], otherKey != key, otherKey.interfaceIndex == interfaceIndex,
                    other.received + Self.lingering <= now, other.expires > now + Self.lingering
                else { continue }
                other.expires = now + Self.lingering
                other.refreshPoints = []
                other.isFlushed = true
                self.store(other, at: otherKey)
            }
        }
        let existed = self.entries[key].map { !$0.isGoodbye } ?? false
        guard existed || self.entries[key] != nil || self.entries.count < Self.capacity else { return .ignored }
        let ttl = TimeAmount.seconds(Int64(record.ttl))
        let points = [0.80, 0.85, 0.90, 0.95].map { fraction -> NIODeadline in
            let jittered = fraction + random.fraction() * 0.02
            return now + .nanoseconds(Int64(Double(ttl.nanoseconds) * jittered))
        }
        let firstReceived = self.entries[key].flatMap { $0.isGoodbye || $0.isFlushed ? nil : $0.firstReceived } ?? now
        self.store(
            Entry(record: stored, interfaceIndex: interfaceIndex, received: now, firstReceived: firstReceived, expires: now + ttl, isGoodbye: false, refreshPoints: points),
            at: key)
        self.index[NameAndType(name: record.name, type: record.type), default: []].insert(key)
        return existed ? .refreshed : .added
    }

    /// Drops everything learned on an interface that went away (§10.3).
    mutating func removeInterface(_ index: Int) {
        for (key, entry) in self.entries where key.interfaceIndex == index {
            self.remove(key, type: entry.record.type)
        }
    }

    private mutating func remove(_ key: Key, type: DNSRecordType) {
        self.entries[key] = nil
        let indexKey = NameAndType(name: key.name, type: type)
        self.index[indexKey]?.remove(key)
        if self.index[indexKey]?.isEmpty ?? false { self.index[indexKey] = nil }
    }

    /// Live (not goodbye, not expired) records of `name` and `type`, on every interface.
    func live(name: DNSName, type: DNSRecordType, now: NIODeadline) -> [Entry] {
        (self.index[NameAndType(name: name, type: type)] ?? []).compactMap { self.entries[$0] }
            .filter { !$0.isGoodbye && $0.expires > now }
    }

    /// The hosts the cached SRV records name.
    var srvTargets: Set<DNSName> {
        var targets: Set<DNSName> = []
        for (key, keys) in self.index where key.type == .srv {
            for entryKey in keys {
                if case .srv(_, _, _, let target) = entryKey.data { targets.insert(target) }
            }
        }
        return targets
    }

    /// Whether any record (live or not) of `name` and `type` is cached.
    func contains(name: DNSName, type: DNSRecordType) -> Bool {
        self.index[NameAndType(name: name, type: type)] != nil
    }

    /// Live records answering `question` on an interface with more than half their TTL left:
    /// the known answers to list in a query (§7.1).
    func knownAnswers(for question: DNSQuestion, interfaceIndex: Int, now: NIODeadline) -> [DNSResourceRecord] {
        self.entries.values.compactMap { entry in
            guard entry.interfaceIndex == interfaceIndex, !entry.isGoodbye, question.isAnswered(by: entry.record) else { return nil }
            let remaining = entry.remainingTTL(now: now)
            guard remaining > entry.record.ttl / 2 else { return nil }
            var record = entry.record
            record.ttl = remaining
            return record
        }
    }

    /// When `advance` next has something to do: no earlier than the earliest expiry, refresh
    /// point or failure deadline (perhaps earlier, for a refresh point of an entry nobody is
    /// interested in; that cycle only drops it).
    var nextDeadline: NIODeadline? {
        self.entries.isEmpty ? nil : self.horizon
    }

    /// Everything due by `now`, in one walk and only when something may be due: records whose
    /// failure deadline passed are flushed (asked for at least twice without an answer, §10.4,
    /// §10.5), expired entries removed, and the passed refresh points of interesting entries
    /// become the questions to ask, per interface.
    mutating func handleTimeout(now: NIODeadline, interesting: (Entry) -> Bool) -> (expired: [Entry], refreshes: [(interfaceIndex: Int, question: DNSQuestion)]) {
        guard now >= self.horizon else { return ([], []) }
        var expired: [Entry] = []
        var due: [(Int, DNSQuestion)] = []
        var horizon = NIODeadline.distantFuture
        for (key, var entry) in self.entries {
            if let failure = entry.failureDeadline, failure <= now { entry.expires = now }
            if entry.expires <= now {
                expired.append(entry)
                self.remove(key, type: entry.record.type)
                continue
            }
            if let first = entry.refreshPoints.first, first <= now {
                while let first = entry.refreshPoints.first, first <= now { entry.refreshPoints.removeFirst() }
                self.entries[key] = entry
                if interesting(entry) {
                    let question = DNSQuestion(name: entry.record.name, type: entry.record.type)
                    if !due.contains(where: { $0.0 == key.interfaceIndex && $0.1 == question }) { due.append((key.interfaceIndex, question)) }
                }
            }
            horizon = min(horizon, entry.earliestDeadline)
        }
        self.horizon = horizon
        return (expired, due)
    }

    /// Notes a query sent or seen on an interface: live records it asks for but does not list
    /// as known answers count it as unanswered until they are heard again (§10.4, §10.5).
    ///
    /// Only questions whose answer we would see count: QM questions (a QU answer may go by
    /// unicast to the asker), in queries without TC (their known answers continue elsewhere) and
    /// without an authority section (probes).
    mutating func observeQuery(_ message: DNSMessage, interfaceIndex: Int, now: NIODeadline, interesting: (Entry) -> Bool) {
        guard !message.isTruncated, message.authorities.isEmpty else { return }
        for (key, var entry) in self.entries where key.interfaceIndex == interfaceIndex && !entry.isGoodbye && interesting(entry) {
            guard message.questions.contains(where: { !$0.unicastResponse && $0.isAnswered(by: entry.record) }),
                !message.answers.contains(where: { $0.isSameRecord(as: entry.record) })
            else { continue }
            entry.unansweredQueries.append(now)
            if entry.unansweredQueries.count > 8 { entry.unansweredQueries.removeFirst() }
            self.store(entry, at: key)
        }
    }

    /// Reconfirmation (§10.4): the application found the data of `name`'s records wrong. They
    /// count as asked for twice, unanswered, from now, so they are flushed in ten seconds unless
    /// heard again (the caller sends the queries).
    mutating func markUnanswered(name: DNSName, now: NIODeadline) {
        for (key, var entry) in self.entries where key.name == name && !entry.isGoodbye {
            entry.unansweredQueries += [now, now]
            self.store(entry, at: key)
        }
    }
}
