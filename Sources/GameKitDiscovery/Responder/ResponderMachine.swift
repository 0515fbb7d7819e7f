@_spi(Machine) import GameKitMachine
import NIOCore

/// The multicast DNS responder, without I/O: registered services, their claims on unique names,
/// answers to queries, and announcements (RFC 6762 §6–§10, RFC 6763).
///
/// Feed it received messages and the time; take the messages it wants sent, its events, and the
/// time it next needs to run. The host name (`<host>.local`) is claimed alongside the first
/// service and carries the A/AAAA records of each interface's addresses.
struct ResponderMachine: Sendable {
    struct Service: Sendable {
        var description: ServiceDescription
        /// The instance label the service was registered with; renames append " (n)".
        var baseInstanceName: String
        var renameCount = 1
        var claim: UniqueNameClaim
        var reportedRegistered = false
        /// The TXT records this service had before its latest updates, newest last (at most
        /// `formerTXTLimit`): copies of them still in flight, or delayed in a busy receiver,
        /// are our own and no conflict.
        var formerTXTs: [[[UInt8]]] = []
        /// Services wait for the host name to be established before announcing.
        var instanceName: DNSName { self.claim.name }
    }

    private(set) var services: [ServiceID: Service] = [:]
    /// How many former TXT records of a service are remembered as our own.
    static let formerTXTLimit = 8
    private var nextServiceID: UInt64 = 1
    private(set) var host: UniqueNameClaim?
    private let baseHostLabel: String
    private var hostRenameCount = 1
    private(set) var interfaces: [Int: NetworkInterface] = [:]
    var random: MachineRandom

    /// When each record was last multicast on each interface (RFC 6762 §6: at most once a second).
    var lastMulticast: [RecordKey: NIODeadline] = [:]
    /// Delayed multicast answers per interface, aggregated until they are due.
    var pendingResponses: [Int: PendingResponse] = [:]
    /// Unicast replies allowed per interface (a token bucket): a reply is larger than the query
    /// that asks for it, so a flood of queries with forged sources must not turn this host into
    /// an amplifier.
    var unicastBudget: [Int: (tokens: Double, updated: NIODeadline)] = [:]
    static let unicastRepliesPerSecond = 20.0
    static let unicastReplyBurst = 20.0

    var outgoing: [OutgoingMessage] = []
    var events: [ResponderEvent] = []

    struct RecordKey: Hashable, Sendable {
        var interfaceIndex: Int
        var name: DNSName
        var data: DNSRecordData
    }

    struct PendingResponse: Sendable {
        var due: NIODeadline
        var answers: [DNSResourceRecord]
        var additionals: [DNSResourceRecord]
        var isProbeDefense: Bool
        /// Queriers whose truncated queries (TC) this response waits for: the known answers in
        /// their continuation packets still suppress answers (RFC 6762 §7.2).
        var truncatedQueriers: [SocketAddress] = []
    }

    /// Whether a first probe may ask for unicast replies (QU, RFC 6762 §8.1): not while another
    /// mDNS stack shares the port on this host (§15.1), whose socket might get the reply.
    var mayAskForUnicast = true

    /// Whether a name is waiting or probing: only then does ``mayAskForUnicast`` matter.
    var hasUnestablishedClaims: Bool {
        self.host?.isProbing == true || self.services.values.contains { $0.claim.isProbing }
    }

    /// - Parameter hostLabel: the first label of the host name, e.g. `alice-pc-3f2a`.
    init(hostLabel: String, random: MachineRandom) {
        self.baseHostLabel = hostLabel
        self.random = random
    }

    // MARK: - Application

    /// Starts probing for `description`'s instance name.
    ///
    /// - Throws: `DNSNameError` when the instance name does not fit a label.
    mutating func register(_ description: ServiceDescription, now: NIODeadline) throws(DNSNameError) -> ServiceID {
        let name = try DNSName(instance: description.instanceName, in: description.serviceType.domainName)
        let id = ServiceID(rawValue: self.nextServiceID)
        self.nextServiceID += 1
        // RFC 6762 §8.1: wait 0–250 ms before the first probe, so hosts starting together spread.
        let start = now + self.random.milliseconds(0...250)
        if self.host == nil {
            self.host = UniqueNameClaim(name: self.hostName(renameCount: 1), startAt: start)
        }
        self.services[id] = Service(description: description, baseInstanceName: description.instanceName, claim: UniqueNameClaim(name: name, startAt: start))
        return id
    }

