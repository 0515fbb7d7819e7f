import Crypto
import DequeModule
@_spi(Machine) import GameKitMachine
import NIOCore

/// The rooms of one rendezvous, in memory (PROTOCOL §18.3, §18.4): registrations, rosters pushed
/// to members when they change, member and room expiry, and the limits on guessing codes.
/// Sans-I/O: ``RendezvousServer`` hands it requests and the time and takes its answers.
struct RoomService {
    struct Member {
        var record: MemberRecord
        var token: MemberToken
        var holderKey: [UInt8]
        var address: SocketAddress
        /// Whether a request with the token came from `address` (rosters are pushed only then:
        /// a forged registration cannot make the rendezvous send to someone else).
        var validated = false
        var lastSeen: NIODeadline
        /// The roster version the member last acknowledged.
        var knownVersion: UInt32 = 0
        var pushesLeft = 0
        var nextPush: NIODeadline?
    }

    struct Room {
        let handle: RoomHandle
        let sessionKey: UInt64
        let code: RoomCode
        var members: [UInt32: Member] = [:]
        var version: UInt32 = 1
        var emptySince: NIODeadline?
        var joins: TokenBucket
        /// The relay its members use (nil: this instance's configured one).
        var relay: SocketAddress?
        /// Members registered with other instances (a shared store's rooms only).
        var remote: [UInt32: SharedRoom.Member] = [:]

        var isEmpty: Bool { self.members.isEmpty && self.remote.isEmpty }
        var memberCount: Int { self.members.count + self.remote.keys.filter { self.members[$0] == nil }.count }
    }

    /// A join waiting for the shared store to say which room has its code.
    struct ParkedJoin {
        var request: UInt64
        var sessionKey: UInt64
        var code: RoomCode
        var holderKey: [UInt8]
        var record: MemberRecord
        var source: SocketAddress
    }

    struct CodeKey: Hashable {
        var sessionKey: UInt64
        var code: RoomCode
    }

    struct AnswerKey: Hashable {
        var source: SocketAddress
        var request: UInt64
    }

    /// Delays between a roster push and its repeats, until the member acknowledges it.
    static let pushDelays: [TimeAmount] = [.milliseconds(250), .milliseconds(500), .seconds(1)]
    /// How long an answer to a registration is kept for the request's repeats.
    static let answerLifetime = TimeAmount.seconds(10)
    static let maximumRememberedAnswers = 10_000

    let configuration: RendezvousConfiguration
    var rooms: [RoomHandle: Room] = [:]
    var codes: [CodeKey: RoomHandle] = [:]
    var tokens: [MemberToken: (room: RoomHandle, peerID: UInt32)] = [:]
    private var wrongCodesBySource: [SocketAddress: TokenBucket] = [:]
    private var wrongCodesBySession: [UInt64: TokenBucket] = [:]
    private var answers: [AnswerKey: (answer: ByteBuffer, expires: NIODeadline)] = [:]
    private var answerOrder = Deque<(AnswerKey, NIODeadline)>()
    private var random: MachineRandom
    /// Answers and pushes to send.
    var outbox = Deque<(SocketAddress, ByteBuffer)>()
    var events = Deque<RendezvousEvent>()
    var statistics = RendezvousStatistics()
    /// Signs relay tickets (nil: this rendezvous hands out none).
    let tickets: TicketIssuer?
    /// Rooms with a roster push due or being repeated (their members' `nextPush`).
    private var pushing: Set<RoomHandle> = []
    /// Joins waiting for the shared store, by lookup ID.
    var parked: [UInt64: ParkedJoin] = [:]
    var nextLookup: UInt64 = 0

    var isShared: Bool { self.configuration.sharedInstance != nil }

    init(configuration: RendezvousConfiguration, tickets: TicketIssuer?, random: MachineRandom) {
        self.configuration = configuration
        self.tickets = tickets
        self.random = random
    }

    var memberCount: Int { self.rooms.values.reduce(0) { $0 + $1.members.count } }

    // MARK: - Requests

