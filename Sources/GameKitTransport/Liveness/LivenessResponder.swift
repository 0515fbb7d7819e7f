import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore

/// Answers liveness probes to this endpoint's static liveness key (PROTOCOL §3.9, §6.6), keeping
/// no state for a prober it cannot authenticate.
///
/// A probe's MAC is checked with the key the prober and this endpoint share, which takes an
/// X25519 computation the first time a prober's key is seen; the key is then remembered for two
/// minutes after its last valid probe. Three limits keep a sender of forged or flooding probes
/// from silencing the answers a real prober gets:
/// * replies are counted per prober key: a flood under other keys does not spend a real prober's
///   allowance, and nobody can probe under a key without its private half;
/// * X25519 for keys not remembered has a budget of its own; once it is spent, an unknown key's
///   probe gets a cookie (a MAC of its source address) instead of any work, and a probe that
///   repeats a valid cookie is worked under a budget per source address, which a sender of
///   spoofed sources never reaches;
/// * cookies (smaller than the probes they answer) go out at most ``cookiesPerDestination`` a
///   second to one address, and ``cookiesPerSecond`` in all: a flood spoofing many sources cannot
///   use them up for a real prober's address, and the cookies a flood spoofing that address
///   draws go to the real prober anyway, which may use them (they are bound to the address, not
///   to a probe).
struct LivenessResponder {
    static let rememberFor = TimeAmount.seconds(120)
    static let capacity = 4096
    /// Replies a second to one prober key (bursts of twice as many).
    static let repliesPerKey = 10.0
    /// X25519 computations a second for probes of unknown keys without a cookie.
    static let unknownKeysPerSecond = 100.0
    /// X25519 computations a second for probes of unknown keys with a valid cookie, per source.
    static let cookiedKeysPerSource = 10.0
    /// Cookies a second to one address, and in all.
    static let cookiesPerDestination = 10.0
    static let cookiesPerSecond = 1000.0

    struct Known {
        var key: SymmetricKey
        var replies: TokenBucket
        var lastValid: NIODeadline
    }

    /// What became of a probe.
    enum Outcome: Equatable {
        case answered(ByteBuffer)
        case cookie(ByteBuffer)
        /// Dropped without an answer: malformed, a wrong MAC, a low-order key, over a budget.
        case dropped
    }

    let privateKey: Curve25519.KeyAgreement.PrivateKey
    let publicKey: [UInt8]
    let psk: PreSharedKey
    private(set) var known: [[UInt8]: Known] = [:]
    private var unknownBudget = TokenBucket(rate: Self.unknownKeysPerSecond, burst: Self.unknownKeysPerSecond)
    private var cookiedBudgets: [SocketAddress: TokenBucket] = [:]
    private var cookieBudgets: [SocketAddress: TokenBucket] = [:]
    private var cookieBudget = TokenBucket(rate: Self.cookiesPerSecond, burst: Self.cookiesPerSecond)

    init(privateKey: Curve25519.KeyAgreement.PrivateKey, psk: PreSharedKey) {
        self.privateKey = privateKey
        self.publicKey = Array(privateKey.publicKey.rawRepresentation)
        self.psk = psk
    }

    /// Checks a probe from `address` and says what to send back, if anything.
    mutating func handle(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline, cookies: CookieGenerator) -> Outcome {
        guard let (probe, covered, mac) = LivenessMessage.decodeProbe(datagram), probe.proberKey != self.publicKey else { return .dropped }
        if var entry = self.known[probe.proberKey] {
            guard KeySchedule.constantTimeEqual(mac, KeySchedule.truncatedMAC(key: entry.key, over: covered)) else { return .dropped }
            entry.lastValid = now
            let allowed = entry.replies.take(now: now)
            self.known[probe.proberKey] = entry
            return allowed ? .answered(LivenessMessage.reply(nonce: probe.nonce, key: entry.key)) : .dropped
        }
        // An unknown key: the X25519 work needs budget, or a cookie proving the source.
        let cookied = probe.cookie.map { cookies.matches($0, address: address) } ?? false
        if cookied {
            var budget = self.cookiedBudgets[address] ?? TokenBucket(rate: Self.cookiedKeysPerSource, burst: Self.cookiedKeysPerSource)
            let allowed = budget.take(now: now)
            self.cookiedBudgets[address] = budget
            guard allowed else { return .dropped }
        } else if !self.unknownBudget.take(now: now) {
            var budget = self.cookieBudgets[address] ?? TokenBucket(rate: Self.cookiesPerDestination, burst: Self.cookiesPerDestination)
            let allowed = budget.take(now: now)
            self.cookieBudgets[address] = budget
            guard allowed, self.cookieBudget.take(now: now) else { return .dropped }
            return .cookie(LivenessMessage.cookie(nonce: probe.nonce, cookie: cookies.cookie(for: address)))
        }
        guard let shared = KeySchedule.agree(self.privateKey, peerPublicKey: ByteBuffer(bytes: probe.proberKey)) else { return .dropped }
        let key = KeySchedule.livenessKey(sharedSecret: shared, psk: self.psk, publicKeys: (probe.proberKey, self.publicKey))
        guard KeySchedule.constantTimeEqual(mac, KeySchedule.truncatedMAC(key: key, over: covered)) else { return .dropped }
        var replies = TokenBucket(rate: Self.repliesPerKey, burst: 2 * Self.repliesPerKey)
        _ = replies.take(now: now)
        if self.known.count < Self.capacity {
            self.known[probe.proberKey] = Known(key: key, replies: replies, lastValid: now)
        }
        return .answered(LivenessMessage.reply(nonce: probe.nonce, key: key))
    }

    /// Forgets prober keys not heard from for ``rememberFor``, and spent cookie budgets.
    mutating func expire(now: NIODeadline) {
        self.known = self.known.filter { now - $0.value.lastValid < Self.rememberFor }
        if self.cookiedBudgets.count > 4096 { self.cookiedBudgets.removeAll() }
        if self.cookieBudgets.count > 4096 { self.cookieBudgets.removeAll() }
    }
}
