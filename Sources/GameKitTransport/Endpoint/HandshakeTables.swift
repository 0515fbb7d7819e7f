import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore

/// A handshake is identified by the initiator's address and its sender index.
struct HandshakeSource: Hashable {
    var address: SocketAddress
    var index: UInt32
}

/// An authenticated initiation waiting for the application's accept or deny. This is the only
/// state a responder keeps per initiator before a link exists.
struct PendingRequest {
    var id: ConnectionRequest.ID
    var source: HandshakeSource
    /// The initiator's ephemeral key (a copy, not a slice of the receive buffer).
    var ephemeralPublicKey: ByteBuffer
    var initiationWithoutMAC: ByteBuffer
    var initiationSize: Int
    var parameters: TransportParameters
    var payload: ByteBuffer
    var cancelKey: SymmetricKey
    /// When the initiation was last received (the initiator repeats it while it waits).
    var lastSeen: NIODeadline

    var echo: ByteBuffer { self.ephemeralPublicKey.getSlice(at: self.ephemeralPublicKey.readerIndex, length: WireSize.echo)! }
}

extension ByteBuffer {
    /// A copy with storage of its own, so that keeping it does not keep a larger buffer alive.
    func detached() -> ByteBuffer {
        var copy = ByteBufferAllocator().buffer(capacity: self.readableBytes)
        copy.writeImmutableBuffer(self)
        return copy
    }
}

/// An accepted handshake whose link has not heard from the initiator yet: repeats of the
/// initiation get the same response, a cancel closes the link.
struct AcceptedHandshake {
    var linkIndex: UInt32
    var ephemeralPublicKey: ByteBuffer
    var response: ByteBuffer
    var cancelKey: SymmetricKey
    var initiationPayload: ByteBuffer
}

/// A handshake already answered, remembered briefly so that repeats (or network duplicates) of its
/// initiation get the same reject, or nothing once the link is confirmed, instead of becoming a
/// second request.
struct AnsweredHandshake {
    var ephemeralPublicKey: ByteBuffer
    /// The reject to send again; nil for a confirmed link (repeats are absorbed silently).
    var reply: ByteBuffer?
    var until: NIODeadline
}

/// An initiation this side withdrew: a late response to it gets the cancel again.
struct WithdrawnInitiation {
    var cancel: ByteBuffer
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
