/// Identifies one registered service within an endpoint.
public struct ServiceID: Hashable, Sendable, CustomStringConvertible {
    let rawValue: UInt64
    public var description: String { "service#\(self.rawValue)" }
}

/// What happened to a registered service.
public enum ResponderEvent: Sendable, Hashable {
    /// Probing found the name unique and the service has been announced under `name` (the full
    /// instance name; the instance label may differ from the one asked for after conflicts).
    case registered(ServiceID, name: DNSName)
    /// Another responder holds the name: the service is probing again under `name`.
    case renamed(ServiceID, name: DNSName)
}
