import NIOCore

/// A network interface as discovery uses it: its kernel index, name and addresses.
public struct NetworkInterface: Sendable, Hashable, CustomStringConvertible {
    /// The kernel's interface index (scope ID for link-local IPv6).
    public var index: Int
    /// The interface name, e.g. `eth0`.
    public var name: String
    /// IPv4 addresses on the interface.
    public var ipv4: [IPv4Bytes]
    /// IPv6 addresses on the interface.
    public var ipv6: [IPv6Bytes]

    public init(index: Int, name: String, ipv4: [IPv4Bytes] = [], ipv6: [IPv6Bytes] = []) {
        self.index = index
        self.name = name
        self.ipv4 = ipv4
        self.ipv6 = ipv6
    }

    /// All addresses, IPv4 first.
    public var addresses: [IPAddress] {
        self.ipv4.map(IPAddress.v4) + self.ipv6.map(IPAddress.v6)
    }

    public var description: String { "\(self.name)#\(self.index)" }
}

/// Where a message the machines produce goes.
enum MessageDestination: Hashable, Sendable {
    /// The mDNS group of every address family the interface has, port 5353.
    case multicast
    /// One querier (a reply to a QU question or a legacy unicast query).
    case unicast(SocketAddress)
}

/// A message the machines want sent on one interface.
struct OutgoingMessage: Sendable {
    var message: DNSMessage
    var interfaceIndex: Int
    var destination: MessageDestination
}

/// A message received on one interface, with its source.
struct IncomingMessage: Sendable {
    var message: DNSMessage
    var interfaceIndex: Int
    var source: SocketAddress

    /// Whether the source port is 5353: anything else is a legacy unicast querier (RFC 6762
    /// §6.7) that gets a conventional unicast DNS reply.
    var isFromMulticastDNSPort: Bool { self.source.port == MulticastDNSAddress.port }
}