    /// Replaces a service's TXT record and announces the new one.
    mutating func updateTXT(_ id: ServiceID, _ txt: TXTRecord, now: NIODeadline) {
        guard var service = self.services[id] else { return }
        service.formerTXTs.removeAll { $0 == service.description.txt.strings }
        service.formerTXTs.append(service.description.txt.strings)
        if service.formerTXTs.count > Self.formerTXTLimit { service.formerTXTs.removeFirst() }
        service.description.txt = txt
        service.claim.reannounce(now: now)
        self.services[id] = service
    }

    /// Withdraws a service: goodbye packets (TTL 0) on every interface if it was announced,
    /// with the host's address records in the same packet when it was the last service.
    mutating func unregister(_ id: ServiceID, now: NIODeadline) {
        guard let service = self.services.removeValue(forKey: id) else { return }
        let lastService = self.services.isEmpty
        // Answers queued for it must not follow its goodbye (they are re-checked when sent, too).
        for (index, var pending) in self.pendingResponses {
            pending.answers.removeAll { $0.name == service.instanceName || $0.data == .ptr(service.instanceName) }
            self.pendingResponses[index] = pending.answers.isEmpty ? nil : pending
        }
        for interface in self.interfaces.values.sorted(by: { $0.index < $1.index }) {
            var records: [DNSResourceRecord] = []
            if service.claim.isEstablished {
                // The type's enumeration PTR stays while another service of the type remains.
                let typeRemains = self.services.values.contains { $0.description.serviceType == service.description.serviceType }
                records += self.serviceRecords(service, on: interface).filter { !(typeRemains && $0.name == WellKnownName.serviceTypeEnumeration) }
            }
            if lastService, let host = self.host, host.isEstablished { records += self.hostRecords(on: interface) }
            let goodbyes = records.map { record -> DNSResourceRecord in
                var goodbye = record
                goodbye.ttl = 0
                return goodbye
            }
            self.sendMulticast(answers: goodbyes, additionals: [], on: interface.index, now: now, countsForRateLimit: false)
        }
        if lastService {
            self.host = nil
            self.hostRenameCount = 1
        }
    }

