import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore

/// Identifies a watched peer within its endpoint.
public struct LivenessWatchID: Hashable, Sendable, CustomStringConvertible {
    /// A counter value, unique within the endpoint.
    public let rawValue: UInt64
    /// "watch <number>".
    public var description: String { "watch \(self.rawValue)" }
}

/// Probes peers the application wants to know alive (PROTOCOL §6.6): each watched peer gets a
/// probe every ``interval(watching:)``, at most one a second, fewer when many are watched, so
/// that the endpoint sends at most ``maximumProbesPerSecond`` in all. A peer that has answered
/// none of ``probesBeforeSilence`` probes is reported silent, and is then probed every
/// ``silentInterval`` until it answers again.
///
/// A verdict uses only evidence a starved process still has. A probe counts from the moment it
/// left (``didSend(_:now:)``, when the driver took it), not from when its timer was due, and the
/// last one must have had a whole interval to be answered. The verdict is then only suspected:
/// it is confirmed ``confirmationDelay`` later, by a timer of its own, so that the event loop
/// reads its socket in between (answers that arrived while this process was stalled, and still
/// wait there, clear the suspicion). A stall therefore never makes a live peer look dead, and a
/// loop that is late all the time (a busy machine) still reports a dead peer: each probe just
/// leaves later.
///
/// An answer counts only if it carries the nonce of a probe still outstanding and the MAC of the
/// key the two endpoints share: a sender without the peer's private key cannot make a dead peer
/// look alive, and one that can only send packets cannot make a live peer look dead (its forged
/// answers are ignored; the peer's answers still arrive).
struct LivenessWatcher {
    static let minimumInterval = TimeAmount.seconds(1)
    static let maximumProbesPerSecond = 50
    static let probesBeforeSilence = 3
    static let silentInterval = TimeAmount.seconds(5)
    /// How long a probe's nonce is honoured.
    static let answerWindow = TimeAmount.seconds(10)
    /// Addresses of one peer probed in turn, at most.
    static let maximumAddresses = 4
    /// How long after a suspected silence the verdict is confirmed: long enough that the event
    /// loop polls its socket in between (a timer runs only after the reads that were ready when
    /// it came due), short against the seconds a verdict takes.
    static let confirmationDelay = TimeAmount.milliseconds(50)

    struct Watch {
        var addresses: [SocketAddress]
        var peerKey: [UInt8]
        var key: SymmetricKey
        var nextProbe: NIODeadline
        /// Probes that left since the last accepted answer.
        var unanswered = 0
        /// When the last of ``probesBeforeSilence`` unanswered probes has had its interval (from
        /// the moment it left): silence is suspected then, unless an answer came.
        var answerDue: NIODeadline?
        /// When silence was suspected; confirmed ``confirmationDelay`` later if still unanswered.
        var suspectedAt: NIODeadline?

        /// When this watch's timer is next needed.
        var nextDeadline: NIODeadline {
            var deadline = self.nextProbe
            if let suspected = self.suspectedAt {
                deadline = min(deadline, suspected + LivenessWatcher.confirmationDelay)
            } else if self.isAlive, let due = self.answerDue {
                deadline = min(deadline, due)
            }
            return deadline
        }
        var isAlive = true
        var turn = 0
        var cookie: (address: SocketAddress, bytes: [UInt8])?
    }

    private(set) var watches: [LivenessWatchID: Watch] = [:]
    /// Outstanding probes by nonce.
    private var outstanding: [UInt64: (watch: LivenessWatchID, sentAt: NIODeadline)] = [:]
    private var nextID: UInt64 = 1
    private var random: MachineRandom
    /// `suspicionsCleared`: silences suspected but answered before the confirmation (answers that
    /// waited in the socket while the process was held up).
    private(set) var statistics = (probesSent: 0, answersAccepted: 0, answersIgnored: 0, suspicionsCleared: 0)

    init(random: MachineRandom = .system()) {
        self.random = random
    }

    /// The probe interval with `count` peers watched.
    static func interval(watching count: Int) -> TimeAmount {
        let spread = TimeAmount.nanoseconds(Int64(count) * 1_000_000_000 / Int64(Self.maximumProbesPerSecond))
        return max(Self.minimumInterval, spread)
    }

    /// Starts probing a peer at `addresses` whose liveness key is `peerKey`; nil when the key is
    /// malformed or a low-order point. The first probe goes out within one interval, at a random
    /// point of it, so that peers seen together are not probed together.
    mutating func watch(addresses: [SocketAddress], peerKey: [UInt8], responder: LivenessResponder, now: NIODeadline) -> LivenessWatchID? {
        guard !addresses.isEmpty, peerKey.count == WireSize.publicKey,
            let shared = KeySchedule.agree(responder.privateKey, peerPublicKey: ByteBuffer(bytes: peerKey))
        else { return nil }
        let key = KeySchedule.livenessKey(sharedSecret: shared, psk: responder.psk, publicKeys: (responder.publicKey, peerKey))
        let id = LivenessWatchID(rawValue: self.nextID)
        self.nextID += 1
        let interval = Self.interval(watching: self.watches.count + 1)
        let offset = TimeAmount.nanoseconds(Int64.random(in: 0..<interval.nanoseconds, using: &self.random))
        self.watches[id] = Watch(
            addresses: Array(addresses.prefix(Self.maximumAddresses)), peerKey: peerKey, key: key,
            nextProbe: now + offset)
        return id
    }

