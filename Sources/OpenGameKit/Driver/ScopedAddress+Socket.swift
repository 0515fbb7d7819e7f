import GameKitDiscovery
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension ScopedAddress {
    /// The socket address of `port` at this address, for a socket of the given family: IPv4
    /// addresses become IPv4-mapped IPv6 ones for a dual-stack IPv6 socket; IPv6 link-local
    /// addresses carry their interface as scope. Nil when the family cannot reach it.
    func socketAddress(port: UInt16, dualStack: Bool) -> SocketAddress? {
        switch self.address {
        case .v4(let bytes):
            if dualStack {
                return try? SocketAddress(ipAddress: "::ffff:\(bytes.description)", port: Int(port))
            }
            return try? SocketAddress(ipAddress: bytes.description, port: Int(port))
        case .v6(let bytes):
            guard dualStack else { return nil }
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &address.sin6_addr) { raw in
                for (index, byte) in bytes.array.enumerated() { raw[index] = byte }
            }
            let linkLocal = bytes.array[0] == 0xFE && bytes.array[1] & 0xC0 == 0x80
            address.sin6_scope_id = linkLocal ? UInt32(clamping: self.interfaceIndex) : 0
            return SocketAddress(address, host: bytes.description)
        }
    }

    /// Addresses to try, best first: IPv4 (the most widely routable on a LAN), then global IPv6,
    /// then link-local IPv6.
    var preference: Int {
        switch self.address {
        case .v4: 0
        case .v6(let bytes): bytes.array[0] == 0xFE && bytes.array[1] & 0xC0 == 0x80 ? 2 : 1
        }
    }
}