    mutating func handle(_ message: RendezvousMessage, from source: SocketAddress, now: NIODeadline) {
        switch message {
        case .create(let request, let sessionKey, let holderKey, let record):
            if self.repeatAnswer(request, to: source) { return }
            self.create(request, sessionKey: sessionKey, holderKey: holderKey, record: record, from: source, now: now)
        case .join(let request, let sessionKey, let code, let holderKey, let record):
            if self.repeatAnswer(request, to: source) { return }
            self.join(request, sessionKey: sessionKey, code: code, holderKey: holderKey, record: record, from: source, now: now)
        case .refresh(let request, let room, let token, let known, let wantsTicket):
            guard let (handle, peerID) = self.member(token, in: room, request: request, from: source) else { return }
            self.touch(handle, peerID, from: source, now: now)
            self.rooms[handle]!.members[peerID]!.knownVersion = max(self.rooms[handle]!.members[peerID]!.knownVersion, known)
            self.answerRoster(request, handle, to: peerID, ticket: wantsTicket, now: now)
        case .leave(let request, let room, let token):
            guard let (handle, peerID) = self.member(token, in: room, request: request, from: source) else { return }
            self.remove(peerID, from: handle, timedOut: false, now: now)
            self.send(.left(request: request, room: handle), to: source)
        case .fetch(let request, let room, let token, let peerID):
            guard let (handle, member) = self.member(token, in: room, request: request, from: source) else { return }
            self.touch(handle, member, from: source, now: now)
            if let record = self.rooms[handle]!.members[peerID]?.record ?? self.rooms[handle]!.remote[peerID]?.record {
                self.send(.member(request: request, room: handle, record: record), to: source)
            } else {
                self.answerRoster(request, handle, to: member, ticket: false, now: now)
            }
        case .update(let request, let room, let token, let record):
            guard let (handle, peerID) = self.member(token, in: room, request: request, from: source) else { return }
            guard record.peerID == peerID else {
                self.refuse(request, .malformed, to: source)
                return
            }
            self.touch(handle, peerID, from: source, now: now)
            var record = record
            // The member's version, or past the stored one (both sides then agree on it).
            record.version = max(record.version, self.rooms[handle]!.members[peerID]!.record.version &+ 1)
            self.rooms[handle]!.members[peerID]!.record = record
            if self.isShared { self.events.append(.store(.putMember(handle, record, holderKey: self.rooms[handle]!.members[peerID]!.holderKey))) }
            self.rosterChanged(handle, now: now)
            self.answerRoster(request, handle, to: peerID, ticket: false, now: now)
        case .room, .roster, .member, .refused, .left:
            // Answers are never requests: dropped without a reply.
            self.statistics.droppedMalformed += 1
        }
    }

    private mutating func create(_ request: UInt64, sessionKey: UInt64, holderKey: [UInt8], record: MemberRecord, from source: SocketAddress, now: NIODeadline) {
        guard self.rooms.count < self.configuration.maximumRooms else {
            self.refuse(request, .busy, to: source, retryAfter: 5_000)
            return
        }
        var code = RoomCode.random(using: &self.random)
        while self.codes[CodeKey(sessionKey: sessionKey, code: code)] != nil { code = RoomCode.random(using: &self.random) }
        var handle = RoomHandle(rawValue: self.random.next())
        while self.rooms[handle] != nil { handle = RoomHandle(rawValue: self.random.next()) }
        self.addRoom(handle, sessionKey: sessionKey, code: code, relay: self.configuration.relayAddress)
        self.statistics.roomsCreated += 1
        self.events.append(.roomCreated(handle, code))
        if self.isShared {
            self.events.append(.store(.createRoom(handle, sessionKey: sessionKey, code: code, relay: self.configuration.relayAddress)))
        }
        self.admit(request, record: record, holderKey: holderKey, to: handle, from: source, now: now)
    }

    private mutating func join(
        _ request: UInt64, sessionKey: UInt64, code: RoomCode, holderKey: [UInt8], record: MemberRecord, from source: SocketAddress, now: NIODeadline
    ) {
        guard let handle = self.codes[CodeKey(sessionKey: sessionKey, code: code)] else {
            if self.isShared {
                // Another instance may have the room: ask the store, answer when it has.
                self.nextLookup &+= 1
                self.parked[self.nextLookup] = ParkedJoin(
                    request: request, sessionKey: sessionKey, code: code, holderKey: holderKey, record: record, source: source)
                self.events.append(.store(.lookup(self.nextLookup, sessionKey: sessionKey, code: code)))
                return
            }
            self.wrongCode(request, sessionKey: sessionKey, from: source, now: now)
            return
        }
        self.join(request, to: handle, holderKey: holderKey, record: record, from: source, now: now)
    }

