@_spi(Machine) import GameKitMachine
import NIOCore

/// ICE connectivity checks for one component (RFC 8445 §6–§8, regular nomination) and consent
/// freshness on the chosen pair (RFC 7675), sans-I/O.
///
/// Local candidates share two bases: the connection's UDP ``Base/socket`` (host and
/// server-reflexive candidates) and the TURN ``Base/relay``. A pair is a base and a remote
/// address; checks go out in pair-priority order one per ``Configuration/pacing``, triggered
/// checks first. The controlling side nominates the best pair that succeeded, after
/// ``Configuration/nominationDelay`` (``Configuration/relayNominationDelay`` when that pair is
/// relayed) or as soon as no better pair can still succeed; both sides
/// select the pair once a check carrying USE-CANDIDATE on it has succeeded.
struct ICEAgent: Sendable {
    enum Role: Sendable, Equatable { case controlling, controlled }

    enum Base: Hashable, Sendable { case socket, relay }

    /// Short-term credentials of both sides (RFC 8445 §7.2.2).
    struct Credentials: Sendable, Equatable {
        var localUfrag: String
        var localPassword: String
        var remoteUfrag: String
        var remotePassword: String
    }

    struct Configuration: Sendable, Equatable {
        /// Ta: the gap between starting two checks.
        var pacing: TimeAmount = .milliseconds(10)
        /// Retransmission of each check.
        var checkTiming = STUNTransaction.Timing(initialInterval: .milliseconds(100), sends: 5)
        /// How long the controlling side waits after the first success for a better pair.
        var nominationDelay: TimeAmount = .milliseconds(60)
        /// The same when the best pair so far is relayed: long enough for a direct pair whose
        /// first check was dropped by a NAT (hole punching) to succeed on its retransmission.
        var relayNominationDelay: TimeAmount = .milliseconds(500)
        /// Consent checks on the selected pair (RFC 7675: 5 s, randomized ±20 %).
        var consentInterval: TimeAmount = .seconds(5)
        /// Consent expires this long after the last answered check (RFC 7675: 30 s).
        var consentTimeout: TimeAmount = .seconds(30)
        /// Only pairs through the relay (a "relay" transport policy).
        var relayOnly = false
        /// At most this many pairs are checked.
        var maximumPairs = 64
    }

    enum State: Equatable, Sendable {
        case checking
        case selected(base: Base, remote: TraversalAddress)
        /// The selected pair stopped answering consent checks.
        case consentLost
    }

    /// A datagram to send: from which base, to which address.
    struct Output: Equatable, Sendable {
        var base: Base
        var to: TraversalAddress
        var bytes: [UInt8]
    }

    struct Pair: Sendable {
        enum State: Sendable, Equatable { case waiting, inProgress, succeeded, failed }
        let base: Base
        let remote: TraversalAddress
        let remoteKind: ICECandidate.Kind
        let priority: UInt64
        var state = State.waiting
        var transaction: STUNTransaction?
        /// The running check carries USE-CANDIDATE (controlling side).
        var nominating = false
        /// The peer sent USE-CANDIDATE on this pair (controlled side).
        var nominated = false
        /// The peer checked this pair while this side's check was in progress: if that check
        /// goes unanswered, it is triggered again instead of failing.
        var checkAgainIfUnanswered = false
    }

    let role: Role
    let tieBreaker: UInt64
    let credentials: Credentials
    let configuration: Configuration
    /// Local candidate priority of each base (for pair priorities and the PRIORITY attribute).
    private var basePriority: [Base: UInt32]
    private let socketAcceptsIPv6: Bool
    private var relayAddress: TraversalAddress?

    private(set) var state = State.checking
    private(set) var pairs: [Pair] = []
    private var triggered: [Int] = []
    private var nextCheck: NIODeadline
    private var firstSuccess: NIODeadline?
    private var outbox: [Output] = []
    /// Consent on the selected pair.
    private(set) var consent: ConsentFreshness?
    /// Checks refused for bad credentials or integrity.
    private(set) var rejectedChecks = 0
    /// Where the controlling peer's nominating checks came from on the socket (controlled side):
    /// the addresses its other datagrams come from once it selects the pair, which may be before
    /// this side's own check of that pair succeeds. At most ``maximumNominatingSources``.
    private(set) var nominatingSources: [TraversalAddress] = []
    static let maximumNominatingSources = 8
    /// Transaction IDs, the tie-breaker and consent jitter come from here.
    private var random: MachineRandom

