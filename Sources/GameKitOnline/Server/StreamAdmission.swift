import DequeModule
import NIOCore

/// Which TCP streams the rendezvous keeps (PROTOCOL §18.12): a ledger with no I/O. Streams are
/// counted per source (an IPv4 address, or an IPv6 /64, which one subscriber usually holds whole)
/// and in total; a stream must send its first frame soon after it opens and keep sending while
/// it stays. When the total is reached, the stream open longest without a frame makes room for
/// the new one: idle connections an attacker holds are such streams, while a member's stream
/// sends its registration at once, so a member still gets in.
struct StreamAdmission {
    /// The outcome of a new stream.
    enum Admission: Equatable {
        /// Keep it, as `id`; close `evicting` first when there is one.
        case accepted(id: UInt64, evicting: UInt64?)
        case refusedPerSource
        case refusedTotal
    }

    private struct Entry {
        var source: [UInt8]
        var opened: NIODeadline
        var lastFrame: NIODeadline?
    }

    let limits: StreamLimits
    private var entries: [UInt64: Entry] = [:]
    private var perSource: [[UInt8]: Int] = [:]
    /// Streams that have sent no frame yet.
    private var silent: Set<UInt64> = []
    /// The same, oldest first (ids grow with time), with ids no longer silent skipped lazily.
    private var silentOrder = Deque<UInt64>()
    private var nextID: UInt64 = 1
    private(set) var statistics = StreamStatistics()

    init(limits: StreamLimits) {
        self.limits = limits
    }

    /// What a source's streams are counted under: an IPv4 address (also when written as an
    /// IPv4-mapped IPv6 one), or the first 64 bits of an IPv6 address.
    static func sourceKey(_ address: SocketAddress) -> [UInt8] {
        switch address {
        case .v4(let v4):
            return withUnsafeBytes(of: v4.address.sin_addr.s_addr) { Array($0) }
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return Array(bytes[12..<16]) }
            return Array(bytes[0..<8])
        default:
            return []
        }
    }

    /// A stream from `source` opened now.
    mutating func admit(_ source: SocketAddress, now: NIODeadline) -> Admission {
        let key = Self.sourceKey(source)
        guard self.perSource[key, default: 0] < self.limits.perSource else {
            self.statistics.refusedPerSource += 1
            return .refusedPerSource
        }
        var evicting: UInt64?
        if self.entries.count >= self.limits.total {
            while let first = self.silentOrder.first, !self.silent.contains(first) { self.silentOrder.removeFirst() }
            guard let oldest = self.silentOrder.first else {
                self.statistics.refusedTotal += 1
                return .refusedTotal
            }
            self.remove(oldest)
            self.statistics.evicted += 1
            evicting = oldest
        }
        let id = self.nextID
        self.nextID += 1
        self.entries[id] = Entry(source: key, opened: now, lastFrame: nil)
        self.perSource[key, default: 0] += 1
        self.silent.insert(id)
        self.silentOrder.append(id)
        self.statistics.accepted += 1
        self.statistics.open = self.entries.count
        self.statistics.peakOpen = max(self.statistics.peakOpen, self.entries.count)
        return .accepted(id: id, evicting: evicting)
    }

    /// Stream `id` delivered a frame.
    mutating func framed(_ id: UInt64, now: NIODeadline) {
        guard self.entries[id] != nil else { return }
        self.entries[id]!.lastFrame = now
        self.silent.remove(id)
    }

    /// Stream `id` closed (whoever closed it); unknown ids are ignored.
    mutating func closed(_ id: UInt64) {
        self.remove(id)
    }

    /// The streams silent for too long, now forgotten: close them.
    mutating func expire(now: NIODeadline) -> [UInt64] {
        var expired: [UInt64] = []
        for (id, entry) in self.entries {
            if let last = entry.lastFrame {
                if now - last >= self.limits.idleTimeout {
                    expired.append(id)
                    self.statistics.idle += 1
                }
            } else if now - entry.opened >= self.limits.firstFrameTimeout {
                expired.append(id)
                self.statistics.silentAtStart += 1
            }
        }
        for id in expired { self.remove(id) }
        while let first = self.silentOrder.first, !self.silent.contains(first) { self.silentOrder.removeFirst() }
        return expired.sorted()
    }

    private mutating func remove(_ id: UInt64) {
        guard let entry = self.entries.removeValue(forKey: id) else { return }
        self.silent.remove(id)
        let remaining = self.perSource[entry.source, default: 1] - 1
        self.perSource[entry.source] = remaining > 0 ? remaining : nil
        self.statistics.open = self.entries.count
    }
}

/// The rendezvous's limits on TCP streams (PROTOCOL §18.12, ``RendezvousConfiguration/streams``).
public struct StreamLimits: Sendable, Equatable {
    /// Streams at once, all sources together (cut to the file descriptors the process may open,
    /// less a reserve: see ``fitted(toDescriptors:)``).
    public var total = 8192
    /// Streams at once from one IPv4 address or IPv6 /64 (a household, or a school behind one
    /// NAT, whose network blocks UDP).
    public var perSource = 32
    /// How long a new stream may stay silent before its first frame.
    public var firstFrameTimeout = TimeAmount.seconds(5)
    /// How long a stream may stay silent after that (members refresh every 2.5 s).
    public var idleTimeout = TimeAmount.seconds(30)

    /// Descriptors kept for everything else: the UDP socket, the listener, a database's
    /// connections, standard streams, the event loops' own.
    public static let reservedDescriptors = 256

    /// The defaults above.
    public init() {}

    /// These limits with the total cut to what `descriptors` (the process's limit on open
    /// files) leaves after the reserve.
    public func fitted(toDescriptors descriptors: Int) -> StreamLimits {
        var limits = self
        limits.total = max(0, min(self.total, descriptors - Self.reservedDescriptors))
        return limits
    }
}

/// What the rendezvous counted of its TCP streams.
public struct StreamStatistics: Sendable, Equatable, Codable {
    /// Streams open now.
    public var open = 0
    /// The most streams open at once so far: ``evicted`` grows only once it has reached the total.
    public var peakOpen = 0
    public var accepted: UInt64 = 0
    /// Refused because their source had ``StreamLimits/perSource`` streams.
    public var refusedPerSource: UInt64 = 0
    /// Refused because ``StreamLimits/total`` streams were open and none was waiting for its
    /// first frame.
    public var refusedTotal: UInt64 = 0
    /// Closed to make room: open longest without a frame when the total was reached.
    public var evicted: UInt64 = 0
    /// Closed for sending nothing within ``StreamLimits/firstFrameTimeout``.
    public var silentAtStart: UInt64 = 0
    /// Closed for sending nothing within ``StreamLimits/idleTimeout`` after a frame.
    public var idle: UInt64 = 0

    /// All zero.
    public init() {}
}
