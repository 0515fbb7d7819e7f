#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Lists the machine's network interfaces with their flags and addresses (getifaddrs), and
/// chooses the ones discovery uses.
enum InterfaceEnumerator {
    /// The environment variable that names the interfaces to use, comma-separated (e.g.
    /// `OGK_DISCOVERY_INTERFACES=eth0,wlan0`), when the configuration does not.
    static let environmentVariable = "OGK_DISCOVERY_INTERFACES"

    /// Every interface that is up, with its addresses; `multicast` tells whether it supports
    /// multicast.
    static func all() -> [(interface: NetworkInterface, multicast: Bool)] {
        var head: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&head) == 0, let first = head else { return [] }
        defer { freeifaddrs(head) }
        var byName: [String: (interface: NetworkInterface, multicast: Bool)] = [:]
        var order: [String] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(bitPattern: UInt32(entry.pointee.ifa_flags))
            guard flags & Int32(IFF_UP) != 0, let cName = entry.pointee.ifa_name else { continue }
            let name = String(cString: cName)
            let index = Int(if_nametoindex(cName))
            guard index > 0 else { continue }
            if byName[name] == nil {
                byName[name] = (NetworkInterface(index: index, name: name), flags & Int32(IFF_MULTICAST) != 0)
                order.append(name)
            }
            guard let address = entry.pointee.ifa_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    let value = pointer.pointee.sin_addr.s_addr  // network order in memory
                    withUnsafeBytes(of: value) { bytes in
                        byName[name]!.interface.ipv4.append(IPv4Bytes(bytes[0], bytes[1], bytes[2], bytes[3]))
                    }
                }
            case AF_INET6:
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    var value = pointer.pointee.sin6_addr
                    let bytes = withUnsafeBytes(of: &value) { Array($0) }
                    if let address = IPv6Bytes(bytes) { byName[name]!.interface.ipv6.append(address) }
                }
            default:
                break
            }
        }
        return order.compactMap { byName[$0] }
    }

    /// The interfaces to use: those named (by the configuration, else by the environment
    /// variable) if they are up, otherwise every up, multicast-capable interface with an
    /// address.
    static func selected(names: [String]?, environment: [String: String]) -> [NetworkInterface] {
        Self.choose(from: Self.all(), requested: Self.requestedNames(configured: names, environment: environment))
    }

    /// The interface names asked for: the configuration's if it has a list, else those in the
    /// environment variable (comma-separated, spaces around a name ignored). Nil, or an empty
    /// list, when neither names one: every suitable interface is used then.
    static func requestedNames(configured: [String]?, environment: [String: String]) -> [String]? {
        configured ?? environment[Self.environmentVariable].map {
            $0.split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
        }
    }

    /// Name prefixes of the bridges and virtual links that containers and virtual machines add to
    /// a host (Docker's docker0 and br-<id>, the veth ends of containers, libvirt's virbr, LXC's
    /// lxcbr, CNI's and Podman's bridges). Peers are not there, and advertising their addresses
    /// would give the others addresses they cannot reach; they are used only when named.
    static let virtualBridgePrefixes = ["docker", "br-", "veth", "virbr", "lxcbr", "cni", "podman"]

    /// Whether an interface name is one of ``virtualBridgePrefixes``'.
    static func isVirtualBridge(_ name: String) -> Bool {
        Self.virtualBridgePrefixes.contains { name.hasPrefix($0) }
    }

    /// Chooses among the interfaces that are up: those `requested` by name (none if no name
    /// matches; the caller reports that), or, when no name is requested, every multicast-capable
    /// one with an address that is not a container or virtual machine bridge.
    static func choose(from available: [(interface: NetworkInterface, multicast: Bool)], requested: [String]?) -> [NetworkInterface] {
        if let requested, !requested.isEmpty {
            return available.map(\.interface).filter { requested.contains($0.name) }
        }
        return available.filter { $0.multicast && !$0.interface.addresses.isEmpty && !Self.isVirtualBridge($0.interface.name) }.map(\.interface)
    }

    /// The process environment as a dictionary.
    static func processEnvironment() -> [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String {
        String(self.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
