/// A resolved service instance: what a browser reports as found.
public struct ServiceInstance: Sendable, Hashable, CustomStringConvertible {
    /// The full name, e.g. `Bob's Mac._chat._udp.local.`
    public var name: DNSName
    /// The instance label as text, e.g. `Bob's Mac`.
    public var instanceName: String { self.name.firstLabel }
    /// The service type browsed for.
    public var serviceType: ServiceType
    /// The host the SRV record names.
    public var host: DNSName
    /// The port the SRV record names.
    public var port: UInt16
    /// The TXT record.
    public var txt: TXTRecord
    /// The host's addresses, each with the index of the interface it was heard on (the scope
    /// needed to reach a link-local IPv6 address). IPv4 first, then in order of arrival.
    public var addresses: [ScopedAddress]

    public var description: String {
        "\(self.name) → \(self.host):\(self.port) \(self.addresses.map(\.description)) \(self.txt)"
    }
}

/// An address and the interface it was learned on.
public struct ScopedAddress: Sendable, Hashable, CustomStringConvertible {
    public var address: IPAddress
    public var interfaceIndex: Int

    public var description: String {
        if case .v6(let bytes) = self.address, bytes.isLinkLocal { return "\(self.address)%\(self.interfaceIndex)" }
        return self.address.description
    }
}

/// What a browser reports.
public enum BrowseEvent: Sendable, Hashable {
    /// A new instance, resolved: its SRV, TXT and at least one address are known.
    case found(ServiceInstance)
    /// A known instance changed: TXT, port, host or addresses.
    case updated(ServiceInstance)
    /// The instance is gone: it said goodbye, or its records expired or were flushed.
    case lost(ServiceInstance)

    /// The instance the event is about.
    public var instance: ServiceInstance {
        switch self {
        case .found(let instance), .updated(let instance), .lost(let instance): instance
        }
    }
}