    init(role: Role, credentials: Credentials, configuration: Configuration = .init(),
         socketAcceptsIPv6: Bool, now: NIODeadline, random: MachineRandom = .system(), tieBreaker: UInt64? = nil)
    {
        var random = random
        self.role = role
        self.tieBreaker = tieBreaker ?? random.next()
        self.random = random
        self.credentials = credentials
        self.configuration = configuration
        self.socketAcceptsIPv6 = socketAcceptsIPv6
        self.basePriority = [.socket: ICECandidate.priority(.host, localPreference: 65535)]
        self.nextCheck = now
    }

    /// Whether a response with this transaction ID answers a consent check that still counts.
    func isConsentAnswer(_ transactionID: [UInt8]) -> Bool {
        self.consent?.isAnswer(to: transactionID) ?? false
    }

    var selectedPair: Pair? {
        guard case .selected(let base, let remote) = self.state else { return nil }
        return self.pairs.first { $0.base == base && $0.remote == remote }
    }

    // MARK: - Candidates

    /// Makes the relay a base for checks (once the TURN allocation exists).
    mutating func addRelay(_ relayed: TraversalAddress, remoteCandidates: [ICECandidate]) {
        self.relayAddress = relayed
        self.basePriority[.relay] = ICECandidate.priority(.relayed, localPreference: 65535)
        self.addRemote(remoteCandidates)
    }

    /// Pairs the remote candidates with every usable base.
    mutating func addRemote(_ candidates: [ICECandidate]) {
        for candidate in candidates {
            if !self.configuration.relayOnly, candidate.address.isIPv4 || self.socketAcceptsIPv6 {
                self.addPair(.socket, candidate.address, kind: candidate.kind, remotePriority: candidate.priority)
            }
            if let relay = self.relayAddress, relay.isIPv4 == candidate.address.isIPv4 {
                self.addPair(.relay, candidate.address, kind: candidate.kind, remotePriority: candidate.priority)
            }
        }
    }

    @discardableResult
    private mutating func addPair(_ base: Base, _ remote: TraversalAddress, kind: ICECandidate.Kind, remotePriority: UInt32) -> Int? {
        if let index = self.pairs.firstIndex(where: { $0.base == base && $0.remote == remote }) { return index }
        guard self.pairs.count < self.configuration.maximumPairs, let local = self.basePriority[base] else { return nil }
        let (g, d) = self.role == .controlling ? (UInt64(local), UInt64(remotePriority)) : (UInt64(remotePriority), UInt64(local))
        let priority = (min(g, d) << 32) + 2 * max(g, d) + (g > d ? 1 : 0)
        let pair = Pair(base: base, remote: remote, remoteKind: kind, priority: priority)
        let index = self.pairs.firstIndex { $0.priority < priority } ?? self.pairs.count
        self.pairs.insert(pair, at: index)
        self.triggered = self.triggered.map { $0 >= index ? $0 + 1 : $0 }
        return index
    }

    // MARK: - Checks

    private mutating func checkRequest(for pair: Pair, nominate: Bool) -> (STUNMessage, [UInt8]) {
        var attributes: [STUNAttribute] = [
            .text(.username, "\(self.credentials.remoteUfrag):\(self.credentials.localUfrag)"),
            .uint32(.priority, pair.base == .relay ? self.basePriority[.relay]! : ICECandidate.priority(.peerReflexive, localPreference: 65535)),
            .uint64(self.role == .controlling ? .iceControlling : .iceControlled, self.tieBreaker),
        ]
        if nominate { attributes.append(STUNAttribute(.useCandidate)) }
        let message = STUNMessage(.binding, .request, transactionID: STUNMessage.randomTransactionID(using: &self.random), attributes: attributes)
        return (message, message.encoded(integrityKey: Array(self.credentials.remotePassword.utf8), fingerprint: true))
    }

    private mutating func startCheck(_ index: Int, nominate: Bool, now: NIODeadline) {
        let (message, bytes) = self.checkRequest(for: self.pairs[index], nominate: nominate)
        self.pairs[index].transaction = STUNTransaction(message: message, bytes: bytes, timing: self.configuration.checkTiming, now: now)
        self.pairs[index].state = .inProgress
        self.pairs[index].nominating = nominate
        self.pollTransaction(index, now: now)
    }