    /// A join naming no room: the source and the session each pay a guess.
    mutating func wrongCode(_ request: UInt64, sessionKey: UInt64, from source: SocketAddress, now: NIODeadline) {
        self.statistics.wrongCodes += 1
        // A wrong code costs the source and the session a guess each; with either spent, the
        // answer says to wait rather than "no such room".
        var bySource = self.wrongCodesBySource[source.withoutPort] ?? TokenBucket(rate: self.configuration.wrongCodesPerMinutePerSource / 60, burst: 5)
        var bySession = self.wrongCodesBySession[sessionKey] ?? TokenBucket(rate: self.configuration.wrongCodesPerMinutePerSession / 60, burst: 20)
        let allowed = bySource.take(now: now) && bySession.take(now: now)
        self.wrongCodesBySource[source.withoutPort] = bySource
        self.wrongCodesBySession[sessionKey] = bySession
        self.refuse(request, allowed ? .noSuchRoom : .rateLimited, to: source, retryAfter: allowed ? 0 : 10_000)
    }

    /// A join naming a known room.
    mutating func join(_ request: UInt64, to handle: RoomHandle, holderKey: [UInt8], record: MemberRecord, from source: SocketAddress, now: NIODeadline) {
        if self.wrongCodesBySource[source.withoutPort].map({ var bucket = $0; return !bucket.hasTokens(now: now) }) ?? false {
            // A source out of guesses cannot try even a right code until it has one again.
            self.refuse(request, .rateLimited, to: source, retryAfter: 10_000)
            return
        }
        guard self.rooms[handle]!.joins.take(now: now) else {
            self.refuse(request, .rateLimited, to: source, retryAfter: 1_000)
            return
        }
        self.admit(request, record: record, holderKey: holderKey, to: handle, from: source, now: now)
    }

    /// Adds (or, for the same holder key, re-registers) a member and answers with the room.
    mutating func admit(_ request: UInt64, record: MemberRecord, holderKey: [UInt8], to handle: RoomHandle, from source: SocketAddress, now: NIODeadline) {
        let room = self.rooms[handle]!
        if let elsewhere = room.remote[record.peerID], elsewhere.holderKey != holderKey {
            self.refuse(request, .peerIDTaken, to: source)
            return
        }
        if let existing = room.members[record.peerID] {
            guard existing.holderKey == holderKey else {
                self.refuse(request, .peerIDTaken, to: source)
                return
            }
            // The same member registering again (its rendezvous instance died, or its answer
            // was lost and the repeat came from a new address): the old token ends.
            self.tokens[existing.token] = nil
        } else if room.remote[record.peerID] == nil, room.memberCount >= min(self.configuration.maximumMembersPerRoom, RendezvousMessage.maximumMembers) {
            self.refuse(request, .roomFull, to: source)
            return
        }
        let token = MemberToken(bytes: self.random.bytes(16))!
        var record = record
        record.version = max(record.version, (room.members[record.peerID]?.record.version ?? 0) &+ 1)
        let isNew = room.members[record.peerID] == nil && room.remote[record.peerID] == nil
        record.version = max(record.version, (room.remote[record.peerID]?.record.version ?? 0) &+ 1)
        self.rooms[handle]!.remote[record.peerID] = nil
        self.rooms[handle]!.members[record.peerID] = Member(record: record, token: token, holderKey: holderKey, address: source, lastSeen: now)
        if self.isShared { self.events.append(.store(.putMember(handle, record, holderKey: holderKey))) }
        self.rooms[handle]!.emptySince = nil
        self.tokens[token] = (handle, record.peerID)
        if isNew {
            self.statistics.joins += 1
            self.events.append(.memberJoined(handle, peerID: record.peerID, name: record.displayName))
        }
        self.rosterChanged(handle, now: now)
        let ticket = self.tickets?.issue(room: handle, peerID: record.peerID, holderKey: holderKey, now: now) ?? []
        let answer = RendezvousMessage.room(
            request: request, code: room.code, room: handle, token: token,
            memberTimeoutSeconds: UInt16(clamping: self.configuration.memberTimeout.nanoseconds / 1_000_000_000),
            relay: self.tickets == nil ? nil : room.relay, ticket: ticket)
        self.send(answer, to: source, rememberAs: request, now: now)
    }

