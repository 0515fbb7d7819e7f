@_spi(Machine) import GameKitMachine
import NIOCore

/// Which way media travels once a real-time connection is up.
public enum RealTimePath: String, Sendable, Equatable {
    /// Straight between the two sides (host, server-reflexive or peer-reflexive addresses).
    case direct
    /// Through a TURN relay.
    case relayed
    /// Through the application's own channel (no UDP path worked).
    case client
}

/// The sans-I/O core of a real-time connection on one UDP socket: candidate gathering (host
/// addresses, STUN binding, TURN allocation), ICE checks, consent, and media sealing, with
/// STUN, TURN and media demultiplexed on the one socket (PROTOCOL §17).
struct RealTimeMachine: DatagramMachine, Sendable {
    struct Settings: Sendable {
        var stunServers: [TraversalAddress] = []
        var turnServers: [(address: TraversalAddress, username: String, password: String)] = []
        var ice = ICEAgent.Configuration()
        var serverTiming = STUNTransaction.Timing()
        var socketAcceptsIPv6 = false
    }

    enum Event: Equatable, Sendable {
        /// Local candidates not reported before: the host ones at once, server-reflexive and
        /// relayed ones as the servers answer (to be trickled to the other side).
        case candidates([ICECandidate])
        case connected(RealTimePath, remote: TraversalAddress)
        case failed
        case consentLost
        /// A media packet opened and authenticated, from a UDP path or the application's channel.
        case media([UInt8], viaClient: Bool)
        /// A sealed media packet for the application's channel (``useClientPath(now:)``).
        case clientPacket([UInt8])
    }

    struct Datagram: Equatable, Sendable {
        var to: TraversalAddress
        var bytes: [UInt8]
    }

    private let settings: Settings
    private let hostCandidates: [ICECandidate]
    private var binding: [STUNBindingClient]
    private var turn: TURNClient?
    private var announced: [ICECandidate] = []
    private var announcedOnce = false
    private var agent: ICEAgent?
    private var cipher: MediaCipher?
    private var remoteCandidates: [ICECandidate] = []
    private var relayAdded = false
    private var reported: ICEAgent.State?
    private var failureReported = false
    private var outbox: [Datagram] = []
    private var events: [Event] = []
    /// Set once media goes through the application's channel.
    private(set) var usesClientPath = false
    private var random: MachineRandom
    /// Datagrams that were none of STUN, TURN or media, or did not decode.
    private(set) var unknownDatagrams = 0

    /// Starts gathering: host candidates are reported at once, reflexive and relayed ones as the
    /// servers answer.
    /// Transaction IDs, ICE's tie-breaker and jitter come from `random`: the system's generator,
    /// or a seeded one that makes a test repeat.
    init(settings: Settings, hostAddresses: [TraversalAddress], now: NIODeadline, random: MachineRandom = .system()) {
        var random = random
        self.settings = settings
        self.hostCandidates = hostAddresses.enumerated().map { index, address in
            ICECandidate(kind: .host, address: address, localPreference: UInt16(65535 - min(index, 1000)))
        }
        self.binding = settings.stunServers.map { STUNBindingClient(server: $0, timing: settings.serverTiming, now: now, random: &random) }
        if let server = settings.turnServers.first {
            self.turn = TURNClient(
                server: server.address, username: server.username, password: server.password, timing: settings.serverTiming, now: now,
                random: random.split())
        }
        self.random = random
        self.announceCandidates()
    }

    // MARK: - Gathering

    private mutating func announceCandidates() {
        let fresh = self.localCandidates.filter { candidate in !self.announced.contains { $0.address == candidate.address } }
        guard !fresh.isEmpty || !self.announcedOnce else { return }
        self.announcedOnce = true
        self.announced += fresh
        self.events.append(.candidates(fresh))
    }

    /// Everything learnt so far: host, server-reflexive (deduplicated) and relayed candidates;
    /// only the relayed one under a relay-only policy (nothing else may be revealed or used).
    var localCandidates: [ICECandidate] {
        if self.settings.ice.relayOnly {
            return self.turn?.relayedAddress.map { [ICECandidate(kind: .relayed, address: $0)] } ?? []
        }
        var candidates = self.hostCandidates
        var reflexive: [TraversalAddress] = self.binding.compactMap {
            if case .mapped(let address) = $0.state { return address }
            return nil
        }
        if case .allocated(let relayed, let mapped)? = self.turn?.state {
            if let mapped { reflexive.append(mapped) }
            candidates.append(ICECandidate(kind: .relayed, address: relayed))
        }
        for address in reflexive where !candidates.contains(where: { $0.address == address }) {
            candidates.append(ICECandidate(kind: .serverReflexive, address: address))
        }
        return candidates
    }