    private mutating func pollTransaction(_ index: Int, now: NIODeadline) {
        guard var transaction = self.pairs[index].transaction else { return }
        switch transaction.poll(now: now) {
        case .wait: break
        case .send(let bytes): self.outbox.append(Output(base: self.pairs[index].base, to: self.pairs[index].remote, bytes: bytes))
        case .expired:
            self.pairs[index].transaction = nil
            self.pairs[index].nominating = false
            if self.pairs[index].checkAgainIfUnanswered {
                self.pairs[index].checkAgainIfUnanswered = false
                self.pairs[index].state = .waiting
                self.triggered.append(index)
            } else {
                self.pairs[index].state = .failed
            }
            return
        }
        self.pairs[index].transaction = transaction
    }

    // MARK: - Time

    /// Runs what is due at `now`: checks, nomination, consent (their datagrams are taken with
    /// ``pollTransmit()``).
    mutating func handleTimeout(now: NIODeadline) {
        switch self.state {
        case .checking: self.pollChecks(now: now)
        case .selected: self.pollConsent(now: now)
        case .consentLost: break
        }
    }

    /// The next datagram, in order (answers to checks as well); nil when none is due.
    mutating func pollTransmit() -> Output? {
        self.outbox.isEmpty ? nil : self.outbox.removeFirst()
    }

    private mutating func pollChecks(now: NIODeadline) {
        for index in self.pairs.indices where self.pairs[index].state == .inProgress {
            self.pollTransaction(index, now: now)
        }
        if now >= self.nextCheck, let index = self.nextPairToCheck() {
            self.startCheck(index, nominate: false, now: now)
            self.nextCheck = now + self.configuration.pacing
        }
        if self.role == .controlling { self.nominateIfReady(now: now) }
    }

    private mutating func nextPairToCheck() -> Int? {
        while !self.triggered.isEmpty {
            let index = self.triggered.removeFirst()
            if self.pairs[index].state == .waiting { return index }
        }
        return self.pairs.firstIndex { $0.state == .waiting }
    }

    private mutating func nominateIfReady(now: NIODeadline) {
        guard !self.pairs.contains(where: \.nominating), let best = self.pairs.firstIndex(where: { $0.state == .succeeded }),
            let deadline = self.nominationDeadline
        else { return }
        let betterPending = self.pairs[..<best].contains { $0.state == .waiting || $0.state == .inProgress }
        guard !betterPending || now >= deadline else { return }
        self.startCheck(best, nominate: true, now: now)
    }

    /// When the controlling side nominates the best pair even though better ones are pending.
    private var nominationDeadline: NIODeadline? {
        guard let firstSuccess, let best = self.pairs.first(where: { $0.state == .succeeded }) else { return nil }
        let relayed = best.base == .relay || best.remoteKind == .relayed
        return firstSuccess + (relayed ? self.configuration.relayNominationDelay : self.configuration.nominationDelay)
    }

    private mutating func pollConsent(now: NIODeadline) {
        guard let selected = self.selectedPair, var consent = self.consent else { return }
        if consent.handleTimeout(now: now) {
            let (message, bytes) = self.checkRequest(for: selected, nominate: false)
            consent.start(message, bytes: bytes, now: now, random: &self.random)
        }
        if consent.isLost {
            self.consent = nil
            self.state = .consentLost
            return
        }
        if let bytes = consent.pollTransmit(now: now) { self.outbox.append(Output(base: selected.base, to: selected.remote, bytes: bytes)) }
        self.consent = consent
    }

    var nextDeadline: NIODeadline? {
        switch self.state {
        case .checking:
            var deadlines = self.pairs.compactMap { $0.state == .inProgress ? $0.transaction?.deadline : nil }
            if self.pairs.contains(where: { $0.state == .waiting }) { deadlines.append(self.nextCheck) }
            if self.role == .controlling, !self.pairs.contains(where: \.nominating), let deadline = self.nominationDeadline {
                deadlines.append(deadline)
            }
            return deadlines.min()
        case .selected:
            return self.consent?.nextDeadline
        case .consentLost:
            return nil
        }
    }

    /// Whether every pair has failed (no more checks can succeed unless new candidates come).
    var allPairsFailed: Bool { !self.pairs.isEmpty && self.pairs.allSatisfy { $0.state == .failed } }

    // MARK: - Receiving

