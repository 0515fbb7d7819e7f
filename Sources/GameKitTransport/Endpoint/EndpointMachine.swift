import Crypto
import DequeModule
@_spi(Machine) import GameKitMachine
import NIOCore

/// A link held by reference, so that looking one up never copies its state (a dictionary of
/// large structs copies a value on every read of one of its fields).
final class LinkSlot {
    var machine: LinkMachine

    init(_ machine: LinkMachine) {
        self.machine = machine
    }

    /// Set when the link changed since the endpoint last filed its deadline.
    var timerChanged = false

    /// The link's next deadline, read in place: through a pointer, since reading
    /// `machine.nextDeadline` from a class property copied the whole link first (in release
    /// builds: a fifth of a bulk transfer's CPU once it was read per packet).
    var nextDeadline: NIODeadline? {
        withUnsafeMutablePointer(to: &self.machine) { $0.pointee.nextDeadline }
    }
}

/// The application code a link is closed with when its endpoint shuts down, and the denial code
/// pending requests get then.
let endpointClosingCode: UInt16 = 0xFFFD

/// Everything one endpoint does, without I/O: the links it carries, the handshakes in progress on
/// both sides, and the routing of datagrams between them.
///
/// The NIO layer (``TransportEndpoint``) feeds it received datagrams and the time, asks it for
/// datagrams to send and for its next deadline, and hands its events to the application. Tests
/// drive two of them against each other through an in-memory network with a virtual clock.
struct EndpointMachine: DatagramMachine {
    /// How long a request waits after the initiator's last repeat before it is considered gone
    /// (the initiator repeats at least every 2 seconds).
    static let requestLifetime = TimeAmount.seconds(6)
    /// How long answered handshakes are remembered for repeats.
    static let answerLifetime = TimeAmount.seconds(10)

    private(set) var configuration: TransportConfiguration
    /// The password as liveness key material (never used by the handshake).
    let psk: PreSharedKey
    /// The password's CPace generator, which every handshake starts from.
    let secret: HandshakeSecret
    let localParameters: TransportParameters

    var links: [UInt32: LinkSlot] = [:]
    var initiators: [UInt32: InitiatorHandshake] = [:]
    var withdrawnInitiations: [UInt32: WithdrawnInitiation] = [:]
    var challenges: [HandshakeSource: ChallengedHandshake] = [:]
    var guesses = GuessLimiter()
    var requests: [ConnectionRequest.ID: PendingRequest] = [:]
    var requestsBySource: [HandshakeSource: ConnectionRequest.ID] = [:]
    var accepted: [HandshakeSource: AcceptedHandshake] = [:]
    var acceptedByLink: [UInt32: HandshakeSource] = [:]
    var answered: [HandshakeSource: AnsweredHandshake] = [:]
    var nextRequestID: UInt64 = 1
    var cookies: CookieGenerator
    var replyLimiter = ReplyRateLimiter()
    /// Answers probes to this endpoint's liveness key.
    var livenessResponder: LivenessResponder
    /// Probes the peers the application watches.
    var livenessWatcher: LivenessWatcher
    var outbox = Deque<(SocketAddress, ByteBuffer)>()
    /// Liveness probes to send, each with its watch (told when the probe leaves).
    var probeOutbox = Deque<(SocketAddress, ByteBuffer, LivenessWatchID)>()
    var events = Deque<TransportEvent>()
    /// Links whose send buffer released space since the driver last looked (it resumes tasks
    /// waiting to write on them, then clears this).
    var releasedSpace: [LinkID] = []
    var statistics = EndpointStatistics()
    /// The time of the latest call that passed one (for bookkeeping inside event collection).
    private(set) var lastNow: NIODeadline
    private var transmitOrder: [UInt32] = []
    private var timeoutOrder: [UInt32] = []
    /// Every link's next deadline, earliest first (shared by copies, as the links are).
    private let linkTimers = LinkTimerQueue()
    private var transmitPosition = 0
    private var scratchEvents: [LinkEvent] = []
    /// Link indexes come from here.
    private var random: MachineRandom

