import Crypto
import DequeModule
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitTraversal
import NIOCore

/// A session's side of the rendezvous and relay, without I/O (PROTOCOL §18.4): registers in a
/// room, keeps the membership alive, learns the other members and their records, obtains a relay
/// allocation with the rendezvous's ticket, and wraps the transport's datagrams to members for
/// the relay. It shares the session's socket, inside ``OnlineMachine``.
package struct RoomClient: DatagramMachine {
    package typealias Event = RoomEvent

    package struct Configuration: Sendable {
        /// Rendezvous instances, tried in order (the next after one falls silent).
        package var rendezvous: [SocketAddress]
        package var sessionKey: UInt64
        package var request: RoomRequest
        package var record: MemberRecord
        package var timing = Timing()

        package init(rendezvous: [SocketAddress], sessionKey: UInt64, request: RoomRequest, record: MemberRecord) {
            self.rendezvous = rendezvous
            self.sessionKey = sessionKey
            self.request = request
            self.record = record
        }
    }

    package struct Timing: Sendable {
        /// A request's first repeat; each later one waits twice as long, up to `maximumRetransmit`.
        package var initialRetransmit = TimeAmount.milliseconds(250)
        package var maximumRetransmit = TimeAmount.seconds(2)
        /// A registration nobody answers fails after this long (on every instance in turn).
        package var registrationTimeout = TimeAmount.seconds(10)
        /// Between refreshes (the rendezvous drops a member silent for its member timeout, 10 s by default).
        package var refreshInterval = TimeAmount.milliseconds(2500)
        /// Without any answer for this long, the rendezvous is taken for lost: register again.
        package var silenceLimit = TimeAmount.seconds(6)
        /// Between allocations renewed at the relay (which also keep the NAT's mapping open).
        package var relayKeepalive = TimeAmount.seconds(15)
        package init() {}
    }

    enum Phase: Equatable {
        case idle
        case registering(since: NIODeadline)
        case member
        case leaving
        case done
    }

    /// A request that is repeated until answered.
    struct Pending {
        var id: UInt64
        var bytes: ByteBuffer
        var destination: SocketAddress
        var nextSend: NIODeadline
        var interval: TimeAmount
    }

    package let configuration: Configuration
    private let holder: Curve25519.Signing.PrivateKey
    private let clock: WallClock
    private var random: MachineRandom
    private(set) var phase: Phase
    private var instance = 0
    private var registration: Pending?
    private var fetches: [UInt32: Pending] = [:]
    private var leaveRequest: Pending?
    private var refreshDue: NIODeadline?
    private var lastHeard: NIODeadline
    private var retryAt: NIODeadline?
    /// What the rendezvous gave: the room, this member's token, the code.
    private(set) var room: RoomHandle?
    package private(set) var code: RoomCode?
    private var token: MemberToken?
    private var rosterVersion: UInt32 = 0
    /// The roster version an UPDATE was last sent for (one per version).
    private var updatedForRoster: UInt32?
    /// The record changed while a registration (with the record as it was) was under way.
    private var recordUnsent = false
    private(set) var members: [UInt32: MemberRecord] = [:]
    private var rosterVersions: [UInt32: UInt16] = [:]
    private var record: MemberRecord
    // The relay.
    private var relayAddress: SocketAddress?
    private var ticket: [UInt8] = []
    private var ticketExpires: UInt64 = 0
    package private(set) var relayReady = false
    private var allocation: Pending?
    private var nextAllocation: NIODeadline?
    private var waitingForRelay = Deque<(UInt32, ByteBuffer)>()
    /// The room's relay, once known.
    package var relay: SocketAddress? { self.relayAddress }
    // Server-reflexive address.
    private var stunTransaction: [UInt8]?
    private var stunDue: NIODeadline?
    private var stunTries = 0
    private(set) var reflexiveAddress: SocketAddress?

    private var outbox = Deque<(SocketAddress, ByteBuffer)>()
    private var events = Deque<RoomEvent>()
    package var statistics = Statistics()

    package struct Statistics: Sendable, Equatable {
        package var relayedOut: UInt64 = 0
        package var relayedIn: UInt64 = 0
        package var droppedNoRelay: UInt64 = 0
        package var droppedForeign: UInt64 = 0
    }

    /// Datagrams held until the relay is ready.
    static let relayQueueLimit = 64

    package init(configuration: Configuration, holder: Curve25519.Signing.PrivateKey = .init(), clock: WallClock, now: NIODeadline, random: MachineRandom = .system()) {
        precondition(!configuration.rendezvous.isEmpty, "a room client needs a rendezvous address")
        self.configuration = configuration
        self.holder = holder
        self.clock = clock
        self.random = random
        self.record = configuration.record
        self.phase = .idle
        self.lastHeard = now
    }

    /// Registers (once): called when the socket is there and the record complete.
    package mutating func start(now: NIODeadline) {
        guard self.phase == .idle else { return }
        self.phase = .registering(since: now)
        self.lastHeard = now
        self.register(now: now)
    }

    /// This member's record as it is now.
    package var ownRecord: MemberRecord { self.record }

    private var rendezvousAddress: SocketAddress { self.configuration.rendezvous[self.instance % self.configuration.rendezvous.count] }

    // MARK: - Operations

    /// Leaves the room (the rendezvous tells the others at once).
    package mutating func leave(now: NIODeadline) {
        guard self.phase != .idle else {
            self.phase = .done
            return
        }
        guard self.phase == .member, let room, let token else {
            self.finish(.left)
            return
        }
        self.phase = .leaving
        let id = self.random.next()
        self.leaveRequest = self.pending(.leave(request: id, room: room, token: token), id: id, to: self.rendezvousAddress, now: now)
    }

    /// Changes this member's record (candidates, busy): the rendezvous tells the others.
    package mutating func update(_ change: (inout MemberRecord) -> Void, now: NIODeadline) {
        var record = self.record
        change(&record)
        guard record != self.record else { return }
        record.version = self.record.version &+ 1
        self.record = record
        guard self.phase == .member, let room, let token else {
            // A registration under way carries the record as it was: sent after it.
            if case .registering = self.phase { self.recordUnsent = true }
            return
        }
        let id = self.random.next()
        // Sent once; the next refresh's roster shows whether it took (else it is sent again then).
        self.outbox.append((self.rendezvousAddress, RendezvousMessage.update(request: id, room: room, token: token, record: record).encoded))
    }

    /// Carries a transport datagram to `peer` through the relay (held briefly while the relay
    /// is not ready yet; dropped beyond that, as a lost datagram).
    package mutating func carry(_ datagram: ByteBuffer, to peer: UInt32) {
        guard let relay = self.relayAddress, self.relayReady else {
            if self.waitingForRelay.count < Self.relayQueueLimit {
                self.waitingForRelay.append((peer, datagram))
            } else {
                self.statistics.droppedNoRelay += 1
            }
            return
        }
        var framed = ByteBuffer()
        framed.reserveCapacity(RelayMessage.dataHeaderSize + datagram.readableBytes)
        RelayMessage.writeDataHeader(peer: peer, into: &framed)
        framed.writeImmutableBuffer(datagram)
        self.outbox.append((relay, framed))
        self.statistics.relayedOut += 1
    }

    /// A transport datagram went to the relay with its header written in place (the socket's
    /// machine framed it in its send buffer): counted as ``carry(_:to:)`` counts one.
    package mutating func countRelayedOut() {
        self.statistics.relayedOut += 1
    }

    /// A relayed datagram for the transport: its payload and the member it came from, or nil
    /// when it did not come from this session's relay.
    package mutating func unwrap(_ datagram: ByteBuffer, from source: SocketAddress) -> (ByteBuffer, UInt32)? {
        guard source == self.relayAddress, datagram.readableBytes > RelayMessage.dataHeaderSize,
            datagram.getInteger(at: datagram.readerIndex + 1, as: UInt8.self) == 0,
            let peer = datagram.getInteger(at: datagram.readerIndex + 2, as: UInt32.self)
        else {
            self.statistics.droppedForeign += 1
            return nil
        }
        self.statistics.relayedIn += 1
        return (datagram.getSlice(at: datagram.readerIndex + RelayMessage.dataHeaderSize, length: datagram.readableBytes - RelayMessage.dataHeaderSize)!, peer)
    }

    /// Whether a STUN datagram answers this client's binding request (else it is a peer's check).
    package func isReflexiveAnswer(_ datagram: ByteBuffer) -> Bool {
        guard let transaction = self.stunTransaction else { return false }
        return STUNBinding.mappedAddress(in: datagram, transactionID: transaction) != nil
    }

    // MARK: - DatagramMachine

    package mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        guard let first = datagram.getInteger(at: datagram.readerIndex, as: UInt8.self) else { return }
        if OnlinePacketType.isSTUN(firstByte: first) {
            if let transaction = self.stunTransaction, let mapped = STUNBinding.mappedAddress(in: datagram, transactionID: transaction) {
                self.stunTransaction = nil
                self.stunDue = nil
                if self.reflexiveAddress != mapped {
                    self.reflexiveAddress = mapped
                    self.events.append(.reflexiveAddress(mapped))
                }
            }
            return
        }
        if first == OnlinePacketType.relayControl.rawValue {
            guard source == self.relayAddress, let message = try? RelayMessage.decode(datagram) else { return }
            self.handleRelay(message, now: now)
            return
        }
        guard first == OnlinePacketType.rendezvous.rawValue, self.configuration.rendezvous.contains(source),
            let message = try? RendezvousMessage.decode(datagram)
        else { return }
        self.handleRendezvous(message, from: source, now: now)
    }

    private mutating func handleRendezvous(_ message: RendezvousMessage, from source: SocketAddress, now: NIODeadline) {
        switch message {
        case .room(let request, let code, let room, let token, _, let relay, let ticket):
            guard request == self.registration?.id else { return }
            self.lastHeard = now
            self.registration = nil
            let first = self.room == nil
            self.room = room
            self.code = code
            self.token = token
            self.phase = .member
            // A first refresh at once: it proves this address holds the token (only then are
            // rosters pushed here) and brings the roster, so the other members show at once.
            self.refreshDue = now
            if first { self.events.append(.joined(code, room)) }
            self.relayAddress = relay ?? source
            self.takeTicket(ticket, now: now)
            self.startSTUN(now: now)
        case .roster(_, let room, let version, let relay, let entries, let ticket):
            guard room == self.room, self.phase == .member || self.phase == .leaving else { return }
            self.lastHeard = now
            let relayNow = relay ?? source
            if self.relayAddress != nil, relayNow != self.relayAddress {
                // The room moved to another relay (its own relay's instance died): allocate there.
                self.relayAddress = relayNow
                self.relayReady = false
                self.allocate(now: now)
            }
            self.takeTicket(ticket, now: now)
            self.takeRoster(version: version, entries, now: now)
        case .member(let request, let room, let record):
            guard room == self.room, let pending = self.fetches[record.peerID], pending.id == request else { return }
            self.lastHeard = now
            self.fetches[record.peerID] = nil
            guard let wanted = self.rosterVersions[record.peerID], record.version >= wanted else { return }
            let known = self.members[record.peerID] != nil
            self.members[record.peerID] = record
            self.events.append(known ? .memberUpdated(record) : .memberJoined(record))
        case .refused(let request, let reason, let retryAfter):
            self.lastHeard = now
            self.handleRefusal(request, reason, retryAfter: retryAfter, now: now)
        case .left(let request, _):
            guard request == self.leaveRequest?.id else { return }
            self.leaveRequest = nil
            self.finish(.left)
        case .create, .join, .refresh, .leave, .fetch, .update:
            break
        }
    }

    private mutating func handleRefusal(_ request: UInt64, _ reason: RendezvousRefusal, retryAfter: UInt32, now: NIODeadline) {
        if request == self.registration?.id {
            switch reason {
            case .noSuchRoom:
                if case .join(let code) = self.configuration.request, self.room == nil {
                    self.finish(.failed(.noSuchRoom(code)))
                } else {
                    // The room this session was in has gone (every member left long enough
                    // ago on an instance that then died): it cannot come back.
                    self.finish(.failed(.noSuchRoom(self.code ?? RoomCode(value: 0)!)))
                }
            case .rateLimited, .busy:
                // Wait as asked, then register afresh (the registration deadline still holds).
                self.registration = nil
                self.retryAt = now + .milliseconds(Int64(max(retryAfter, 500)))
                if case .registering(let since) = self.phase, self.retryAt! >= since + self.configuration.timing.registrationTimeout {
                    self.finish(.failed(reason == .busy ? .rendezvousBusy : .rateLimited))
                }
            case .roomFull: self.finish(.failed(.roomFull))
            case .peerIDTaken: self.finish(.failed(.peerIDTaken))
            case .malformed, .unknownMember: self.finish(.failed(.rendezvousUnreachable))
            }
            return
        }
        if reason == .unknownMember, self.phase == .member {
            // The rendezvous forgot this member (it restarted, or this member was silent too
            // long): register again with the room's code.
            self.reregister(now: now)
        }
    }

    private mutating func takeRoster(version: UInt32, _ entries: [RendezvousMessage.RosterEntry], now: NIODeadline) {
        guard version >= self.rosterVersion || version < 16 && self.rosterVersion > .max - 16 else { return }
        self.rosterVersion = version
        let me = self.record.peerID
        var present = Set<UInt32>()
        for entry in entries where entry.peerID != me {
            present.insert(entry.peerID)
            self.rosterVersions[entry.peerID] = entry.version
            let known = self.members[entry.peerID]?.version
            if known != entry.version, self.fetches[entry.peerID] == nil, let room, let token {
                let id = self.random.next()
                self.fetches[entry.peerID] = self.pending(.fetch(request: id, room: room, token: token, peerID: entry.peerID), id: id, to: self.rendezvousAddress, now: now)
            }
        }
        for peer in self.members.keys.sorted() where !present.contains(peer) {
            self.members[peer] = nil
            self.events.append(.memberLeft(peer))
        }
        for peer in self.fetches.keys.sorted() where !present.contains(peer) { self.fetches[peer] = nil }
        self.rosterVersions = self.rosterVersions.filter { present.contains($0.key) }
        // Whether the rendezvous has this member's latest record: if not, it is sent again, with
        // a version past the rendezvous's (once per roster version, so that the two agree).
        if let mine = entries.first(where: { $0.peerID == me }), mine.version != self.record.version || self.recordUnsent,
            self.updatedForRoster != version, let room, let token
        {
            self.updatedForRoster = version
            self.recordUnsent = false
            self.record.version = max(self.record.version, mine.version &+ 1)
            let id = self.random.next()
            self.outbox.append((self.rendezvousAddress, RendezvousMessage.update(request: id, room: room, token: token, record: self.record).encoded))
        }
    }

    private mutating func takeTicket(_ ticket: [UInt8], now: NIODeadline) {
        guard ticket.count == RelayTicket.size, ticket != self.ticket else { return }
        self.ticket = ticket
        // The expiry, read without the issuer's key (the relay checks the signature).
        var buffer = ByteBuffer(bytes: ticket)
        buffer.moveReaderIndex(forwardBy: 1 + 8 + 4)
        self.ticketExpires = buffer.readInteger(as: UInt64.self) ?? 0
        self.allocate(now: now)
    }

    private mutating func handleRelay(_ message: RelayMessage, now: NIODeadline) {
        switch message {
        case .allocated:
            self.allocation = nil
            self.nextAllocation = now + self.configuration.timing.relayKeepalive
            if !self.relayReady {
                self.relayReady = true
                self.events.append(.relayReady)
                while let (peer, datagram) = self.waitingForRelay.popFirst() { self.carry(datagram, to: peer) }
            }
        case .refused(let reason):
            self.allocation = nil
            // An expired ticket: the next refresh asks for a new one; otherwise try again later.
            if reason == .expired { self.ticketExpires = 0 }
            self.nextAllocation = now + self.configuration.timing.relayKeepalive
        case .allocate, .data:
            break
        }
    }

    private mutating func allocate(now: NIODeadline) {
        guard let relay = self.relayAddress, !self.ticket.isEmpty,
            let message = try? RelayMessage.allocation(ticket: self.ticket, timestampMilliseconds: self.clock.milliseconds(at: now), holder: self.holder)
        else { return }
        let bytes = message.encoded
        self.allocation = Pending(id: 0, bytes: bytes, destination: relay, nextSend: now + self.configuration.timing.initialRetransmit, interval: self.configuration.timing.initialRetransmit)
        self.outbox.append((relay, bytes))
        self.nextAllocation = nil
    }

    private mutating func startSTUN(now: NIODeadline) {
        guard self.reflexiveAddress == nil, self.stunTransaction == nil else { return }
        self.stunTries = 0
        self.sendSTUN(now: now)
    }

    private mutating func sendSTUN(now: NIODeadline) {
        let (request, id) = STUNBinding.request(random: &self.random)
        self.stunTransaction = id
        self.stunTries += 1
        self.outbox.append((self.rendezvousAddress, request))
        self.stunDue = self.stunTries < 5 ? now + .milliseconds(250 << Int64(self.stunTries)) : nil
    }

    // MARK: - Registration

    private mutating func register(now: NIODeadline) {
        let id = self.random.next()
        let holderKey = Array(self.holder.publicKey.rawRepresentation)
        let message: RendezvousMessage
        switch (self.configuration.request, self.code) {
        case (_, let code?):
            message = .join(request: id, sessionKey: self.configuration.sessionKey, code: code, holderKey: holderKey, record: self.record)
        case (.create, nil):
            message = .create(request: id, sessionKey: self.configuration.sessionKey, holderKey: holderKey, record: self.record)
        case (.join(let code), nil):
            message = .join(request: id, sessionKey: self.configuration.sessionKey, code: code, holderKey: holderKey, record: self.record)
        }
        self.registration = self.pending(message, id: id, to: self.rendezvousAddress, now: now)
    }

    private mutating func reregister(now: NIODeadline) {
        self.phase = .registering(since: now)
        self.refreshDue = nil
        self.fetches.removeAll()
        self.register(now: now)
    }

    private mutating func pending(_ message: RendezvousMessage, id: UInt64, to destination: SocketAddress, now: NIODeadline) -> Pending {
        let bytes = message.encoded
        self.outbox.append((destination, bytes))
        let interval = self.configuration.timing.initialRetransmit
        return Pending(id: id, bytes: bytes, destination: destination, nextSend: now + interval, interval: interval)
    }

    private mutating func finish(_ event: RoomEvent) {
        guard self.phase != .done else { return }
        self.phase = .done
        self.registration = nil
        self.fetches.removeAll()
        self.leaveRequest = nil
        self.refreshDue = nil
        self.allocation = nil
        self.nextAllocation = nil
        self.stunDue = nil
        self.relayReady = false
        self.waitingForRelay.removeAll()
        self.events.append(event)
    }

    // MARK: - Time

    package mutating func handleTimeout(now: NIODeadline) {
        let timing = self.configuration.timing
        if let retryAt, retryAt <= now {
            self.retryAt = nil
            self.register(now: now)
        }
        if case .registering(let since) = self.phase, self.registration != nil {
            // Only a first registration gives up. Once in the room, a rendezvous that went silent
            // is asked again and again (at the longest retransmission interval): the members'
            // direct paths and links do not depend on it, and it may come back.
            if self.code == nil, since + timing.registrationTimeout <= now {
                self.finish(.failed(.rendezvousUnreachable))
                return
            }
            // Each instance gets a fair share of the time before the next is tried.
            let share = TimeAmount.nanoseconds(timing.registrationTimeout.nanoseconds / Int64(max(1, self.configuration.rendezvous.count)))
            if self.configuration.rendezvous.count > 1, now - self.lastHeard >= share {
                self.lastHeard = now
                self.instance += 1
                self.register(now: now)
            }
        }
        if self.phase == .member, now - self.lastHeard >= timing.silenceLimit {
            // The rendezvous is silent: register again, with the next instance if there is one.
            self.instance += 1
            self.lastHeard = now
            self.events.append(.rendezvousLost)
            self.reregister(now: now)
        }
        if let due = self.refreshDue, due <= now, self.phase == .member, let room, let token {
            let wantsTicket = self.relayAddress != nil && self.ticketExpires < self.clock.milliseconds(at: now + .minutes(3))
            let message = RendezvousMessage.refresh(request: self.random.next(), room: room, token: token, rosterVersion: self.rosterVersion, wantsTicket: wantsTicket)
            self.outbox.append((self.rendezvousAddress, message.encoded))
            self.refreshDue = now + timing.refreshInterval
        }
        Self.repeatIfDue(&self.registration, now: now, timing: timing, into: &self.outbox)
        Self.repeatIfDue(&self.leaveRequest, now: now, timing: timing, into: &self.outbox)
        if self.phase == .leaving, let request = self.leaveRequest, request.interval >= timing.maximumRetransmit {
            // Nobody answers the goodbye: the rendezvous times the member out instead.
            self.finish(.left)
        }
        for peer in self.fetches.keys.sorted() {
            Self.repeatIfDue(&self.fetches[peer], now: now, timing: timing, into: &self.outbox)
        }
        Self.repeatIfDue(&self.allocation, now: now, timing: timing, into: &self.outbox)
        if let next = self.nextAllocation, next <= now { self.allocate(now: now) }
        if let due = self.stunDue, due <= now { self.sendSTUN(now: now) }
    }

    private static func repeatIfDue(_ pending: inout Pending?, now: NIODeadline, timing: Timing, into outbox: inout Deque<(SocketAddress, ByteBuffer)>) {
        guard var request = pending, request.nextSend <= now else { return }
        outbox.append((request.destination, request.bytes))
        request.interval = min(request.interval * 2, timing.maximumRetransmit)
        request.nextSend = now + request.interval
        pending = request
    }

    package mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        guard let (destination, bytes) = self.outbox.popFirst() else { return nil }
        buffer.writeImmutableBuffer(bytes)
        return destination
    }

    package mutating func pollEvent() -> RoomEvent? {
        self.events.popFirst()
    }

    package var nextDeadline: NIODeadline? {
        guard self.phase != .done, self.phase != .idle else { return nil }
        var deadline: NIODeadline? = self.retryAt
        deadline = deadline.earliest(self.registration?.nextSend)
        deadline = deadline.earliest(self.leaveRequest?.nextSend)
        deadline = deadline.earliest(self.refreshDue)
        deadline = deadline.earliest(self.allocation?.nextSend)
        deadline = deadline.earliest(self.nextAllocation)
        deadline = deadline.earliest(self.stunDue)
        for pending in self.fetches.values { deadline = deadline.earliest(pending.nextSend) }
        if case .registering(let since) = self.phase, self.code == nil {
            deadline = deadline.earliest(since + self.configuration.timing.registrationTimeout)
        }
        if self.phase == .member { deadline = deadline.earliest(self.lastHeard + self.configuration.timing.silenceLimit) }
        return deadline
    }
}
