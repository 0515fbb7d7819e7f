import Crypto
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The wall clock as a machine sees it: the Unix time at one deadline, so that a machine turns
/// the monotonic `now` it is given into the milliseconds tickets carry (tests pick both).
public struct WallClock: Sendable {
    /// A monotonic instant.
    public let origin: NIODeadline
    /// Milliseconds since 1970 at ``origin``.
    public let originMilliseconds: UInt64

    /// The clock that read `originMilliseconds` at `origin`.
    public init(origin: NIODeadline, originMilliseconds: UInt64) {
        self.origin = origin
        self.originMilliseconds = originMilliseconds
    }

    /// The system's clock, read once.
    public static func system(now: NIODeadline = .now()) -> WallClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return WallClock(origin: now, originMilliseconds: UInt64(spec.tv_sec) * 1000 + UInt64(spec.tv_nsec) / 1_000_000)
    }

    /// Milliseconds since 1970 at `now`.
    public func milliseconds(at now: NIODeadline) -> UInt64 {
        let elapsed = (now - self.origin).nanoseconds / 1_000_000
        return elapsed >= 0 ? self.originMilliseconds + UInt64(elapsed) : self.originMilliseconds - UInt64(-elapsed)
    }
}

/// Signs relay tickets for a rendezvous (PROTOCOL §18.5).
struct TicketIssuer {
    let key: Curve25519.Signing.PrivateKey
    let clock: WallClock
    let lifetime: TimeAmount
    let byteLimit: UInt64

    func issue(room: RoomHandle, peerID: UInt32, holderKey: [UInt8], now: NIODeadline) -> [UInt8] {
        let expires = self.clock.milliseconds(at: now + self.lifetime)
        let ticket = RelayTicket(room: room, peerID: peerID, expiresAt: expires, byteLimit: self.byteLimit, holderKey: holderKey)
        return (try? ticket.signed(by: self.key)) ?? []
    }
}