    /// New addresses for a watched peer (discovery saw it move).
    mutating func update(_ id: LivenessWatchID, addresses: [SocketAddress]) {
        guard !addresses.isEmpty else { return }
        self.watches[id]?.addresses = Array(addresses.prefix(Self.maximumAddresses))
    }

    mutating func unwatch(_ id: LivenessWatchID) {
        self.watches[id] = nil
        self.outstanding = self.outstanding.filter { $0.value.watch != id }
    }

    var nextDeadline: NIODeadline? {
        var deadline: NIODeadline?
        for watch in self.watches.values {
            deadline = deadline.earliest(watch.nextDeadline)
        }
        return deadline
    }

    /// Confirms the silences suspected earlier that are still unanswered, suspects new ones, and
    /// sends the probes that are due; `probe` gets each datagram, its destination and its watch,
    /// `changed` each watch whose state changed.
    mutating func handleTimeout(
        now: NIODeadline, proberKey: [UInt8], probe: (SocketAddress, ByteBuffer, LivenessWatchID) -> Void, changed: (LivenessWatchID, Bool) -> Void
    ) {
        self.outstanding = self.outstanding.filter { now - $0.value.sentAt < Self.answerWindow }
        let interval = Self.interval(watching: self.watches.count)
        for (id, var watch) in self.watches.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            if let suspected = watch.suspectedAt, suspected + Self.confirmationDelay <= now {
                // Nothing answered since, though the socket has been read: silent.
                watch.suspectedAt = nil
                watch.isAlive = false
                watch.nextProbe = min(watch.nextProbe, now + Self.silentInterval)
                changed(id, false)
            }
            if watch.isAlive, watch.suspectedAt == nil, let due = watch.answerDue, due <= now {
                watch.suspectedAt = now
            }
            if watch.nextProbe <= now {
                let address = watch.addresses[watch.turn % watch.addresses.count]
                watch.turn &+= 1
                self.sendProbe(id, &watch, to: address, proberKey: proberKey, now: now, probe: probe)
                watch.nextProbe = now + (watch.isAlive ? interval : Self.silentInterval)
            }
            self.watches[id] = watch
        }
    }

    /// The probe of `id` left now (the driver took it from the endpoint): its wait for an answer
    /// starts here. The one that makes ``probesBeforeSilence`` unanswered sets when silence is
    /// suspected: one interval after it left.
    mutating func didSend(_ id: LivenessWatchID, now: NIODeadline) {
        guard self.watches[id] != nil else { return }
        self.watches[id]!.unanswered += 1
        if self.watches[id]!.unanswered == Self.probesBeforeSilence {
            self.watches[id]!.answerDue = now + Self.interval(watching: self.watches.count)
        }
    }

    private mutating func sendProbe(
        _ id: LivenessWatchID, _ watch: inout Watch, to address: SocketAddress, proberKey: [UInt8], now: NIODeadline,
        probe: (SocketAddress, ByteBuffer, LivenessWatchID) -> Void
    ) {
        var nonce: UInt64
        repeat { nonce = self.random.next() } while self.outstanding[nonce] != nil
        let cookie = watch.cookie.flatMap { $0.address == address ? $0.bytes : nil }
        probe(address, LivenessMessage.probe(.init(proberKey: proberKey, nonce: nonce, cookie: cookie), key: watch.key), id)
        self.outstanding[nonce] = (id, now)
        self.statistics.probesSent += 1
    }

    /// A reply or a cookie. Reports a silent peer that answers again; repeats a probe at once with
    /// a new cookie.
    mutating func handleAnswer(
        _ datagram: ByteBuffer, type: PacketType, from address: SocketAddress, now: NIODeadline, proberKey: [UInt8],
        probe: (SocketAddress, ByteBuffer, LivenessWatchID) -> Void, changed: (LivenessWatchID, Bool) -> Void
    ) {
        guard let (nonce, covered, trailer) = LivenessMessage.decodeAnswer(datagram) else {
            self.statistics.answersIgnored += 1
            return
        }
        if type == .probeCookie {
            // A cookie is bound to this endpoint's address, not to a probe: one drawn by someone
            // spoofing that address is as good. It is not authenticated (the responder has not
            // done the work that would let it be), and a wrong one only costs a probe without it.
            let id = self.outstanding[nonce]?.watch ?? self.watches.first { $0.value.addresses.contains(address) }?.key
            guard let id, var watch = self.watches[id], watch.cookie?.address != address || watch.cookie?.bytes != Array(buffer: trailer) else {
                self.statistics.answersIgnored += 1
                return
            }
            watch.cookie = (address, Array(buffer: trailer))
            self.sendProbe(id, &watch, to: address, proberKey: proberKey, now: now, probe: probe)
            self.watches[id] = watch
            return
        }
        guard let (id, _) = self.outstanding[nonce], var watch = self.watches[id] else {
            self.statistics.answersIgnored += 1
            return
        }
        guard KeySchedule.constantTimeEqual(trailer, KeySchedule.truncatedMAC(key: watch.key, over: covered)) else {
            self.statistics.answersIgnored += 1
            return
        }
        self.outstanding[nonce] = nil
        self.statistics.answersAccepted += 1
        watch.unanswered = 0
        watch.answerDue = nil
        if watch.suspectedAt != nil {
            watch.suspectedAt = nil
            self.statistics.suspicionsCleared += 1
        }
        if !watch.isAlive {
            watch.isAlive = true
            watch.nextProbe = now + Self.interval(watching: self.watches.count)
            changed(id, true)
        }
        self.watches[id] = watch
    }
}
