import Crypto
import DequeModule
@_spi(Machine) import GameKitMachine
import NIOCore

/// A relay (PROTOCOL §18.5): forwards opaque transport datagrams between members of one room
/// that hold tickets signed by a rendezvous, within each ticket's time and byte limits and a
/// rate per member. It keeps no room list: a ticket says which room and member it is for.
struct RelayService {
    struct Allocation {
        var address: SocketAddress
        var ticketExpires: UInt64
        var holderKey: [UInt8]
        var bytesLeft: UInt64
        var lastTimestamp: UInt64
        var rate: TokenBucket
    }

    struct Key: Hashable, Comparable {
        var room: UInt64
        var peerID: UInt32
        static func < (a: Key, b: Key) -> Bool { (a.room, a.peerID) < (b.room, b.peerID) }
    }

    /// How far an allocation's timestamp may be from the relay's clock.
    static let timestampTolerance: UInt64 = 60_000

    let configuration: RendezvousConfiguration
    let issuers: [Curve25519.Signing.PublicKey]
    let clock: WallClock
    private(set) var allocations: [Key: Allocation] = [:]
    private var byAddress: [SocketAddress: Key] = [:]
    var outbox = Deque<(SocketAddress, ByteBuffer)>()
    var events = Deque<RendezvousEvent>()
    var statistics = RendezvousStatistics()

    init(configuration: RendezvousConfiguration, issuers: [Curve25519.Signing.PublicKey], clock: WallClock) {
        self.configuration = configuration
        self.issuers = issuers
        self.clock = clock
    }

    /// A relay control message (an allocation).
    mutating func handleControl(_ datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        guard case .allocate(let timestamp, let ticketBytes, let signature)? = try? RelayMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let wall = self.clock.milliseconds(at: now)
        let ticket: RelayTicket
        do {
            ticket = try RelayTicket.verify(ticketBytes, issuers: self.issuers, nowMilliseconds: wall)
        } catch {
            self.statistics.droppedUnauthenticated += 1
            self.reply(.refused(error == .expired ? .expired : .badTicket), to: source)
            return
        }
        guard RelayMessage.isSignedByHolder(ticket, timestamp: timestamp, ticketBytes: ticketBytes, signature: signature) else {
            self.statistics.droppedUnauthenticated += 1
            self.reply(.refused(.badTicket), to: source)
            return
        }
        let key = Key(room: ticket.room.rawValue, peerID: ticket.peerID)
        let skew = timestamp > wall ? timestamp - wall : wall - timestamp
        // A copy of an earlier allocation (or one from a badly wrong clock) cannot move it.
        if skew > Self.timestampTolerance || (self.allocations[key].map { timestamp <= $0.lastTimestamp && $0.address != source } ?? false) {
            self.reply(.refused(.staleRequest), to: source)
            return
        }
        var allocation = self.allocations[key] ?? Allocation(
            address: source, ticketExpires: 0, holderKey: ticket.holderKey, bytesLeft: 0, lastTimestamp: 0,
            rate: TokenBucket(rate: self.configuration.relayBytesPerSecond, burst: self.configuration.relayBytesPerSecond / 4))
        if allocation.ticketExpires != ticket.expiresAt || allocation.holderKey != ticket.holderKey {
            // A new ticket: a new byte budget.
            allocation.bytesLeft = ticket.byteLimit
            allocation.ticketExpires = ticket.expiresAt
            allocation.holderKey = ticket.holderKey
        }
        allocation.lastTimestamp = max(allocation.lastTimestamp, timestamp)
        if allocation.address != source || self.allocations[key] == nil {
            self.byAddress[allocation.address] = nil
            allocation.address = source
            self.events.append(.relayAllocated(ticket.room, peerID: ticket.peerID, address: source))
        }
        self.allocations[key] = allocation
        self.byAddress[source] = key
        let seconds = UInt32(clamping: (ticket.expiresAt - wall) / 1000)
        self.reply(.allocated(expiresInSeconds: seconds, bytesLeft: allocation.bytesLeft), to: source)
    }

    /// A datagram to carry: forwarded to the named member of the sender's room, with the
    /// sender's peer ID in place of the destination's.
    mutating func handleData(_ datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        guard datagram.readableBytes > RelayMessage.dataHeaderSize,
            datagram.getInteger(at: datagram.readerIndex + 1, as: UInt8.self) == 0,
            let destinationPeer = datagram.getInteger(at: datagram.readerIndex + 2, as: UInt32.self)
        else {
            self.statistics.droppedMalformed += 1
            return
        }
        guard let key = self.byAddress[source], var sender = self.allocations[key], sender.ticketExpires > self.clock.milliseconds(at: now) else {
            self.statistics.droppedUnauthenticated += 1
            return
        }
        let size = UInt64(datagram.readableBytes)
        guard sender.bytesLeft >= size else {
            self.statistics.droppedUndeliverable += 1
            return
        }
        guard sender.rate.take(Double(size), now: now) else {
            self.allocations[key] = sender
            self.statistics.droppedRateLimited += 1
            return
        }
        sender.bytesLeft -= size
        self.allocations[key] = sender
        guard let receiver = self.allocations[Key(room: key.room, peerID: destinationPeer)] else {
            self.statistics.droppedUndeliverable += 1
            return
        }
        var forwarded = datagram
        forwarded.setInteger(key.peerID, at: forwarded.readerIndex + 2)
        self.outbox.append((receiver.address, forwarded))
        self.statistics.relayedDatagrams += 1
        self.statistics.relayedBytes += size
    }

    /// Forgets allocations whose ticket has expired.
    mutating func handleTimeout(now: NIODeadline) {
        let wall = self.clock.milliseconds(at: now)
        for (key, allocation) in self.allocations.sorted(by: { $0.key < $1.key }) where allocation.ticketExpires <= wall {
            self.allocations[key] = nil
            self.byAddress[allocation.address] = nil
        }
    }

    private mutating func reply(_ message: RelayMessage, to destination: SocketAddress) {
        self.outbox.append((destination, message.encoded))
    }
}