    /// Withdraws every service.
    mutating func unregisterAll(now: NIODeadline) {
        for id in self.services.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            self.unregister(id, now: now)
        }
    }

    /// The interfaces to answer and announce on, with their addresses. New interfaces and
    /// changed addresses are announced; addresses that went away get goodbyes.
    mutating func setInterfaces(_ interfaces: [NetworkInterface], now: NIODeadline) {
        let old = self.interfaces
        self.interfaces = Dictionary(interfaces.map { ($0.index, $0) }, uniquingKeysWith: { first, _ in first })
        var changed = false
        for interface in interfaces {
            guard let before = old[interface.index] else {
                changed = true
                continue
            }
            if before.addresses != interface.addresses {
                changed = true
                if let host = self.host, host.isEstablished {
                    let gone = Set(before.addresses).subtracting(interface.addresses)
                    let goodbyes = gone.map { $0.record(host: host.name, ttl: 0) }
                    if !goodbyes.isEmpty {
                        self.sendMulticast(answers: goodbyes, additionals: [], on: interface.index, now: now, countsForRateLimit: false)
                    }
                }
            }
        }
        for index in old.keys where self.interfaces[index] == nil {
            self.pendingResponses[index] = nil
            self.lastMulticast = self.lastMulticast.filter { $0.key.interfaceIndex != index }
        }
        if changed {
            self.host?.reannounce(now: now)
            for id in self.services.keys { self.services[id]!.claim.reannounce(now: now) }
        }
    }

    /// The service's current full instance name.
    func instanceName(of id: ServiceID) -> DNSName? {
        self.services[id]?.instanceName
    }

    /// The host name being claimed or held.
    var hostName: DNSName? { self.host?.name }

    // MARK: - Time

    /// The earliest time the machine needs ``handleTimeout(now:)`` to run.
    var nextDeadline: NIODeadline? {
        var deadlines: [NIODeadline] = self.services.values.compactMap(\.claim.deadline)
        if let host = self.host?.deadline { deadlines.append(host) }
        deadlines += self.pendingResponses.values.map(\.due)
        return deadlines.min()
    }

    /// Runs everything due by `now`: probes, announcements, delayed answers.
    mutating func handleTimeout(now: NIODeadline) {
        var probeNames: [(claim: DNSName, first: Bool, records: (NetworkInterface) -> [DNSResourceRecord])] = []
        var announce: [(NetworkInterface) -> [DNSResourceRecord]] = []

        if var host = self.host {
            switch host.handleTimeout(now: now) {
            case .probe(let first):
                let name = host.name
                probeNames.append((name, first, { [self] in self.hostRecords(on: $0, name: name).filter { $0.type != .nsec } }))
            case .announce:
                let name = host.name
                announce.append({ [self] in self.hostRecords(on: $0, name: name) })
            case .none: break
            }
            self.host = host
        }
        let hostEstablished = self.host?.isEstablished ?? false
        for id in self.services.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            var service = self.services[id]!
            // A service that finished probing waits for the host name before it announces.
            // Its deadline moves to the host's, so that it is not left in the past.
            if !hostEstablished, let next = service.claim.deadline, next <= now {
                let postponed = max(now, self.host?.deadline ?? now + UniqueNameClaim.probeInterval)
                switch service.claim.state {
                case .probing(let sent, _) where sent == UniqueNameClaim.probeCount:
                    service.claim.state = .probing(sent: sent, next: postponed)
                    self.services[id] = service
                    continue
                case .announcing(let sent, _):
                    service.claim.state = .announcing(sent: sent, next: postponed)
                    self.services[id] = service
                    continue
                default:
                    break
                }
            }
            switch service.claim.handleTimeout(now: now) {
            case .probe(let first):
                let snapshot = service
                probeNames.append((service.instanceName, first, { [self] in self.uniqueServiceRecords(snapshot, on: $0) }))
            case .announce:
                if !service.reportedRegistered {
                    service.reportedRegistered = true
                    self.events.append(.registered(id, name: service.instanceName))
                }
                let snapshot = service
                announce.append({ [self] in self.serviceRecords(snapshot, on: $0) + self.hostRecords(on: $0) })
            case .none: break
            }
            self.services[id] = service
        }

        for interface in self.interfaces.values.sorted(by: { $0.index < $1.index }) {
            if !probeNames.isEmpty {
                let questions = probeNames.map { DNSQuestion(name: $0.claim, type: .any, unicastResponse: $0.first && self.mayAskForUnicast) }
                // The cache-flush bit belongs to responses (RFC 6762 §10.2); probes propose the
                // records without it.
                let authorities = probeNames.flatMap { $0.records(interface) }.map { record -> DNSResourceRecord in
                    var proposed = record
                    proposed.cacheFlush = false
                    return proposed
                }
                for message in MessagePacker.queries(questions: questions, knownAnswers: [], authorities: authorities) {
                    self.outgoing.append(OutgoingMessage(message: message, interfaceIndex: interface.index, destination: .multicast))
                }
            }
            if !announce.isEmpty {
                var records: [DNSResourceRecord] = []
                for producer in announce {
                    for record in producer(interface) where !records.contains(where: { $0.isSameRecord(as: record) }) {
                        records.append(record)
                    }
                }
                self.sendMulticast(answers: records, additionals: [], on: interface.index, now: now, countsForRateLimit: true)
            }
        }
        self.flushDueResponses(now: now)
    }

    /// Takes the messages to send.
    mutating func takeOutgoing() -> [OutgoingMessage] {
        defer { self.outgoing.removeAll() }
        return self.outgoing
    }

    /// Takes the events.
    mutating func takeEvents() -> [ResponderEvent] {
        defer { self.events.removeAll() }
        return self.events
    }

    /// The next event, in order.
    mutating func popEvent() -> ResponderEvent? {
        self.events.isEmpty ? nil : self.events.removeFirst()
    }

    // MARK: - Records

    /// The host name for the n-th attempt: `label.local`, then `label-2.local`, …
    private func hostName(renameCount: Int) -> DNSName {
        let label = renameCount == 1 ? self.baseHostLabel : "\(self.baseHostLabel)-\(renameCount)"
        return DNSName(validatedLabels: [Array(label.utf8.prefix(DNSName.maximumLabelLength))] + WellKnownName.local.labels)
    }

    /// The host's address records on `interface` (the interface's own addresses, plus any the
    /// services name), plus an NSEC saying which address types exist.
    func hostRecords(on interface: NetworkInterface, name: DNSName? = nil) -> [DNSResourceRecord] {
        guard let host = name ?? self.host?.name else { return [] }
        var addresses: [IPAddress] = []
        for address in interface.addresses where !addresses.contains(address) { addresses.append(address) }
        for service in self.services.values {
            for address in service.description.addresses ?? [] where !addresses.contains(address) { addresses.append(address) }
        }
        var records = addresses.map { $0.record(host: host, ttl: RecordTTL.hostNaming) }
        let types = Set(records.map(\.type))
        if !types.isEmpty {
            records.append(DNSResourceRecord(name: host, data: .nsec(next: host, types: types), ttl: RecordTTL.hostNaming, cacheFlush: true))
        }
        return records
    }

    /// A service's unique records: SRV and TXT under the instance name.
    func uniqueServiceRecords(_ service: Service, on interface: NetworkInterface) -> [DNSResourceRecord] {
        guard let host = self.host?.name else { return [] }
        let name = service.instanceName
        return [
            DNSResourceRecord(name: name, data: .srv(priority: 0, weight: 0, port: service.description.port, target: host), ttl: RecordTTL.hostNaming, cacheFlush: true),
            DNSResourceRecord(name: name, data: .txt(service.description.txt.strings), ttl: RecordTTL.other, cacheFlush: true),
        ]
    }

    /// Every record of a service: its shared PTRs (type → instance, and the service type
    /// enumeration), SRV, TXT and an NSEC for the instance name.
    func serviceRecords(_ service: Service, on interface: NetworkInterface) -> [DNSResourceRecord] {
        let name = service.instanceName
        let type = service.description.serviceType.domainName
        return [
            DNSResourceRecord(name: type, data: .ptr(name), ttl: RecordTTL.other),
            DNSResourceRecord(name: WellKnownName.serviceTypeEnumeration, data: .ptr(type), ttl: RecordTTL.other),
        ] + self.uniqueServiceRecords(service, on: interface) + [
            DNSResourceRecord(name: name, data: .nsec(next: name, types: [.srv, .txt]), ttl: RecordTTL.hostNaming, cacheFlush: true)
        ]
    }

    // MARK: - Sending

    /// Multicasts `answers` on one interface now, noting the time for rate limiting.
    mutating func sendMulticast(answers: [DNSResourceRecord], additionals: [DNSResourceRecord], on interfaceIndex: Int, now: NIODeadline, countsForRateLimit: Bool) {
        guard !answers.isEmpty else { return }
        for message in MessagePacker.responses(answers: answers, additionals: additionals) {
            self.outgoing.append(OutgoingMessage(message: message, interfaceIndex: interfaceIndex, destination: .multicast))
        }
        if countsForRateLimit {
            for record in answers {
                self.lastMulticast[RecordKey(interfaceIndex: interfaceIndex, name: record.name, data: record.data)] = now
            }
            // Older entries serve neither the rate limit nor the QU rule (a quarter of the
            // longest TTL): drop them, so replaced records do not accumulate.
            if self.lastMulticast.count > 256 {
                let horizon = TimeAmount.seconds(Int64(RecordTTL.other / 4))
                self.lastMulticast = self.lastMulticast.filter { now - $0.value < horizon }
            }
        }
    }

    // MARK: - Renaming

    mutating func renameService(_ id: ServiceID, now: NIODeadline) {
        guard var service = self.services[id] else { return }
        service.renameCount += 1
        let suffix = " (\(service.renameCount))"
        let base = service.baseInstanceName.utf8Prefix(maximumBytes: DNSName.maximumLabelLength - suffix.utf8.count)
        let type = service.description.serviceType.domainName
        let name = DNSName(validatedLabels: [Array((base + suffix).utf8)] + type.labels)
        service.claim.conflict(renamingTo: name, now: now)
        service.reportedRegistered = false
        self.services[id] = service
        self.events.append(.renamed(id, name: name))
    }

    mutating func renameHost(now: NIODeadline) {
        guard var host = self.host else { return }
        self.hostRenameCount += 1
        host.conflict(renamingTo: self.hostName(renameCount: self.hostRenameCount), now: now)
        self.host = host
        // Their SRV records now name the new host: announce them again once it is established.
        for id in self.services.keys { self.services[id]!.claim.reannounce(now: now) }
    }

    mutating func setHostClaim(_ claim: UniqueNameClaim) { self.host = claim }
    mutating func setServiceClaim(_ id: ServiceID, _ claim: UniqueNameClaim) { self.services[id]?.claim = claim }
}
