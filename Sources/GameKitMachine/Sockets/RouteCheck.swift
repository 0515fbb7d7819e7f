#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// Whether the kernel has a route to a destination, asked without sending anything, and
/// remembered for a second.
///
/// NIO closes a datagram channel when a send fails with anything but `EHOSTUNREACH` or
/// `EMSGSIZE`. A datagram to an address with no route (a peer's address on an interface that
/// has just gone away, an address family with no route at all) fails with `ENETUNREACH`, so it
/// would take the whole endpoint, and every link on it, down. The endpoint asks here first:
/// `connect()` on a scratch UDP socket looks the route up and sends nothing.
package struct RouteCheck {
    /// How long an answer is reused.
    package static let lifetime = TimeAmount.seconds(1)
    /// Answers kept at most; beyond that the cache starts over.
    package static let capacity = 4_096

    private var answers: [SocketAddress: (routable: Bool, until: NIODeadline)] = [:]
    /// Where the answers come from: the kernel, or a test's table.
    private let ask: @Sendable (SocketAddress) -> Bool

    /// A check that asks `ask` (the kernel unless a test says otherwise).
    package init(ask: @escaping @Sendable (SocketAddress) -> Bool = RouteCheck.kernelHasRoute(to:)) {
        self.ask = ask
    }

    /// Whether datagrams to `address` may go to the socket.
    package mutating func isRoutable(_ address: SocketAddress, now: NIODeadline) -> Bool {
        if let answer = self.answers[address], now < answer.until { return answer.routable }
        if self.answers.count >= Self.capacity { self.answers.removeAll(keepingCapacity: true) }
        let routable = self.ask(address)
        self.answers[address] = (routable, now + Self.lifetime)
        return routable
    }

    /// Asks the kernel. Errors that are not about the route count as routable: the send decides.
    package static func kernelHasRoute(to address: SocketAddress) -> Bool {
        let family: CInt
        switch address {
        case .v4: family = AF_INET
        case .v6: family = AF_INET6
        default: return true
        }
        #if canImport(Glibc)
        let descriptor = socket(family, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        #else
        let descriptor = socket(family, SOCK_DGRAM, 0)
        #endif
        guard descriptor >= 0 else { return true }
        defer { close(descriptor) }
        let result = address.withSockAddr { pointer, length in connect(descriptor, pointer, socklen_t(length)) }
        guard result != 0 else { return true }
        switch errno {
        case ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, EAFNOSUPPORT: return false
        default: return true
        }
    }
}
