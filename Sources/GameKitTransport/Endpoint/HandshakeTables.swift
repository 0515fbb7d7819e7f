import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore

/// A handshake is identified by the initiator's address and its sender index.
struct HandshakeSource: Hashable {
    var address: SocketAddress
    var index: UInt32
}

/// An initiation answered with a challenge, waiting for the initiator's request: what opens it,
/// and the challenge to send again if the initiation repeats.
struct ChallengedHandshake {
    /// The initiator's share (a copy): repeats of the initiation carry it.
    var share: ByteBuffer
    var challenge: ByteBuffer
    var keys: HandshakeKeys
    /// When the initiation was last received; the challenge expires a request lifetime later.
    var lastSeen: NIODeadline

    var echo: ByteBuffer { self.share.getSlice(at: self.share.readerIndex, length: WireSize.echo)! }
}

/// A request that opened, waiting for the application's accept or deny. With the challenge before
/// it, the only state a responder keeps per initiator before a link exists.
struct PendingRequest {
    var id: ConnectionRequest.ID
    var source: HandshakeSource
    /// The initiator's share (a copy, not a slice of the receive buffer).
    var share: ByteBuffer
    /// The request's tag: repeats of the request carry the same.
    var requestTag: ByteBuffer
    var keys: HandshakeKeys
    var parameters: TransportParameters
    var payload: ByteBuffer
    /// When the request was last received (the initiator repeats it while it waits).
    var lastSeen: NIODeadline

    var echo: ByteBuffer { self.share.getSlice(at: self.share.readerIndex, length: WireSize.echo)! }
}

extension ByteBuffer {
    /// A copy with storage of its own, so that keeping it does not keep a larger buffer alive.
    func detached() -> ByteBuffer {
        var copy = ByteBufferAllocator().buffer(capacity: self.readableBytes)
        copy.writeImmutableBuffer(self)
        return copy
    }
}

/// An accepted handshake whose link has not heard from the initiator yet: repeats of the request
/// get the same response, a cancel closes the link.
struct AcceptedHandshake {
    var linkIndex: UInt32
    var share: ByteBuffer
    var requestTag: ByteBuffer
    var response: ByteBuffer
    var cancelKey: SymmetricKey
    var initiationPayload: ByteBuffer
}

/// A handshake already answered, remembered briefly so that repeats (or network duplicates) of its
/// messages get the same reject, or nothing once the link is confirmed, instead of becoming a
/// second handshake.
struct AnsweredHandshake {
    var share: ByteBuffer
    /// The request's tag; nil when the handshake ended at the challenge (a wrong password).
    var requestTag: ByteBuffer?
    /// The reject to send again; nil for a confirmed link (repeats are absorbed silently).
    var reply: ByteBuffer?
    var until: NIODeadline
}

/// A handshake this side withdrew: a late challenge or response to it gets a cancel.
struct WithdrawnInitiation {
    /// The cancel sent (again) for what arrives later; nil while the handshake was withdrawn
    /// before its challenge and no challenge has come since.
    var cancel: ByteBuffer?
    /// A handshake withdrawn before its challenge: kept to answer the challenge if it comes.
    var opening: InitiatorHandshake?
    var reason: CancelReason
    var until: NIODeadline
}

/// A token bucket for replies to unauthenticated traffic (rejects, liveness cookies), so that
/// this endpoint cannot be used to bounce floods at a third party even at an amplification factor
/// below one.
struct ReplyRateLimiter {
    static let perSecond = 100.0

    private var bucket = TokenBucket(rate: ReplyRateLimiter.perSecond, burst: ReplyRateLimiter.perSecond)

    mutating func take(now: NIODeadline) -> Bool { self.bucket.take(now: now) }

    /// Whether a reply could be sent now (the bucket is not empty).
    mutating func hasTokens(now: NIODeadline) -> Bool { self.bucket.hasTokens(now: now) }
}

/// Password guesses per source address (PROTOCOL §6.3). Every challenge answers one guess: the
/// initiator learns from its confirmation whether the password it used was right, whether or not
/// it sends a request. A source may have a number of challenges out at once (honest peers open
/// several links in parallel); each that ends without a request that opens (a wrong password, or
/// none before it expires) takes a token from the source's bucket, and a source whose bucket is
/// empty gets no challenge. An attacker so gets a burst of guesses and then one every two seconds
/// per address, however it paces them; an honest peer with the password never spends a token.
struct GuessLimiter {
    static let failuresPerSecond = 0.5
    static let failureBurst = 10.0
    static let challengesOutPerSource = 64
    /// Sources remembered; beyond it, one with nothing out is forgotten (its bucket with it).
    static let maximumSources = 4096

    private struct Entry {
        var failures = TokenBucket(rate: GuessLimiter.failuresPerSecond, burst: GuessLimiter.failureBurst)
        var challengesOut = 0
    }

    private var entries: [SocketAddress: Entry] = [:]

    /// The key of a source: its address without the port.
    private static func key(_ address: SocketAddress) -> SocketAddress {
        var key = address
        if key.port != nil { key.port = 0 }
        return key
    }

    /// Whether `address` may have another challenge now; if so it is counted as out.
    mutating func admit(_ address: SocketAddress, now: NIODeadline) -> Bool {
        let key = Self.key(address)
        if self.entries[key] == nil, self.entries.count >= Self.maximumSources {
            guard let idle = self.entries.first(where: { $0.value.challengesOut == 0 })?.key else { return false }
            self.entries[idle] = nil
        }
        var entry = self.entries[key] ?? Entry()
        guard entry.challengesOut < Self.challengesOutPerSource, entry.failures.hasTokens(now: now) else { return false }
        entry.challengesOut += 1
        self.entries[key] = entry
        return true
    }

    /// A challenge of `address` ended: with a request that opened (`guessed` false) or without
    /// (a failed guess, which takes a token).
    mutating func finish(_ address: SocketAddress, failed: Bool, now: NIODeadline) {
        let key = Self.key(address)
        guard var entry = self.entries[key] else { return }
        entry.challengesOut = max(0, entry.challengesOut - 1)
        if failed { _ = entry.failures.take(now: now) }
        if entry.challengesOut == 0, entry.failures.isFull(now: now) {
            self.entries[key] = nil
        } else {
            self.entries[key] = entry
        }
    }

    /// Sources with state (for tests: the table stays bounded).
    var count: Int { self.entries.count }
}
