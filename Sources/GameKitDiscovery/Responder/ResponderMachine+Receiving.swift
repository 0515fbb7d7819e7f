import NIOCore

extension ResponderMachine {
    /// Delay before multicasting an answer that includes shared records (RFC 6762 §6).
    static let sharedAnswerDelay: ClosedRange<Int64> = 20...120
    /// Delay when the query's known answers continue in further packets (TC bit, §7.2).
    static let truncatedQueryDelay: ClosedRange<Int64> = 400...500
    /// A record is not multicast again on an interface within this time (§6)…
    static let multicastRateLimit = TimeAmount.seconds(1)
    /// …except to defend a name against a probe (§6).
    static let probeDefenseRateLimit = TimeAmount.milliseconds(250)

    /// Handles a received message: conflicts and tie-breaks for the names being claimed,
    /// answers to queries, and duplicate-answer suppression for answers not yet sent.
    mutating func receive(_ incoming: IncomingMessage, now: NIODeadline) {
        let message = incoming.message
        // RFC 6762 §18.3 and §18.11: other opcodes and non-zero response codes are ignored.
        guard message.opcode == 0, message.responseCode == 0 else { return }
        guard self.interfaces[incoming.interfaceIndex] != nil else { return }
        if message.isResponse {
            // §6: responses from a source port other than 5353 are silently ignored.
            guard incoming.isFromMulticastDNSPort else { return }
            self.detectConflicts(in: message.answers + message.additionals, now: now)
            self.suppressDuplicateAnswers(message.answers, on: incoming.interfaceIndex)
        } else {
            self.resolveSimultaneousProbes(message, interfaceIndex: incoming.interfaceIndex, now: now)
            self.answer(incoming, now: now)
        }
    }

    // MARK: - Conflicts (RFC 6762 §8.1, §8.2, §9)

    /// Every record this responder could send on any interface, for telling our own records
    /// (looped back, or identical ones from elsewhere) from conflicting ones.
    private func ownRecords(forName name: DNSName) -> [DNSResourceRecord] {
        var records: [DNSResourceRecord] = []
        for interface in self.interfaces.values {
            if name == self.host?.name { records += self.hostRecords(on: interface) }
            for service in self.services.values where service.instanceName == name {
                records += self.serviceRecords(service, on: interface)
            }
        }
        return records
    }

    /// Whether every record is one we hold for `name` on some interface.
    private func isOwn(_ records: [DNSResourceRecord], name: DNSName) -> Bool {
        let own = self.ownRecords(forName: name)
        return records.allSatisfy { record in own.contains { $0.isSameRecord(as: record) } }
    }

    /// A response carrying a record for one of our unique names with data we do not have is a
    /// conflict: while probing, rename and probe again; once established, probe again (§9).
    private mutating func detectConflicts(in records: [DNSResourceRecord], now: NIODeadline) {
        for record in records where record.ttl > 0 {
            if let host = self.host, record.name == host.name, record.type == .a || record.type == .aaaa {
                guard !self.ownRecords(forName: host.name).contains(where: { $0.isSameRecord(as: record) }) else { continue }
                if host.isProbing {
                    self.renameHost(now: now)
                } else if record.cacheFlush {
                    var claim = host
                    claim.reprobe(now: now)
                    self.setHostClaim(claim)
                }
            }
            for (id, service) in self.services where service.instanceName == record.name && (record.type == .srv || record.type == .txt) {
                guard !self.ownRecords(forName: service.instanceName).contains(where: { $0.isSameRecord(as: record) }) else { continue }
                // One of our own former TXTs, sent before an update and heard after it (late
                // however busy this process is), is no conflict. Another host claiming the
                // name still conflicts through its SRV record.
                if case .txt(let strings) = record.data, service.formerTXTs.contains(strings) { continue }
                if service.claim.isProbing {
                    self.renameService(id, now: now)
                } else if record.cacheFlush {
                    var claim = service.claim
                    claim.reprobe(now: now)
                    self.setServiceClaim(id, claim)
                }
            }
        }
    }