    /// Takes a STUN message that arrived at `base` from `source`; false if it is not ICE's.
    mutating func receive(_ decoded: DecodedSTUNMessage, from source: TraversalAddress, base: Base, now: NIODeadline) -> Bool {
        let message = decoded.message
        guard message.method == .binding else { return false }
        switch message.messageClass {
        case .request: self.answer(decoded, from: source, base: base, now: now)
        case .success, .error: self.response(decoded, from: source, base: base, now: now)
        case .indication: break
        }
        return true
    }

    private mutating func answer(_ decoded: DecodedSTUNMessage, from source: TraversalAddress, base: Base, now: NIODeadline) {
        let message = decoded.message
        guard message.attribute(.username)?.stringValue == "\(self.credentials.localUfrag):\(self.credentials.remoteUfrag)",
            decoded.hasValidIntegrity(key: Array(self.credentials.localPassword.utf8))
        else {
            self.rejectedChecks += 1
            return
        }
        // A relay-only side does not answer on its own socket: that pair must never succeed.
        if base == .socket && self.configuration.relayOnly { return }
        let response = STUNMessage(.binding, .success, transactionID: message.transactionID, attributes: [
            .xorAddress(.xorMappedAddress, source, transactionID: message.transactionID),
        ])
        self.outbox.append(Output(base: base, to: source,
                                  bytes: response.encoded(integrityKey: Array(self.credentials.localPassword.utf8), fingerprint: true)))
        if message.contains(.useCandidate), self.role == .controlled, base == .socket, !self.nominatingSources.contains(source),
            self.nominatingSources.count < Self.maximumNominatingSources
        {
            self.nominatingSources.append(source)
        }
        guard self.state == .checking else { return }
        // An unknown source is a peer-reflexive candidate (RFC 8445 §7.3.1.3).
        let priority = message.attribute(.priority)?.uint32Value ?? ICECandidate.priority(.peerReflexive, localPreference: 0)
        guard let index = self.addPair(base, source, kind: .peerReflexive, remotePriority: priority) else { return }
        if message.contains(.useCandidate), self.role == .controlled {
            self.pairs[index].nominated = true
            if self.pairs[index].state == .succeeded {
                self.state = .selected(base: base, remote: source)
                self.startConsent(now: now)
                return
            }
        }
        // A triggered check (§7.3.1.4) for a pair waiting or failed. A check in progress runs on
        // (a response to any of its requests still counts, which cancelling it would lose: two
        // sides checking at once would cancel each other for ever); should it go unanswered, it
        // starts again rather than fail, since the peer's check just proved the path works.
        switch self.pairs[index].state {
        case .waiting, .failed:
            self.pairs[index].state = .waiting
            self.triggered.append(index)
        case .inProgress:
            self.pairs[index].checkAgainIfUnanswered = true
        case .succeeded:
            break
        }
    }

    private mutating func response(_ decoded: DecodedSTUNMessage, from source: TraversalAddress, base: Base, now: NIODeadline) {
        let message = decoded.message
        if self.isConsentAnswer(message.transactionID) {
            if message.messageClass == .success, decoded.hasValidIntegrity(key: Array(self.credentials.remotePassword.utf8)) {
                self.consent?.answered(now: now)
            }
            return
        }
        guard self.state == .checking,
            let index = self.pairs.firstIndex(where: { $0.transaction?.transactionID == message.transactionID })
        else { return }
        guard decoded.hasValidIntegrity(key: Array(self.credentials.remotePassword.utf8)) else {
            self.rejectedChecks += 1
            return
        }
        let nominating = self.pairs[index].nominating
        self.pairs[index].transaction = nil
        self.pairs[index].nominating = false
        // The answer must come back from where the check went (§7.2.5.2.1).
        guard message.messageClass == .success, source == self.pairs[index].remote, base == self.pairs[index].base else {
            self.pairs[index].state = .failed
            return
        }
        self.pairs[index].state = .succeeded
        if self.firstSuccess == nil { self.firstSuccess = now }
        if nominating || (self.role == .controlled && self.pairs[index].nominated) {
            self.state = .selected(base: base, remote: source)
            self.startConsent(now: now)
        }
    }

    private mutating func startConsent(now: NIODeadline) {
        let timing = ConsentFreshness.Timing(
            interval: self.configuration.consentInterval, timeout: self.configuration.consentTimeout, check: self.configuration.checkTiming)
        self.consent = ConsentFreshness(timing: timing, now: now)
    }
}
