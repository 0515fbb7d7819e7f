import NIOCore

/// Options of a discovery endpoint.
public struct DiscoveryConfiguration: Sendable {
    /// The interfaces to use, by name (e.g. `["eth0"]`). Nil: the names in the environment
    /// variable `OGK_DISCOVERY_INTERFACES` (comma-separated) if set, otherwise every interface
    /// that is up, supports multicast and has an address.
    public var interfaceNames: [String]?
    /// Use IPv4 (224.0.0.251).
    public var useIPv4 = true
    /// Use IPv6 (ff02::fb).
    public var useIPv6 = true
    /// How often interfaces are re-read, so that ones coming and going are noticed.
    public var interfacePollInterval: TimeAmount = .seconds(2)
    /// The first label of the host name the responder claims (`<label>.local`). Nil: this
    /// machine's host name with four random hex digits appended, so that the endpoint never
    /// contends with the system's own mDNS responder for the host's name.
    public var hostLabel: String?
    /// The UDP port; 5353 except in tests that must not meet other mDNS stacks.
    public var port: Int = MulticastDNSAddress.port

    public init() {}
}

/// Errors of a discovery endpoint.
public enum DiscoveryError: Error, Hashable, Sendable {
    /// No interface could be used: none is up with multicast and an address, or none of the
    /// named ones exists, or no socket could be opened on them.
    case noUsableInterface
    /// The endpoint has been shut down.
    case shutDown
    /// The instance name does not fit a DNS label (63 bytes) or the service is invalid.
    case invalidService(String)
}
