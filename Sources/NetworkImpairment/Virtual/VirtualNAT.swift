import NIOCore

/// NAT routers on a ``VirtualNetwork`` of socket addresses (RFC 4787's behaviours), seeded by
/// nothing: mappings take external ports in order, so a run repeats exactly.
///
/// Each router joins an inside network (an address prefix) to the outside at one public address.
/// A datagram leaving an inside network gets its source rewritten to its mapping; a datagram to
/// a router's public address is let in to the mapping's inside address when the router's
/// filtering allows it, else dropped. Routers nest: a home router whose public address is inside
/// a carrier's network sits behind that carrier's router (CGNAT). A datagram from inside to its
/// own router's public address is hairpinned back in when the router supports it.
///
/// Install with ``VirtualNetwork/route(through:)``; hosts are addressed by their inside addresses.
package final class VirtualNATs {
    /// How a router chooses the external port of a datagram's source (RFC 4787 §4.1).
    package enum Mapping: Sendable {
        /// One external port per inside address and port, whatever the destination.
        case endpointIndependent
        /// One per inside address and port and destination address.
        case addressDependent
        /// One per inside address and port and destination address and port ("symmetric").
        case addressAndPortDependent
    }

    /// What a router lets in to a mapping (RFC 4787 §5).
    package enum Filtering: Sendable {
        /// Anything sent to the mapping.
        case endpointIndependent
        /// Only from addresses the inside endpoint has sent to through the mapping.
        case addressDependent
        /// Only from the addresses and ports it has sent to through the mapping.
        case addressAndPortDependent
    }

    /// One router.
    package struct Router {
        /// The inside network: addresses starting with this prefix (e.g. "10.1.").
        package var inside: String
        /// The router's address outside.
        package var publicIP: String
        package var mapping: Mapping
        package var filtering: Filtering
        /// Whether a datagram from inside to a mapping of this router comes back in.
        package var hairpinning: Bool
        /// A mapping not used for this long is forgotten.
        package var mappingLifetime: TimeAmount

        package init(
            inside: String, publicIP: String, mapping: Mapping = .endpointIndependent, filtering: Filtering = .addressAndPortDependent,
            hairpinning: Bool = false, mappingLifetime: TimeAmount = .seconds(120)
        ) {
            self.inside = inside
            self.publicIP = publicIP
            self.mapping = mapping
            self.filtering = filtering
            self.hairpinning = hairpinning
            self.mappingLifetime = mappingLifetime
        }

        func isInside(_ address: SocketAddress) -> Bool { (address.ipAddress ?? "").hasPrefix(self.inside) }
    }

    private struct MappingKey: Hashable {
        var router: Int
        var inside: SocketAddress
        /// The destination, as far as the router's mapping behaviour distinguishes it.
        var destination: String
    }

    private struct Binding {
        var inside: SocketAddress
        var external: Int
        var lastUsed: NIODeadline
        /// Where the inside endpoint sent through this mapping (address, or address and port).
        var permitted: Set<String> = []
    }

    package private(set) var routers: [Router] = []
    private var bindings: [MappingKey: Binding] = [:]
    /// Mappings by router and external port.
    private var byExternal: [Int: [Int: MappingKey]] = [:]
    private var nextPort: [Int: Int] = [:]
    /// Datagrams dropped by filtering, by router.
    package private(set) var filtered: [Int: Int] = [:]

    package init() {}

    /// Adds a router; returns its index.
    @discardableResult
    package func add(_ router: Router) -> Int {
        self.routers.append(router)
        return self.routers.count - 1
    }

    /// The external address the router at `index` maps `inside` to for `destination`, if a
    /// mapping exists.
    package func mapping(of inside: SocketAddress, router index: Int, toward destination: SocketAddress) -> SocketAddress? {
        let key = MappingKey(router: index, inside: inside, destination: Self.distinguished(destination, by: self.routers[index].mapping))
        return self.bindings[key].map { try! SocketAddress(ipAddress: self.routers[index].publicIP, port: $0.external) }
    }

    /// Rewrites `source` and `destination` as the routers on the way do; false when one drops it.
    package func route(source: inout SocketAddress, destination: inout SocketAddress, now: NIODeadline) -> Bool {
        // Out through every router whose inside network the datagram leaves.
        var hops = 0
        while let index = self.routers.indices.first(where: { self.routers[$0].isInside(source) && !self.routers[$0].isInside(destination) }) {
            hops += 1
            guard hops <= self.routers.count else { return false }
            let router = self.routers[index]
            if destination.ipAddress == router.publicIP, !router.hairpinning { return false }
            source = self.translateOut(source, router: index, destination: destination, now: now)
            if destination.ipAddress == router.publicIP { break }  // hairpinned: let in below
        }
        // In through every router whose public address it is sent to.
        hops = 0
        while let index = self.routers.indices.first(where: { self.routers[$0].publicIP == destination.ipAddress }) {
            hops += 1
            guard hops <= self.routers.count, let inside = self.translateIn(destination, router: index, source: source, now: now) else {
                self.filtered[index, default: 0] += 1
                return false
            }
            destination = inside
        }
        return true
    }

    private static func distinguished(_ destination: SocketAddress, by mapping: Mapping) -> String {
        switch mapping {
        case .endpointIndependent: ""
        case .addressDependent: destination.ipAddress ?? ""
        case .addressAndPortDependent: "\(destination.ipAddress ?? ""):\(destination.port ?? 0)"
        }
    }

    private static func permission(_ address: SocketAddress, by filtering: Filtering) -> String {
        switch filtering {
        case .endpointIndependent: ""
        case .addressDependent: address.ipAddress ?? ""
        case .addressAndPortDependent: "\(address.ipAddress ?? ""):\(address.port ?? 0)"
        }
    }

    private func translateOut(_ source: SocketAddress, router index: Int, destination: SocketAddress, now: NIODeadline) -> SocketAddress {
        let router = self.routers[index]
        let key = MappingKey(router: index, inside: source, destination: Self.distinguished(destination, by: router.mapping))
        var binding: Binding
        if let existing = self.bindings[key], now - existing.lastUsed < router.mappingLifetime {
            binding = existing
        } else {
            if let stale = self.bindings[key] { self.byExternal[index]?[stale.external] = nil }
            let port = self.nextPort[index] ?? 40_000
            self.nextPort[index] = port + 1
            binding = Binding(inside: source, external: port, lastUsed: now)
            self.byExternal[index, default: [:]][port] = key
        }
        binding.lastUsed = now
        binding.permitted.insert(Self.permission(destination, by: router.filtering))
        self.bindings[key] = binding
        return try! SocketAddress(ipAddress: router.publicIP, port: binding.external)
    }

    private func translateIn(_ destination: SocketAddress, router index: Int, source: SocketAddress, now: NIODeadline) -> SocketAddress? {
        let router = self.routers[index]
        guard let port = destination.port, let key = self.byExternal[index]?[port], let binding = self.bindings[key],
            now - binding.lastUsed < router.mappingLifetime
        else { return nil }
        // A hairpinned datagram comes from the router's own address: its mapping's filter
        // applies as to any other source.
        guard router.filtering == .endpointIndependent || binding.permitted.contains(Self.permission(source, by: router.filtering)) else { return nil }
        return binding.inside
    }
}

extension VirtualNetwork where Machine.Source == SocketAddress, Machine.Destination == SocketAddress {
    /// Puts `nats` between the hosts.
    package mutating func route(through nats: VirtualNATs) {
        self.router = { datagram, now in nats.route(source: &datagram.source, destination: &datagram.destination, now: now) }
    }
}