    // MARK: - Members

    /// The member `token` names in `room`, or nil after refusing the request.
    private mutating func member(_ token: MemberToken, in room: RoomHandle, request: UInt64, from source: SocketAddress) -> (RoomHandle, UInt32)? {
        guard let (handle, peerID) = self.tokens[token], handle == room, self.rooms[handle]?.members[peerID] != nil else {
            self.statistics.droppedUnauthenticated += 1
            self.refuse(request, .unknownMember, to: source)
            return nil
        }
        return (handle, peerID)
    }

    private mutating func touch(_ handle: RoomHandle, _ peerID: UInt32, from source: SocketAddress, now: NIODeadline) {
        self.rooms[handle]!.members[peerID]!.lastSeen = now
        // The token proves the sender is the member: its address now (after a NAT rebinding too)
        // may receive pushes.
        self.rooms[handle]!.members[peerID]!.address = source
        self.rooms[handle]!.members[peerID]!.validated = true
    }

    mutating func remove(_ peerID: UInt32, from handle: RoomHandle, timedOut: Bool, now: NIODeadline) {
        guard let member = self.rooms[handle]?.members.removeValue(forKey: peerID) else { return }
        self.tokens[member.token] = nil
        self.events.append(.memberLeft(handle, peerID: peerID, timedOut: timedOut))
        if self.isShared { self.events.append(.store(.removeMember(handle, peerID: peerID))) }
        if self.rooms[handle]!.isEmpty { self.rooms[handle]!.emptySince = now }
        self.rosterChanged(handle, now: now)
    }

    /// The roster grew a version: every validated member is pushed the new one.
    mutating func rosterChanged(_ handle: RoomHandle, now: NIODeadline) {
        self.pushing.insert(handle)
        self.rooms[handle]!.version &+= 1
        for peerID in self.rooms[handle]!.members.keys {
            self.rooms[handle]!.members[peerID]!.pushesLeft = Self.pushDelays.count + 1
            self.rooms[handle]!.members[peerID]!.nextPush = now
        }
    }

    private func roster(of handle: RoomHandle) -> [RendezvousMessage.RosterEntry] {
        let room = self.rooms[handle]!
        let local = room.members.values.map { RendezvousMessage.RosterEntry(peerID: $0.record.peerID, version: $0.record.version) }
        let remote = room.remote.values.filter { room.members[$0.record.peerID] == nil }
            .map { RendezvousMessage.RosterEntry(peerID: $0.record.peerID, version: $0.record.version) }
        return (local + remote).sorted { $0.peerID < $1.peerID }
    }

    private mutating func answerRoster(_ request: UInt64, _ handle: RoomHandle, to peerID: UInt32, ticket: Bool, now: NIODeadline) {
        let member = self.rooms[handle]!.members[peerID]!
        let ticketBytes = ticket ? (self.tickets?.issue(room: handle, peerID: peerID, holderKey: member.holderKey, now: now) ?? []) : []
        let version = self.rooms[handle]!.version
        let relay = self.tickets == nil ? nil : self.rooms[handle]!.relay
        self.send(.roster(request: request, room: handle, version: version, relay: relay, members: self.roster(of: handle), ticket: ticketBytes), to: member.address)
    }

    // MARK: - Time

