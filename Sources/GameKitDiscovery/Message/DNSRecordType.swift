/// A resource record type (RFC 1035 §3.2.2), open to types this module does not interpret.
public struct DNSRecordType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// IPv4 address.
    public static let a = DNSRecordType(rawValue: 1)
    /// Domain name pointer: a service type to its instances (RFC 6763 §4.1).
    public static let ptr = DNSRecordType(rawValue: 12)
    /// Text strings: a service instance's key/value pairs (RFC 6763 §6).
    public static let txt = DNSRecordType(rawValue: 16)
    /// IPv6 address.
    public static let aaaa = DNSRecordType(rawValue: 28)
    /// Service location: target host and port (RFC 2782).
    public static let srv = DNSRecordType(rawValue: 33)
    /// Which types exist for a name; mDNS uses it for negative answers (RFC 6762 §6.1).
    public static let nsec = DNSRecordType(rawValue: 47)
    /// In a question: every type (RFC 1035 §3.2.3, "*").
    public static let any = DNSRecordType(rawValue: 255)

    public var description: String {
        switch self {
        case .a: "A"
        case .ptr: "PTR"
        case .txt: "TXT"
        case .aaaa: "AAAA"
        case .srv: "SRV"
        case .nsec: "NSEC"
        case .any: "ANY"
        default: "TYPE\(self.rawValue)"
        }
    }
}

/// The class of every record this module sends: Internet.
public enum DNSClass {
    /// IN (RFC 1035 §3.2.4).
    public static let internet: UInt16 = 1
    /// In a question: any class.
    public static let any: UInt16 = 255
}
