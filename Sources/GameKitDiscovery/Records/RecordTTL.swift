/// The TTLs this responder gives its records (RFC 6762 §10).
enum RecordTTL {
    /// Records that name a host or depend on one (SRV, A, AAAA, their NSEC): 120 s, so that a
    /// host that goes away without a goodbye is forgotten in two minutes.
    static let hostNaming: UInt32 = 120
    /// Every other record (PTR, TXT): 75 minutes.
    static let other: UInt32 = 4500
    /// TTL cap for answers to legacy unicast queries (RFC 6762 §6.7).
    static let legacyUnicastMaximum: UInt32 = 10
}

/// Well-known names.
enum WellKnownName {
    /// `local.`
    static let local = DNSName(validatedLabels: [Array("local".utf8)])
    /// `_services._dns-sd._udp.local.`: the service type enumeration name (RFC 6763 §9).
    static let serviceTypeEnumeration = DNSName(validatedLabels: [
        Array("_services".utf8), Array("_dns-sd".utf8), Array("_udp".utf8), Array("local".utf8),
    ])
}

/// The multicast DNS port and groups (RFC 6762 §3).
public enum MulticastDNSAddress {
    /// UDP port 5353.
    public static let port = 5353
    /// 224.0.0.251.
    public static let ipv4Group = "224.0.0.251"
    /// ff02::fb.
    public static let ipv6Group = "ff02::fb"
}