    /// Pushes what is due; with `sweep`, first removes silent members, expired rooms and
    /// answers, and forgets refilled guess budgets (every room is visited then only).
    mutating func handleTimeout(now: NIODeadline, sweep: Bool) {
        if sweep { self.sweep(now: now) }
        for handle in self.pushing.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard self.rooms[handle] != nil else {
                self.pushing.remove(handle)
                continue
            }
            self.pushRosters(of: handle, now: now)
            if !self.rooms[handle]!.members.values.contains(where: { $0.nextPush != nil }) { self.pushing.remove(handle) }
        }
    }

    private mutating func sweep(now: NIODeadline) {
        for handle in self.rooms.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            let timeout = self.configuration.memberTimeout
            for (peerID, member) in self.rooms[handle]!.members.sorted(by: { $0.key < $1.key }) where member.lastSeen + timeout <= now {
                self.remove(peerID, from: handle, timedOut: true, now: now)
            }
            if let since = self.rooms[handle]!.emptySince, since + self.configuration.roomIdleLifetime <= now {
                let room = self.rooms.removeValue(forKey: handle)!
                self.codes[CodeKey(sessionKey: room.sessionKey, code: room.code)] = nil
                self.events.append(.roomExpired(handle))
            }
        }
        while let (key, expires) = self.answerOrder.first, expires <= now {
            self.answerOrder.removeFirst()
            if self.answers[key]?.expires == expires { self.answers[key] = nil }
        }
        // Guess budgets that have refilled carry no information: dropped.
        self.wrongCodesBySource = self.wrongCodesBySource.filter { var bucket = $0.value; return !bucket.isFull(now: now) }
        self.wrongCodesBySession = self.wrongCodesBySession.filter { var bucket = $0.value; return !bucket.isFull(now: now) }
    }

    private mutating func pushRosters(of handle: RoomHandle, now: NIODeadline) {
        let version = self.rooms[handle]!.version
        for peerID in self.rooms[handle]!.members.keys.sorted() {
            let member = self.rooms[handle]!.members[peerID]!
            guard let due = member.nextPush, due <= now else { continue }
            guard member.validated, member.knownVersion < version, member.pushesLeft > 0 else {
                self.rooms[handle]!.members[peerID]!.nextPush = nil
                continue
            }
            let relay = self.tickets == nil ? nil : self.rooms[handle]!.relay
            self.send(.roster(request: 0, room: handle, version: version, relay: relay, members: self.roster(of: handle), ticket: []), to: member.address)
            let left = member.pushesLeft - 1
            self.rooms[handle]!.members[peerID]!.pushesLeft = left
            let delay = Self.pushDelays[min(Self.pushDelays.count - left, Self.pushDelays.count - 1)]
            self.rooms[handle]!.members[peerID]!.nextPush = left > 0 ? now + delay : nil
        }
    }

    /// The next push due, if any (the sweep for expiry runs on the server's own timer).
    /// Only rooms with a push under way are looked at: the relay reads this after every
    /// datagram it forwards.
    var nextPush: NIODeadline? {
        var earliest: NIODeadline?
        for handle in self.pushing {
            guard let room = self.rooms[handle] else { continue }
            for member in room.members.values { earliest = earliest.earliest(member.nextPush) }
        }
        return earliest
    }

    // MARK: - Answers

    private mutating func repeatAnswer(_ request: UInt64, to source: SocketAddress) -> Bool {
        guard let answer = self.answers[AnswerKey(source: source, request: request)] else { return false }
        self.outbox.append((source, answer.answer))
        return true
    }

    mutating func refuse(_ request: UInt64, _ reason: RendezvousRefusal, to source: SocketAddress, retryAfter: UInt32 = 0) {
        self.events.append(.refused(source, reason))
        self.send(.refused(request: request, reason: reason, retryAfterMilliseconds: retryAfter), to: source)
    }

    private mutating func send(_ message: RendezvousMessage, to destination: SocketAddress, rememberAs request: UInt64? = nil, now: NIODeadline? = nil) {
        let bytes = message.encoded
        self.outbox.append((destination, bytes))
        if let request, let now, self.answers.count < Self.maximumRememberedAnswers {
            let key = AnswerKey(source: destination, request: request)
            let expires = now + Self.answerLifetime
            self.answers[key] = (bytes, expires)
            self.answerOrder.append((key, expires))
        }
    }
}

extension SocketAddress {
    /// The address with port 0: one source, whatever port it sends from.
    var withoutPort: SocketAddress {
        var copy = self
        copy.port = 0
        return copy
    }
}