    /// Link indexes and probe timing and nonces are drawn from `random`: the system's
    /// generator, or a seeded one that makes a test repeat (keys always come from the system's).
    init(configuration: TransportConfiguration, now: NIODeadline, random: MachineRandom = .system()) throws(TransportError) {
        var random = random
        try configuration.validate()
        self.configuration = configuration
        self.psk = PreSharedKey(password: configuration.preSharedKey)
        self.secret = HandshakeSecret(password: configuration.preSharedKey)
        self.localParameters = configuration.localParameters
        self.cookies = CookieGenerator(now: now)
        self.lastNow = now
        let livenessKey: Curve25519.KeyAgreement.PrivateKey
        if let bytes = configuration.livenessPrivateKey {
            guard let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes) else {
                throw .invalidConfiguration("livenessPrivateKey must be 32 bytes")
            }
            livenessKey = key
        } else {
            livenessKey = Curve25519.KeyAgreement.PrivateKey()
        }
        self.livenessResponder = LivenessResponder(privateKey: livenessKey, psk: self.psk)
        self.livenessWatcher = LivenessWatcher(random: random.split())
        self.random = random
    }

    // MARK: - Liveness

    /// This endpoint's liveness public key (32 bytes), for peers to probe it with.
    var livenessPublicKey: [UInt8] { self.livenessResponder.publicKey }

    /// Starts probing the endpoint at `addresses` whose liveness public key is `peerKey`;
    /// ``TransportEvent/liveness(_:alive:)`` reports when it falls silent and when it answers again.
    mutating func watch(addresses: [SocketAddress], peerKey: [UInt8], now: NIODeadline) throws(TransportError) -> LivenessWatchID {
        guard let id = self.livenessWatcher.watch(addresses: addresses, peerKey: peerKey, responder: self.livenessResponder, now: now) else {
            throw .invalidConfiguration("a liveness key is 32 bytes of a valid X25519 public key, and a peer needs an address")
        }
        return id
    }

    /// New addresses for a watched peer.
    mutating func updateWatch(_ id: LivenessWatchID, addresses: [SocketAddress]) {
        self.livenessWatcher.update(id, addresses: addresses)
    }

    /// Stops probing a peer.
    mutating func unwatch(_ id: LivenessWatchID) {
        self.livenessWatcher.unwatch(id)
    }

    // MARK: - Application operations

    /// Starts a handshake with `address`. The outcome arrives as ``TransportEvent/linkOpened`` or
    /// ``TransportEvent/connectFailed`` for the returned ID.
    mutating func connect(to address: SocketAddress, payload: ByteBuffer, timeout: TimeAmount?, now: NIODeadline) throws(TransportError) -> LinkID {
        let index = self.allocateIndex()
        let initiator = try InitiatorHandshake(
            localIndex: index,
            remoteAddress: address,
            secret: self.secret,
            parameters: self.localParameters,
            payload: payload,
            maxDatagramSize: self.configuration.maxDatagramSize,
            now: now,
            timeout: timeout ?? self.configuration.handshakeTimeout
        )
        self.initiators[index] = initiator
        self.outbox.append((address, initiator.datagram()))
        return LinkID(rawValue: index)
    }

    /// Withdraws a handshake this side started; the responder learns it at once.
    @discardableResult
    mutating func cancelConnect(_ link: LinkID, now: NIODeadline) -> Bool {
        self.withdraw(link.rawValue, reason: .cancelled, error: .cancelled, now: now)
    }

    /// Accepts a connection request; the link opens when the initiator confirms.
    mutating func accept(_ id: ConnectionRequest.ID, payload: ByteBuffer, now: NIODeadline) throws(TransportError) -> LinkID {
        guard let request = self.requests[id] else { throw .unknownConnectionRequest }
        let limit = ResponderHandshake.maximumResponsePayload(maxDatagramSize: self.configuration.maxDatagramSize)
        guard payload.readableBytes <= limit else { throw .payloadTooLarge(size: payload.readableBytes, limit: limit) }
        self.removeRequest(id)
        let index = self.allocateIndex()
        let cipher = DataCipher.choice(forOffer: request.parameters.dataCiphers, preference: self.configuration.dataCipher)
        var responseParameters = self.localParameters
        responseParameters.dataCiphers = cipher.rawValue
        let response = ResponderHandshake.respond(
            initiatorIndex: request.source.index,
            localIndex: index,
            parameters: responseParameters,
            payload: payload,
            keys: request.keys
        )
        let parameters = LinkParameters(configuration: self.configuration, local: self.localParameters, peer: request.parameters)
        self.links[index] = LinkSlot(LinkMachine(
            localIndex: index,
            remoteIndex: request.source.index,
            role: .responder,
            remoteAddress: request.source.address,
            keys: request.keys.link,
            cipher: cipher,
            parameters: parameters,
            now: now
        ))
        self.fileTimer(of: index)
        self.accepted[request.source] = AcceptedHandshake(
            linkIndex: index,
            share: request.share,
            requestTag: request.requestTag,
            response: response,
            cancelKey: request.keys.cancel,
            initiationPayload: request.payload
        )
        self.acceptedByLink[index] = request.source
        self.outbox.append((request.source.address, response))
        return LinkID(rawValue: index)
    }

    /// Denies a connection request; the initiator fails with ``TransportError/denied(code:)``.
    mutating func deny(_ id: ConnectionRequest.ID, code: UInt16, now: NIODeadline) throws(TransportError) {
        guard let request = self.requests[id] else { throw .unknownConnectionRequest }
        self.removeRequest(id)
        let reject = ResponderHandshake.reject(.denied, code: code, receiverIndex: request.source.index, echo: request.echo)
        self.answered[request.source] = AnsweredHandshake(
            share: request.share,
            requestTag: request.requestTag,
            reply: reject,
            until: now + Self.answerLifetime
        )
        self.outbox.append((request.source.address, reject))
    }

    mutating func send(_ message: ByteBuffer, on link: LinkID, mode: SendMode) throws(TransportError) {
        guard self.links[link.rawValue] != nil else { throw .linkNotOpen }
        try self.links[link.rawValue]!.machine.send(message, mode: mode)
        self.fileTimer(of: link.rawValue)
    }

    /// Queues each message on its link, or none of them: every link is checked first, and the
    /// first that would refuse its message decides the error.
    mutating func send(_ batch: [(message: ByteBuffer, link: LinkID)], mode: SendMode) throws(TransportError) {
        var planned: [UInt32: Int] = [:]
        for (message, link) in batch {
            guard let slot = self.links[link.rawValue] else { throw .linkNotOpen }
            // Several messages for one link: each is checked behind the ones before it.
            let before = planned[link.rawValue, default: 0]
            try slot.machine.checkSend(size: message.readableBytes, mode: mode, planned: before)
            planned[link.rawValue] = before + message.readableBytes
        }
        for (message, link) in batch {
            try self.links[link.rawValue]!.machine.send(message, mode: mode)
            self.fileTimer(of: link.rawValue)
        }
    }

    /// Changes the disconnect timeout of this endpoint's links, open ones included, and the
    /// keepalive interval that derives from it.
    mutating func setDisconnectTimeout(_ timeout: TimeAmount) throws(TransportError) {
        var configuration = self.configuration
        configuration.disconnectTimeout = timeout
        try configuration.validate()
        self.configuration = configuration
        for slot in self.links.values {
            slot.machine.parameters.disconnectTimeout = timeout
            slot.machine.parameters.keepaliveInterval = configuration.effectiveKeepaliveInterval
        }
        for index in self.links.keys { self.fileTimer(of: index) }
    }

    /// Closes a link after delivering what is queued on it.
    mutating func close(_ link: LinkID, code: UInt16, now: NIODeadline) throws(TransportError) {
        guard let state = self.links[link.rawValue]?.machine.state else { throw .linkNotOpen }
        switch state {
        case .open, .awaitingConfirmation:
            self.links[link.rawValue]!.machine.close(code: code, now: now)
            self.fileTimer(of: link.rawValue)
            self.collectEvents(of: link.rawValue)
        default:
            throw .linkNotOpen
        }
    }

    /// Packets carrying each link's CLOSE at shutdown: the socket closes next, so a lost CLOSE
    /// could not be answered again and the peer would wait out its disconnect timeout.
    static let shutdownCloseCopies = 3

    /// Shuts everything down at once: links closed with CLOSE frames (in `shutdownCloseCopies`
    /// packets each), initiations withdrawn, pending requests denied.
    mutating func closeAll(now: NIODeadline) {
        for index in self.initiators.keys.sorted() {
            self.withdraw(index, reason: .cancelled, error: .endpointClosed, now: now)
        }
        for id in self.requests.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            try? self.deny(id, code: endpointClosingCode, now: now)
        }
        for index in self.links.keys.sorted() {
            self.links[index]!.machine.abort(code: endpointClosingCode, reason: .endpointClosed, copies: Self.shutdownCloseCopies, now: now)
            self.fileTimer(of: index)
            self.collectEvents(of: index)
        }
    }

    /// Handshakes this side answers that hold state: requests awaiting the application, and
    /// accepted links awaiting the initiator's confirmation.
    var handshakesInProgress: Int { self.challenges.count + self.requests.count + self.accepted.count }

    func verificationCode(_ link: LinkID) -> [UInt8]? {
        self.links[link.rawValue]?.machine.verificationCode
    }

    func linkStatistics(_ link: LinkID) -> LinkStatistics? {
        guard let slot = self.links[link.rawValue] else { return nil }
        var snapshot = slot.machine.statisticsSnapshot
        snapshot.remoteAddress = slot.machine.remoteAddress
        return snapshot
    }

    var endpointStatistics: EndpointStatistics {
        var snapshot = self.statistics
        let watcher = self.livenessWatcher.statistics
        snapshot.livenessProbesSent = UInt64(watcher.probesSent)
        snapshot.livenessAnswersAccepted = UInt64(watcher.answersAccepted)
        snapshot.livenessAnswersIgnored = UInt64(watcher.answersIgnored)
        snapshot.livenessSuspicionsCleared = UInt64(watcher.suspicionsCleared)
        snapshot.pendingChallenges = self.challenges.count
        snapshot.pendingRequests = self.requests.count
        snapshot.unconfirmedLinks = self.accepted.count
        snapshot.pendingInitiations = self.initiators.count
        snapshot.links = self.links.count
        return snapshot
    }

    var hasPendingEvents: Bool { !self.events.isEmpty }

    mutating func pollEvent() -> TransportEvent? {
        self.events.popFirst()
    }

    // MARK: - Datagrams in

    mutating func handle(datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        self.lastNow = now
        self.statistics.datagramsReceived += 1
        guard
            let typeByte = datagram.getInteger(at: datagram.readerIndex, as: UInt8.self),
            let type = PacketType(rawValue: typeByte)
        else {
            self.statistics.droppedMalformed += 1
            return
        }
        switch type {
        case .data: self.handleData(datagram, from: address, now: now)
        case .initiation: self.handleInitiatorMessage(datagram, from: address, now: now)
        case .response: self.handleResponderMessage(datagram, from: address, now: now)
        case .reject: self.handleReject(datagram)
        case .cookie: self.handleCookie(datagram, now: now)
        case .cancel: self.handleCancel(datagram, from: address, now: now)
        case .probe: self.handleProbe(datagram, from: address, now: now)
        case .probeReply, .probeCookie:
            let proberKey = self.livenessResponder.publicKey
            self.livenessWatcher.handleAnswer(
                datagram, type: type, from: address, now: now, proberKey: proberKey,
                probe: { address, datagram, id in self.probeOutbox.append((address, datagram, id)) },
                changed: { id, alive in self.events.append(.liveness(id, alive: alive)) })
        }
    }

    private mutating func handleProbe(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        switch self.livenessResponder.handle(datagram, from: address, now: now, cookies: self.cookies) {
        case .answered(let reply):
            self.statistics.livenessProbesAnswered += 1
            self.outbox.append((address, reply))
        case .cookie(let cookie):
            self.statistics.livenessCookiesSent += 1
            self.outbox.append((address, cookie))
        case .dropped:
            self.statistics.livenessProbesDropped += 1
        }
    }

    private mutating func handleData(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let header = DataPacketHeader.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let index = header.receiverIndex
        guard let slot = self.links[index] else {
            self.statistics.droppedUnknownLink += 1
            return
        }
        switch slot.machine.receive(datagram: datagram, header: header, from: address, now: now) {
        case .accepted: self.fileTimer(of: index)
        case .duplicate: self.statistics.droppedReplayed += 1
        case .unauthenticated: self.statistics.droppedUnauthenticated += 1
        }
        self.collectEvents(of: index)
    }

    // MARK: - Timers

    var nextDeadline: NIODeadline? {
        var deadline: NIODeadline?
        for initiator in self.initiators.values { deadline = deadline.earliest(initiator.nextDeadline) }
        for challenge in self.challenges.values { deadline = deadline.earliest(challenge.lastSeen + Self.requestLifetime) }
        for request in self.requests.values { deadline = deadline.earliest(request.lastSeen + Self.requestLifetime) }
        for answer in self.answered.values { deadline = deadline.earliest(answer.until) }
        for withdrawn in self.withdrawnInitiations.values { deadline = deadline.earliest(withdrawn.until) }
        // The links' from the timer queue (no walk); a debug build checks it missed nothing.
        self.refreshTimers()
        assert(self.linkTimers.earliest == self.links.values.reduce(nil) { $0.earliest($1.machine.nextDeadline) }, "a link's deadline changed without being filed")
        deadline = deadline.earliest(self.linkTimers.earliest)
        deadline = deadline.earliest(self.cookies.nextRotation)
        deadline = deadline.earliest(self.livenessWatcher.nextDeadline)
        return deadline
    }

    mutating func handleTimeout(now: NIODeadline) {
        self.lastNow = now
        self.cookies.rotateIfNeeded(now: now)
        self.livenessResponder.expire(now: now)
        let proberKey = self.livenessResponder.publicKey
        self.livenessWatcher.handleTimeout(
            now: now, proberKey: proberKey,
            probe: { address, datagram, id in self.probeOutbox.append((address, datagram, id)) },
            changed: { id, alive in self.events.append(.liveness(id, alive: alive)) })
        // In index order everywhere: a seeded run repeats exactly.
        for index in self.initiators.keys.sorted() {
            switch self.initiators[index]!.handleTimeout(now: now) {
            case .none: break
            case .retransmit(let datagram): self.outbox.append((self.initiators[index]!.remoteAddress, datagram))
            case .fail: self.withdraw(index, reason: .timedOut, error: .timedOut, now: now)
            }
        }
        // A challenge no request followed is a guess that failed (or an initiator that vanished).
        for (source, challenge) in self.challenges where now >= challenge.lastSeen + Self.requestLifetime {
            self.challenges[source] = nil
            self.guesses.finish(source.address, failed: true, now: now)
            self.statistics.challengesExpired += 1
        }
        for (id, request) in self.requests.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where now >= request.lastSeen + Self.requestLifetime {
            self.removeRequest(id)
            self.events.append(.connectionRequestWithdrawn(id, .expired))
        }
        self.answered = self.answered.filter { now < $0.value.until }
        self.withdrawnInitiations = self.withdrawnInitiations.filter { now < $0.value.until }
        // Only the links that are due, earliest first (then by index), from the timer queue; each
        // is filed again. Collected first: a link filed again at `now` would come round twice.
        self.timeoutOrder.removeAll(keepingCapacity: true)
        self.refreshTimers()
        while let index = self.linkTimers.popDue(now: now) { self.timeoutOrder.append(index) }
        for index in self.timeoutOrder {
            guard let slot = self.links[index] else { continue }
            slot.machine.handleTimeout(now: now)
            self.collectEvents(of: index)
            if slot.machine.isClosed {
                self.links[index] = nil
            }
            self.fileTimer(of: index)
        }
    }

    // MARK: - Datagrams out

    /// Appends the next datagram to send to `output` and returns its destination; nil once every
    /// link has had its turn (call again for a new round). Handshake messages go first; then each
    /// link sends all it may before the next link's turn, so that consecutive datagrams share a
    /// destination (which is what segmentation offload batches).
    mutating func pollTransmit(now: NIODeadline, into output: inout ByteBuffer) -> SocketAddress? {
        var none = NoHeadroom()
        return self.pollTransmit(now: now, into: &output, headroom: &none)
    }

    /// As ``pollTransmit(now:into:)``, leaving `headroom`'s bytes free in front of each datagram
    /// (for a relay's header, written in place by the caller); the datagram returned starts at
    /// the writer index `output` had before the call.
    @inline(__always)
    mutating func pollTransmit<Headroom: TransmitHeadroom>(now: NIODeadline, into output: inout ByteBuffer, headroom: inout Headroom) -> SocketAddress? {
        if let (address, datagram) = self.outbox.popFirst() {
            headroom.reserve(for: address, in: &output)
            output.writeImmutableBuffer(datagram)
            self.statistics.datagramsSent += 1
            return address
        }
        if let (address, datagram, watch) = self.probeOutbox.popFirst() {
            // A probe's wait for its answer starts when it leaves.
            self.livenessWatcher.didSend(watch, now: now)
            headroom.reserve(for: address, in: &output)
            output.writeImmutableBuffer(datagram)
            self.statistics.datagramsSent += 1
            return address
        }
        if self.transmitPosition == 0 {
            self.transmitOrder.removeAll(keepingCapacity: true)
            self.transmitOrder.append(contentsOf: self.links.keys)
            self.transmitOrder.sort()
        }
        while self.transmitPosition < self.transmitOrder.count {
            let index = self.transmitOrder[self.transmitPosition]
            guard let slot = self.links[index] else {
                self.transmitPosition += 1
                continue
            }
            let start = output.writerIndex
            headroom.reserve(for: slot.machine.remoteAddress, in: &output)
            let sent = slot.machine.pollTransmit(now: now, into: &output)
            if !slot.machine.events.isEmpty { self.collectEvents(of: index) }
            self.fileTimer(of: index)
            if sent {
                self.statistics.datagramsSent += 1
                return slot.machine.remoteAddress
            }
            output.moveWriterIndex(to: start)
            self.transmitPosition += 1
        }
        self.transmitPosition = 0
        return nil
    }

    // MARK: - Helpers

    /// Turns a link's events into the endpoint's.
    mutating func collectEvents(of index: UInt32) {
        guard let slot = self.links[index], !slot.machine.events.isEmpty else { return }
        swap(&self.scratchEvents, &slot.machine.events)
        let link = LinkID(rawValue: index)
        for event in self.scratchEvents {
            switch event {
            case .message(let message, let mode):
                self.events.append(.received(message, link: link, mode: mode))
            case .confirmed:
                var payload = ByteBuffer()
                if let source = self.acceptedByLink.removeValue(forKey: index), let accepted = self.accepted.removeValue(forKey: source) {
                    payload = accepted.initiationPayload
                    self.answered[source] = AnsweredHandshake(
                        share: accepted.share,
                        requestTag: accepted.requestTag,
                        reply: nil,
                        until: self.lastNow + Self.answerLifetime
                    )
                }
                self.statistics.linksOpened += 1
                self.events.append(.linkOpened(link, remoteAddress: slot.machine.remoteAddress, payload: payload))
            case .closed(let reason):
                if let source = self.acceptedByLink.removeValue(forKey: index) {
                    self.accepted[source] = nil
                }
                self.statistics.linksClosed += 1
                self.events.append(.linkClosed(link, reason))
            case .moved(let from, let to):
                self.statistics.linkMoves += 1
                self.events.append(.linkMoved(link, from: from, to: to))
            case .released:
                self.releasedSpace.append(link)
                if slot.machine.refusedForSpace,
                    slot.machine.bytesQueued <= slot.machine.parameters.sendBufferCapacity / 2
                {
                    slot.machine.refusedForSpace = false
                    self.events.append(.sendBufferAvailable(link))
                }
            }
        }
        self.scratchEvents.removeAll(keepingCapacity: true)
    }

    mutating func removeRequest(_ id: ConnectionRequest.ID) {
        if let request = self.requests.removeValue(forKey: id) {
            self.requestsBySource[request.source] = nil
        }
    }

    /// Ends one of this side's handshakes: the responder gets a cancel, the application `error`.
    @discardableResult
    mutating func withdraw(_ index: UInt32, reason: CancelReason, error: TransportError, now: NIODeadline) -> Bool {
        guard let initiator = self.initiators.removeValue(forKey: index) else { return false }
        if let cancel = initiator.cancelDatagram(reason: reason) {
            self.outbox.append((initiator.remoteAddress, cancel))
            self.withdrawnInitiations[index] = WithdrawnInitiation(cancel: cancel, reason: reason, until: now + Self.answerLifetime)
        } else {
            // No challenge yet: nothing to authenticate a cancel with. If the challenge still
            // comes, it is answered with one (PROTOCOL §6.2).
            self.withdrawnInitiations[index] = WithdrawnInitiation(opening: initiator, reason: reason, until: now + Self.answerLifetime)
        }
        self.events.append(.connectFailed(LinkID(rawValue: index), error))
        return true
    }

    /// Marks link `index` for filing again in the timer queue (once until the next look; taken
    /// out when it is gone or has no timer). Called after every change to a link.
    mutating func fileTimer(of index: UInt32) {
        if let slot = self.links[index] {
            guard !slot.timerChanged else { return }
            slot.timerChanged = true
        }
        self.linkTimers.markChanged(index)
    }

    /// Files the links changed since the last look under their deadlines now.
    func refreshTimers() {
        self.linkTimers.refresh { index in
            guard let slot = self.links[index] else { return nil }
            slot.timerChanged = false
            return slot.nextDeadline
        }
    }

    /// A random nonzero index used by no link, handshake or recently withdrawn handshake.
    mutating func allocateIndex() -> UInt32 {
        while true {
            let candidate = UInt32.random(in: 1...UInt32.max, using: &self.random)
            if self.links[candidate] == nil, self.initiators[candidate] == nil, self.withdrawnInitiations[candidate] == nil {
                return candidate
            }
        }
    }
}