    /// Simultaneous probe tie-breaking (§8.2): another host probes a name we are probing. Both
    /// sides compare their proposed records for that name, sorted, as (class, type, rdata)
    /// byte strings; the lexicographically later set wins, the loser waits one second and probes
    /// again. Identical sets (our own probe looped back) are no conflict.
    private mutating func resolveSimultaneousProbes(_ message: DNSMessage, interfaceIndex: Int, now: NIODeadline) {
        guard !message.authorities.isEmpty, let interface = self.interfaces[interfaceIndex] else { return }
        if var host = self.host, host.isProbing, message.questions.contains(where: { $0.name == host.name }) {
            let theirs = message.authorities.filter { $0.name == host.name }
            // Our own probe, heard on another interface of this host, carries that interface's
            // addresses: records we hold ourselves are no contender.
            if !theirs.isEmpty, !self.isOwn(theirs, name: host.name), ProbeTieBreak.compare(ours: self.hostRecords(on: interface).filter { $0.type != .nsec }, theirs: theirs) == .theirsWins {
                host.deferToWinner(now: now)
                self.setHostClaim(host)
            }
        }
        for (id, service) in self.services where service.claim.isProbing {
            guard message.questions.contains(where: { $0.name == service.instanceName }) else { continue }
            let theirs = message.authorities.filter { $0.name == service.instanceName }
            guard !theirs.isEmpty, !self.isOwn(theirs, name: service.instanceName) else { continue }
            if ProbeTieBreak.compare(ours: self.uniqueServiceRecords(service, on: interface), theirs: theirs) == .theirsWins {
                var claim = service.claim
                claim.deferToWinner(now: now)
                self.setServiceClaim(id, claim)
            }
        }
    }

    // MARK: - Answering (RFC 6762 §6, §7)

    /// Every record of established names on `interface`, as they would be sent now.
    private func currentRecords(on interface: NetworkInterface) -> [DNSResourceRecord] {
        var records: [DNSResourceRecord] = []
        if self.host?.isEstablished == true { records += self.hostRecords(on: interface) }
        for service in self.services.values where service.claim.isEstablished {
            records += self.serviceRecords(service, on: interface)
        }
        return records
    }

    /// The records that answer `question` on `interface` from names we have established.
    private func answers(to question: DNSQuestion, on interface: NetworkInterface) -> [DNSResourceRecord] {
        var found: [DNSResourceRecord] = []
        if let host = self.host, host.isEstablished, question.name == host.name {
            let records = self.hostRecords(on: interface)
            let matching = records.filter { question.isAnswered(by: $0) }
            // A unique name asked for a type it does not have gets the NSEC (§6.1).
            found += matching.isEmpty ? records.filter { $0.type == .nsec } : matching
        }
        for service in self.services.values where service.claim.isEstablished {
            let records = self.serviceRecords(service, on: interface)
            if question.name == service.instanceName {
                let matching = records.filter { $0.name == service.instanceName && question.isAnswered(by: $0) }
                found += matching.isEmpty ? records.filter { $0.type == .nsec } : matching
            } else {
                found += records.filter { question.isAnswered(by: $0) && !found.contains($0) }
            }
        }
        return found
    }

    /// The additional records for `answers` (RFC 6763 §12): a PTR brings the instance's SRV, TXT
    /// and the host's addresses; an SRV brings the addresses.
    private func additionals(for answers: [DNSResourceRecord], on interface: NetworkInterface) -> [DNSResourceRecord] {
        var extra: [DNSResourceRecord] = []
        func add(_ records: [DNSResourceRecord]) {
            for record in records where !answers.contains(where: { $0.isSameRecord(as: record) }) && !extra.contains(where: { $0.isSameRecord(as: record) }) {
                extra.append(record)
            }
        }
        for answer in answers {
            switch answer.data {
            case .ptr(let target):
                for service in self.services.values where service.instanceName == target && service.claim.isEstablished {
                    add(self.serviceRecords(service, on: interface).filter { $0.name == target })
                    if self.host?.isEstablished == true { add(self.hostRecords(on: interface)) }
                }
            case .srv:
                if self.host?.isEstablished == true { add(self.hostRecords(on: interface)) }
            default:
                break
            }
        }
        return extra
    }

