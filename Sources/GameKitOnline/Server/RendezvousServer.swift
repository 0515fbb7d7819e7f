import Crypto
import DequeModule
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitTraversal
import NIOCore

/// A rendezvous and relay on one UDP socket, as a datagram machine (PROTOCOL §18): STUN binding
/// answers (a member's server-reflexive address), rooms, and relaying, told apart by the first
/// byte. `gk-rendezvous` runs it on the package's driver; tests run it on the virtual network.
package struct RendezvousServer: DatagramMachine {
    package typealias Event = RendezvousEvent

    /// How often members and rooms are checked for expiry.
    static let sweepInterval = TimeAmount.milliseconds(500)
    /// Sources remembered for rate limiting, at most (the least recently refilled are dropped).
    static let maximumTrackedSources = 100_000

    package let configuration: RendezvousConfiguration
    /// The public key relays check this rendezvous's tickets with.
    package let publicKey: Curve25519.Signing.PublicKey
    private var rooms: RoomService
    private var relay: RelayService
    private var requestBudgets: [SocketAddress: TokenBucket] = [:]
    private var stunBudgets: [SocketAddress: TokenBucket] = [:]
    private var outbox = Deque<(SocketAddress, ByteBuffer)>()
    private var statistics = RendezvousStatistics()
    private var nextSweep: NIODeadline

    /// A rendezvous signing tickets with `signingKey`; its relay accepts tickets of
    /// `otherIssuers` too (rendezvous instances that share it).
    package init(
        configuration: RendezvousConfiguration, signingKey: Curve25519.Signing.PrivateKey,
        otherIssuers: [Curve25519.Signing.PublicKey] = [], clock: WallClock, now: NIODeadline, random: MachineRandom = .system()
    ) {
        var random = random
        self.configuration = configuration
        self.publicKey = signingKey.publicKey
        let issuer = configuration.relays || configuration.relayAddress != nil
            ? TicketIssuer(key: signingKey, clock: clock, lifetime: configuration.ticketLifetime, byteLimit: configuration.ticketByteLimit)
            : nil
        self.rooms = RoomService(configuration: configuration, tickets: issuer, random: random.split())
        self.relay = RelayService(configuration: configuration, issuers: [signingKey.publicKey] + otherIssuers, clock: clock)
        self.nextSweep = now + Self.sweepInterval
    }

    /// The counters, with the current numbers of rooms, members and allocations.
    package var currentStatistics: RendezvousStatistics {
        var total = self.statistics
        for part in [self.rooms.statistics, self.relay.statistics] {
            total.roomsCreated += part.roomsCreated
            total.joins += part.joins
            total.wrongCodes += part.wrongCodes
            total.relayedDatagrams += part.relayedDatagrams
            total.relayedBytes += part.relayedBytes
            total.droppedMalformed += part.droppedMalformed
            total.droppedUnauthenticated += part.droppedUnauthenticated
            total.droppedRateLimited += part.droppedRateLimited
            total.droppedUndeliverable += part.droppedUndeliverable
        }
        total.rooms = self.rooms.rooms.count
        total.members = self.rooms.memberCount
        total.allocations = self.relay.allocations.count
        return total
    }

    /// The shared store's news (an instance with ``RendezvousConfiguration/sharedInstance``).
    package mutating func apply(_ input: SharedRoomsInput, now: NIODeadline) {
        self.rooms.apply(input, now: now)
    }

    // MARK: - DatagramMachine

    package mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        guard let first = datagram.getInteger(at: datagram.readerIndex, as: UInt8.self) else {
            self.statistics.droppedMalformed += 1
            return
        }
        if first == OnlinePacketType.relayData.rawValue {
            // The hot path: no per-source request budget (the relay's byte rate applies).
            if self.configuration.relays { self.relay.handleData(datagram, from: source, now: now) } else { self.statistics.droppedMalformed += 1 }
            return
        }
        if OnlinePacketType.isSTUN(firstByte: first) {
            guard Self.take(&self.stunBudgets, source.withoutPort, rate: self.configuration.stunAnswersPerSecondPerSource, now: now) else {
                self.statistics.droppedRateLimited += 1
                return
            }
            guard let answer = STUNBinding.answer(to: datagram, from: source) else {
                self.statistics.droppedMalformed += 1
                return
            }
            self.statistics.stunAnswered += 1
            self.outbox.append((source, answer))
            return
        }
        guard first == OnlinePacketType.rendezvous.rawValue || (first == OnlinePacketType.relayControl.rawValue && self.configuration.relays) else {
            self.statistics.droppedMalformed += 1
            return
        }
        guard Self.take(&self.requestBudgets, source.withoutPort, rate: self.configuration.requestsPerSecondPerSource, now: now) else {
            self.statistics.droppedRateLimited += 1
            return
        }
        if first == OnlinePacketType.relayControl.rawValue {
            self.relay.handleControl(datagram, from: source, now: now)
            return
        }
        do {
            let message = try RendezvousMessage.decode(datagram)
            self.rooms.handle(message, from: source, now: now)
        } catch {
            // Malformed: counted, never answered (an answer could be aimed at a forged source).
            self.statistics.droppedMalformed += 1
        }
    }

    /// Takes one token from `source`'s bucket, creating it full; false when empty.
    private static func take(_ budgets: inout [SocketAddress: TokenBucket], _ source: SocketAddress, rate: Double, now: NIODeadline) -> Bool {
        if budgets.count >= Self.maximumTrackedSources, budgets[source] == nil {
            budgets = budgets.filter { var bucket = $0.value; return !bucket.isFull(now: now) }
            guard budgets.count < Self.maximumTrackedSources else { return false }
        }
        var bucket = budgets[source] ?? TokenBucket(rate: rate, burst: 2 * rate)
        let taken = bucket.take(now: now)
        budgets[source] = bucket
        return taken
    }

    package mutating func handleTimeout(now: NIODeadline) {
        let sweep = now >= self.nextSweep
        if sweep {
            self.nextSweep = now + Self.sweepInterval
            self.relay.handleTimeout(now: now)
            self.requestBudgets = self.requestBudgets.filter { var bucket = $0.value; return !bucket.isFull(now: now) }
            self.stunBudgets = self.stunBudgets.filter { var bucket = $0.value; return !bucket.isFull(now: now) }
        }
        self.rooms.handleTimeout(now: now, sweep: sweep)
    }

    package mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        let next = self.outbox.popFirst() ?? self.rooms.outbox.popFirst() ?? self.relay.outbox.popFirst()
        guard let (destination, bytes) = next else { return nil }
        buffer.writeImmutableBuffer(bytes)
        return destination
    }

    package mutating func pollEvent() -> RendezvousEvent? {
        self.rooms.events.popFirst() ?? self.relay.events.popFirst()
    }

    package var nextDeadline: NIODeadline? {
        NIODeadline?.some(self.nextSweep).earliest(self.rooms.nextPush)
    }
}
