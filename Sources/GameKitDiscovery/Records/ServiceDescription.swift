/// A service instance to advertise: what `DiscoveryEndpoint.register` takes.
///
/// DNS-SD (RFC 6763) names it `<instance>.<service type>.<domain>`, points the service type at
/// it with a shared PTR record, and gives it an SRV record (host and port) and a TXT record
/// (key/value pairs). The host's address records come from the interfaces the endpoint uses,
/// unless `addresses` names them.
public struct ServiceDescription: Sendable, Hashable {
    /// The instance name as users see it, any UTF-8 text up to 63 bytes (e.g. `Bob's Mac`).
    public var instanceName: String
    /// The service type, e.g. `_chat._udp`.
    public var serviceType: ServiceType
    /// The port the service listens on.
    public var port: UInt16
    /// The TXT record's strings, in order.
    public var txt: TXTRecord
    /// Addresses to advertise for the host on every interface, in addition to each interface's
    /// own addresses (which are always advertised on that interface). Nil: only those.
    public var addresses: [IPAddress]?

    public init(instanceName: String, serviceType: ServiceType, port: UInt16, txt: TXTRecord = TXTRecord(), addresses: [IPAddress]? = nil) {
        self.instanceName = instanceName
        self.serviceType = serviceType
        self.port = port
        self.txt = txt
        self.addresses = addresses
    }
}

/// A DNS-SD service type such as `_chat._udp`: an application protocol name (1–15 letters,
/// digits and hyphens, at least one letter, no hyphen at either end; RFC 6335 §5.1) and the
/// transport (`_udp` or `_tcp`).
public struct ServiceType: Sendable, Hashable, CustomStringConvertible {
    /// Service types compare as DNS names do: without case.
    public static func == (lhs: ServiceType, rhs: ServiceType) -> Bool {
        lhs.domainName == rhs.domainName
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.domainName)
    }

    /// The protocol name without its underscore, e.g. `chat`.
    public let name: String
    /// The transport: true for `_tcp`, false for `_udp`.
    public let isTCP: Bool

    /// A service type from its parts.
    ///
    /// - Throws: `ServiceTypeError.invalidName` unless `name` is a valid service name.
    public init(name: String, isTCP: Bool = false) throws(ServiceTypeError) {
        guard Self.isValidServiceName(name) else { throw .invalidName(name) }
        self.name = name
        self.isTCP = isTCP
        self.domainName = DNSName(validatedLabels: [Array("_\(name)".utf8), Array((isTCP ? "_tcp" : "_udp").utf8), Array("local".utf8)])
    }

    /// A service type from text such as `_chat._udp` (a trailing `.local.` is ignored).
    public init(_ text: String) throws(ServiceTypeError) {
        var parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if parts.last == "" { parts.removeLast() }
        if parts.last?.lowercased() == "local" { parts.removeLast() }
        guard parts.count == 2, parts[0].hasPrefix("_"),
            ["_udp", "_tcp"].contains(parts[1].lowercased())
        else { throw .invalidName(text) }
        try self.init(name: String(parts[0].dropFirst()), isTCP: parts[1].lowercased() == "_tcp")
    }

    /// Whether `name` is a valid DNS-SD service name: 1–15 ASCII letters, digits and hyphens,
    /// at least one letter, not starting or ending with a hyphen, no two hyphens in a row.
    public static func isValidServiceName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...15).contains(bytes.count),
            bytes.first != UInt8(ascii: "-"), bytes.last != UInt8(ascii: "-"),
            !name.contains("--")
        else { return false }
        var hasLetter = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): hasLetter = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): break
            default: return false
            }
        }
        return hasLetter
    }

    /// `_name._udp.local` (or `_tcp`), made once: the browser compares it with every record.
    public let domainName: DNSName

    public var description: String { "_\(self.name).\(self.isTCP ? "_tcp" : "_udp")" }
}

/// Why a service type was refused.
public enum ServiceTypeError: Error, Hashable, Sendable {
    /// Not `_name._udp`/`_name._tcp` with a valid service name (the text given).
    case invalidName(String)
}

/// An IPv4 or IPv6 address as advertised in A and AAAA records.
public enum IPAddress: Sendable, Hashable, CustomStringConvertible {
    case v4(IPv4Bytes)
    case v6(IPv6Bytes)

    /// The address record for `host` carrying this address.
    func record(host: DNSName, ttl: UInt32) -> DNSResourceRecord {
        switch self {
        case .v4(let bytes): DNSResourceRecord(name: host, data: .a(bytes), ttl: ttl, cacheFlush: true)
        case .v6(let bytes): DNSResourceRecord(name: host, data: .aaaa(bytes), ttl: ttl, cacheFlush: true)
        }
    }

    public var description: String {
        switch self {
        case .v4(let bytes): bytes.description
        case .v6(let bytes): bytes.description
        }
    }
}