    private mutating func answer(_ incoming: IncomingMessage, now: NIODeadline) {
        let message = incoming.message
        guard let interface = self.interfaces[incoming.interfaceIndex] else { return }
        guard !message.questions.isEmpty else {
            self.applyContinuedKnownAnswers(incoming)
            return
        }
        let isProbe = !message.authorities.isEmpty
        var multicastAnswers: [DNSResourceRecord] = []
        var unicastAnswers: [DNSResourceRecord] = []
        for question in message.questions {
            for record in self.answers(to: question, on: interface) {
                // Known-answer suppression (§7.1): the querier already holds this record with at
                // least half its TTL left.
                if message.answers.contains(where: { $0.isSameRecord(as: record) && $0.ttl >= record.ttl / 2 }) { continue }
                let wantsUnicast = question.unicastResponse || !incoming.isFromMulticastDNSPort
                if wantsUnicast && (!incoming.isFromMulticastDNSPort || self.wasRecentlyMulticast(record, on: interface.index, within: record.ttl, now: now)) {
                    if !unicastAnswers.contains(record) { unicastAnswers.append(record) }
                } else if !multicastAnswers.contains(record) {
                    multicastAnswers.append(record)
                }
            }
        }

        if !unicastAnswers.isEmpty, self.takeUnicastToken(on: interface.index, now: now) {
            self.sendUnicast(unicastAnswers, to: incoming, interface: interface)
        }
        guard !multicastAnswers.isEmpty else { return }
        let additionals = self.additionals(for: multicastAnswers, on: interface)
        let allUnique = multicastAnswers.allSatisfy(\.cacheFlush)
        let delay: TimeAmount
        if message.isTruncated {
            delay = self.random.milliseconds(Self.truncatedQueryDelay)
        } else if allUnique || isProbe {
            delay = .zero  // unique answers go at once (§6)
        } else {
            delay = self.random.milliseconds(Self.sharedAnswerDelay)
        }
        var pending = self.pendingResponses[interface.index] ?? PendingResponse(due: now + delay, answers: [], additionals: [], isProbeDefense: false)
        pending.due = min(pending.due, now + delay)
        pending.isProbeDefense = pending.isProbeDefense || isProbe
        if message.isTruncated, !pending.truncatedQueriers.contains(incoming.source) { pending.truncatedQueriers.append(incoming.source) }
        for record in multicastAnswers where !pending.answers.contains(where: { $0.isSameRecord(as: record) }) {
            pending.answers.append(record)
        }
        for record in additionals where !pending.additionals.contains(where: { $0.isSameRecord(as: record) }) {
            pending.additionals.append(record)
        }
        self.pendingResponses[interface.index] = pending
        self.flushDueResponses(now: now)
    }

    /// Whether `record` was multicast on the interface within a quarter of `ttl` seconds: then
    /// a QU question may be answered by unicast alone (§5.4).
    private func wasRecentlyMulticast(_ record: DNSResourceRecord, on interfaceIndex: Int, within ttl: UInt32, now: NIODeadline) -> Bool {
        guard let last = self.lastMulticast[RecordKey(interfaceIndex: interfaceIndex, name: record.name, data: record.data)] else { return false }
        return now - last < .seconds(Int64(ttl) / 4)
    }

    /// Takes one unicast reply from the interface's budget; false when it is spent (the querier
    /// asks again, or hears the multicast answers others trigger).
    private mutating func takeUnicastToken(on interfaceIndex: Int, now: NIODeadline) -> Bool {
        var budget = self.unicastBudget[interfaceIndex] ?? (Self.unicastReplyBurst, now)
        let elapsed = Double((now - budget.updated).nanoseconds) / 1e9
        budget.tokens = min(Self.unicastReplyBurst, budget.tokens + max(0, elapsed) * Self.unicastRepliesPerSecond)
        budget.updated = now
        let allowed = budget.tokens >= 1
        if allowed { budget.tokens -= 1 }
        self.unicastBudget[interfaceIndex] = budget
        return allowed
    }

