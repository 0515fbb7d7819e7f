import NIOCore

/// A UDP transport address (IP address and port) as NAT traversal sees it: raw address bytes,
/// so STUN can XOR them and candidates can be compared and encoded without string parsing.
public struct TraversalAddress: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 bytes (IPv6), network order.
    public let bytes: [UInt8]
    /// The UDP port.
    public let port: UInt16

    /// An address from raw bytes; nil unless `bytes` holds 4 or 16 bytes.
    public init?(bytes: [UInt8], port: UInt16) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
        self.port = port
    }

    /// An address from its text form (`"192.0.2.1"`, `"2001:db8::1"`); nil if it does not parse.
    public init?(_ ip: String, port: UInt16) {
        guard let address = try? SocketAddress(ipAddress: ip, port: Int(port)) else { return nil }
        self.init(address)
    }

    /// The IP address and port of a NIO socket address; nil for Unix-domain addresses. An
    /// IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a dual-stack socket reports IPv4 senders)
    /// is the IPv4 address it maps.
    public init?(_ address: SocketAddress) {
        switch address {
        case .v4(let v4):
            let raw = v4.address.sin_addr.s_addr.bigEndian
            self.bytes = [UInt8(raw >> 24), UInt8((raw >> 16) & 0xFF), UInt8((raw >> 8) & 0xFF), UInt8(raw & 0xFF)]
            self.port = UInt16(address.port ?? 0)
        case .v6(let v6):
            var address6 = v6.address.sin6_addr
            let bytes = withUnsafeBytes(of: &address6) { Array($0) }
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
            self.bytes = mapped ? Array(bytes[12..<16]) : bytes
            self.port = UInt16(address.port ?? 0)
        default:
            return nil
        }
    }

    /// Whether this is an IPv4 address.
    public var isIPv4: Bool { self.bytes.count == 4 }

    /// Whether this is a loopback address (127/8 or ::1).
    public var isLoopback: Bool {
        self.isIPv4 ? self.bytes[0] == 127 : self.bytes[0..<15].allSatisfy { $0 == 0 } && self.bytes[15] == 1
    }

    /// Whether this is a link-local address (169.254/16 or fe80::/10).
    public var isLinkLocal: Bool {
        self.isIPv4 ? self.bytes[0] == 169 && self.bytes[1] == 254 : self.bytes[0] == 0xFE && self.bytes[1] & 0xC0 == 0x80
    }

    /// Whether this is the wildcard address (0.0.0.0 or ::).
    public var isWildcard: Bool { self.bytes.allSatisfy { $0 == 0 } }

    /// Where a socket bound to `bound` can be reached on this host's interfaces (those named in
    /// `interfaceNames`, or every one): a specific bound address itself; for a wildcard, each
    /// interface's address with the socket's port, IPv4 first, IPv6 ones only when the socket is
    /// IPv6 (dual-stack), never link-local ones (they need an interface to name). Loopback
    /// addresses (which reach no other host) only when `loopbackIfAlone` and there is nothing
    /// else.
    public static func hostAddresses(bound: TraversalAddress, interfaceNames: [String]? = nil, loopbackIfAlone: Bool) -> [TraversalAddress] {
        guard bound.isWildcard else { return loopbackIfAlone || !(bound.isLoopback || bound.isLinkLocal) ? [bound] : [] }
        var addresses: [TraversalAddress] = []
        for device in (try? System.enumerateDevices()) ?? [] {
            if let names = interfaceNames, !names.contains(device.name) { continue }
            guard let address = device.address.flatMap(TraversalAddress.init), address.isIPv4 || !bound.isIPv4, !address.isLinkLocal,
                !address.isWildcard, let withPort = TraversalAddress(bytes: address.bytes, port: bound.port), !addresses.contains(withPort)
            else { continue }
            addresses.append(withPort)
        }
        let outside = addresses.filter { !$0.isLoopback }
        let chosen = outside.isEmpty && loopbackIfAlone ? addresses : outside
        return chosen.filter(\.isIPv4) + chosen.filter { !$0.isIPv4 }
    }

    /// The NIO socket address.
    public var socketAddress: SocketAddress {
        var buffer = ByteBuffer(bytes: self.bytes)
        // Four or sixteen bytes always make a valid packed address.
        return try! SocketAddress(packedIPAddress: buffer.readSlice(length: buffer.readableBytes)!, port: Int(self.port))
    }

    /// The address without its port, as text.
    public var ipString: String {
        if self.isIPv4 { return self.bytes.map(String.init).joined(separator: ".") }
        return self.socketAddress.ipAddress ?? "?"
    }

    /// "a.b.c.d:port" or "[v6]:port".
    public var description: String {
        self.isIPv4 ? "\(self.ipString):\(self.port)" : "[\(self.ipString)]:\(self.port)"
    }
}