    // MARK: - Connecting

    /// More candidates of the other side (trickled after its first message).
    mutating func addRemote(_ candidates: [ICECandidate], now: NIODeadline) {
        defer { self.step(now: now) }
        let fresh = candidates.filter { candidate in !self.remoteCandidates.contains { $0.address == candidate.address } }
        guard !fresh.isEmpty else { return }
        self.remoteCandidates += fresh
        // Before the checks start they are kept, and paired when they do.
        guard self.agent != nil else { return }
        self.agent!.addRemote(fresh)
        if self.relayAdded, var turn = self.turn, let relayed = turn.relayedAddress {
            turn.permit(fresh.map(\.address), now: now)
            self.turn = turn
            self.agent!.addRelay(relayed, remoteCandidates: fresh)
        }
    }

    /// Starts connectivity checks against the other side's candidates.
    mutating func connect(keys: RealTimeKeys, remote: [ICECandidate], now: NIODeadline) {
        guard self.agent == nil else { return }
        defer { self.step(now: now) }
        self.cipher = MediaCipher(keys: keys)
        self.remoteCandidates = remote + self.remoteCandidates.filter { early in !remote.contains { $0.address == early.address } }
        var agent = ICEAgent(role: keys.isInitiator ? .controlling : .controlled, credentials: keys.credentials,
                             configuration: self.settings.ice, socketAcceptsIPv6: self.settings.socketAcceptsIPv6, now: now,
                             random: self.random.split())
        agent.addRemote(self.remoteCandidates)
        self.agent = agent
        self.addRelayIfReady(now: now)
    }

    private mutating func addRelayIfReady(now: NIODeadline) {
        guard !self.relayAdded, self.agent != nil, var turn = self.turn, let relayed = turn.relayedAddress else { return }
        self.relayAdded = true
        turn.permit(self.remoteCandidates.map(\.address), now: now)
        self.turn = turn
        self.agent!.addRelay(relayed, remoteCandidates: self.remoteCandidates)
    }

    /// Stops checking: the application's channel carries media from now on (``queueMedia(_:)``
    /// reports sealed packets as ``Event/clientPacket(_:)``); consent stops too. The relay
    /// allocation is kept (refreshed) until ``close()`` releases it.
    mutating func useClientPath(now: NIODeadline) {
        self.usesClientPath = true
        self.agent = nil
        self.binding = []
        self.step(now: now)
    }

    /// Every pair and its state, for logs.
    var pairSummary: String {
        (self.agent?.pairs ?? []).map { "\($0.base)->\($0.remote) \($0.state)\($0.nominating ? "*" : "")\($0.nominated ? "!" : "")" }.joined(separator: ", ")
    }

    // MARK: - Media

    /// Seals a media packet for the selected pair (or the application's channel); dropped
    /// before a path is chosen.
    mutating func queueMedia(_ payload: [UInt8]) {
        guard self.cipher != nil else { return }
        if self.usesClientPath {
            self.events.append(.clientPacket(self.cipher!.seal(payload)))
            return
        }
        guard let pair = self.agent?.selectedPair else { return }
        let sealed = self.cipher!.seal(payload)
        if let datagram = self.route(ICEAgent.Output(base: pair.base, to: pair.remote, bytes: sealed)) {
            self.outbox.append(datagram)
        }
    }

    /// Opens a media packet that came through the application's channel.
    mutating func receiveFromClient(_ packet: [UInt8]) {
        if let payload = self.cipher?.open(packet) { self.events.append(.media(payload, viaClient: true)) }
    }

    var rejectedMedia: Int { self.cipher?.rejected ?? 0 }

    private mutating func route(_ output: ICEAgent.Output) -> Datagram? {
        switch output.base {
        case .socket: return Datagram(to: output.to, bytes: output.bytes)
        case .relay:
            guard var turn = self.turn else { return nil }
            let bytes = turn.sendIndication(output.bytes, to: output.to)
            self.turn = turn
            return Datagram(to: turn.server, bytes: bytes)
        }
    }

    // MARK: - Input

    // MARK: - DatagramMachine

    mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        guard let source = TraversalAddress(source) else {
            self.unknownDatagrams += 1
            return
        }
        self.receive(Array(datagram.readableBytesView), from: source, now: now)
    }

    mutating func handleTimeout(now: NIODeadline) {
        self.step(now: now)
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        guard !self.outbox.isEmpty else { return nil }
        let datagram = self.outbox.removeFirst()
        buffer.writeBytes(datagram.bytes)
        return datagram.to.socketAddress
    }

    mutating func pollEvent() -> Event? {
        self.events.isEmpty ? nil : self.events.removeFirst()
    }

    /// Takes a datagram that arrived on the socket.
    mutating func receive(_ bytes: [UInt8], from source: TraversalAddress, now: NIODeadline) {
        defer { self.step(now: now) }
        if MediaCipher.isMedia(bytes) { return self.dispatch(bytes, from: source, base: .socket, now: now) }
        guard let decoded = try? STUNMessage.decode(bytes) else {
            self.unknownDatagrams += 1
            return
        }
        if var turn = self.turn, source == turn.server {
            let received = turn.receive(decoded, now: now)
            self.turn = turn
            switch received {
            case .data(let inner, let peer):
                return self.dispatch(inner, from: peer, base: .relay, now: now)
            case .handled:
                self.announceCandidates()
                self.addRelayIfReady(now: now)
                return
            case .ignored:
                break
            }
        }
        if let index = self.binding.firstIndex(where: { $0.server == source }), self.binding[index].receive(decoded.message) {
            self.announceCandidates()
            return
        }
        self.dispatch(decoded, from: source, base: .socket, now: now)
    }

    /// Media or a connectivity check, from the socket or out of a relay's Data indication.
    private mutating func dispatch(_ bytes: [UInt8], from source: TraversalAddress, base: ICEAgent.Base, now: NIODeadline) {
        if MediaCipher.isMedia(bytes) {
            if let payload = self.cipher?.open(bytes) { self.events.append(.media(payload, viaClient: false)) }
        } else if let decoded = try? STUNMessage.decode(bytes) {
            self.dispatch(decoded, from: source, base: base, now: now)
        } else {
            self.unknownDatagrams += 1
        }
    }

    private mutating func dispatch(_ decoded: DecodedSTUNMessage, from source: TraversalAddress, base: ICEAgent.Base, now: NIODeadline) {
        if self.agent?.receive(decoded, from: source, base: base, now: now) != true {
            self.unknownDatagrams += 1
        }
    }

    // MARK: - Time

    /// Runs what is due at `now`: server transactions, checks, consent; their datagrams and what
    /// changed are queued for ``pollTransmit(now:into:)`` and ``pollEvent()``.
    private mutating func step(now: NIODeadline) {
        for index in self.binding.indices {
            self.binding[index].handleTimeout(now: now)
            if let bytes = self.binding[index].pollTransmit() { self.outbox.append(Datagram(to: self.binding[index].server, bytes: bytes)) }
        }
        if var turn = self.turn {
            turn.handleTimeout(now: now)
            while let bytes = turn.pollTransmit() { self.outbox.append(Datagram(to: turn.server, bytes: bytes)) }
            self.turn = turn
            self.addRelayIfReady(now: now)
        }
        if var agent = self.agent {
            agent.handleTimeout(now: now)
            while let output = agent.pollTransmit() {
                if let datagram = self.route(output) { self.outbox.append(datagram) }
            }
            self.agent = agent
            if agent.state != self.reported {
                self.reported = agent.state
                switch agent.state {
                case .checking: break
                case .selected(let base, let remote):
                    let pair = agent.selectedPair
                    self.events.append(.connected(base == .relay || pair?.remoteKind == .relayed ? .relayed : .direct, remote: remote))
                case .consentLost: self.events.append(.consentLost)
                }
            }
            // Every pair failed and no relay of ours can still add more: no path. (The other
            // side may still trickle a candidate; the caller's path timeout covers that.)
            let relayPending = self.turn.map { $0.state == .allocating } ?? false
            if agent.state == .checking, !self.failureReported, !relayPending, agent.allPairsFailed {
                self.failureReported = true
                self.events.append(.failed)
            }
        }
    }

    var nextDeadline: NIODeadline? {
        var deadlines: [NIODeadline] = self.binding.compactMap(\.nextDeadline)
        if let deadline = self.turn?.nextDeadline { deadlines.append(deadline) }
        if let deadline = self.agent?.nextDeadline { deadlines.append(deadline) }
        return deadlines.min()
    }

    /// Closes: the relay's release is queued (sent once), and nothing runs any more.
    mutating func close() {
        self.agent = nil
        self.binding = []
        guard var turn = self.turn, let bytes = turn.close() else { return }
        self.turn = nil
        self.outbox.append(Datagram(to: turn.server, bytes: bytes))
    }
}