    /// A unicast reply. To a legacy querier (source port not 5353) it is a conventional DNS
    /// reply: the query's ID and questions, TTLs at most 10 s, no cache-flush bits (§6.7).
    private mutating func sendUnicast(_ answers: [DNSResourceRecord], to incoming: IncomingMessage, interface: NetworkInterface) {
        var answers = answers
        var additionals = self.additionals(for: answers, on: interface)
        var id: UInt16 = 0
        var questions: [DNSQuestion] = []
        if !incoming.isFromMulticastDNSPort {
            id = incoming.message.id
            questions = incoming.message.questions
            func legacy(_ record: DNSResourceRecord) -> DNSResourceRecord {
                var copy = record
                copy.cacheFlush = false
                copy.ttl = min(copy.ttl, RecordTTL.legacyUnicastMaximum)
                return copy
            }
            answers = answers.map(legacy)
            additionals = additionals.map(legacy)
        }
        for message in MessagePacker.responses(id: id, questions: questions, answers: answers, additionals: additionals) {
            self.outgoing.append(OutgoingMessage(message: message, interfaceIndex: interface.index, destination: .unicast(incoming.source)))
        }
    }

    /// A continuation of a truncated query (§7.2): a packet without questions whose answers are
    /// more of the querier's known answers. They suppress answers still pending for it.
    private mutating func applyContinuedKnownAnswers(_ incoming: IncomingMessage) {
        guard var pending = self.pendingResponses[incoming.interfaceIndex], pending.truncatedQueriers.contains(incoming.source) else { return }
        let known = incoming.message.answers
        pending.answers.removeAll { ours in known.contains { $0.isSameRecord(as: ours) && $0.ttl >= ours.ttl / 2 } }
        self.pendingResponses[incoming.interfaceIndex] = pending.answers.isEmpty ? nil : pending
    }

    /// Duplicate-answer suppression (§7.4): another responder just multicast a record we were
    /// about to send, with at least half our TTL, so ours is dropped.
    private mutating func suppressDuplicateAnswers(_ answers: [DNSResourceRecord], on interfaceIndex: Int) {
        guard var pending = self.pendingResponses[interfaceIndex], !pending.isProbeDefense else { return }
        pending.answers.removeAll { ours in answers.contains { $0.isSameRecord(as: ours) && $0.ttl >= ours.ttl / 2 } }
        self.pendingResponses[interfaceIndex] = pending.answers.isEmpty ? nil : pending
    }

    /// Multicasts the pending answers that are due, leaving out records multicast on that
    /// interface less than a second ago (250 ms when defending a name against a probe).
    mutating func flushDueResponses(now: NIODeadline) {
        for (index, pending) in self.pendingResponses where pending.due <= now {
            self.pendingResponses[index] = nil
            let limit = pending.isProbeDefense ? Self.probeDefenseRateLimit : Self.multicastRateLimit
            // Records withdrawn, replaced or renamed since the answer was queued are not sent.
            guard let interface = self.interfaces[index] else { continue }
            let current = self.currentRecords(on: interface)
            let isCurrent = { (record: DNSResourceRecord) in current.contains { $0.isSameRecord(as: record) } }
            var answers: [DNSResourceRecord] = []
            var deferred: [DNSResourceRecord] = []
            var resume: NIODeadline?
            for record in pending.answers where isCurrent(record) {
                if let last = self.lastMulticast[RecordKey(interfaceIndex: index, name: record.name, data: record.data)], now - last < limit {
                    // Multicast less than the limit ago: it goes when the limit allows, not now.
                    deferred.append(record)
                    resume = min(resume ?? last + limit, last + limit)
                } else {
                    answers.append(record)
                }
            }
            self.sendMulticast(answers: answers, additionals: pending.additionals.filter(isCurrent), on: index, now: now, countsForRateLimit: true)
            if let resume, !deferred.isEmpty {
                self.pendingResponses[index] = PendingResponse(due: resume, answers: deferred, additionals: self.additionals(for: deferred, on: interface), isProbeDefense: pending.isProbeDefense)
            }
        }
    }
}
