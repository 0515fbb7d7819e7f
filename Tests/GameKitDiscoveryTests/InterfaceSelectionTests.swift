import Foundation
import NetworkImpairment
import Testing

@testable import GameKitDiscovery

/// Which interfaces discovery uses (PROTOCOL §12.1): the configuration's names, else those in
/// `OGK_DISCOVERY_INTERFACES`, else every up, multicast-capable interface with an address.
@Suite("Interface choice: configuration, OGK_DISCOVERY_INTERFACES, default")
struct InterfaceSelectionTests {
    static let variable = InterfaceEnumerator.environmentVariable

    /// What getifaddrs might list on a laptop: loopback, Ethernet, Wi-Fi, a tunnel without
    /// multicast, and an interface without addresses.
    static let available: [(interface: NetworkInterface, multicast: Bool)] = [
        (NetworkInterface(index: 1, name: "lo", ipv4: [IPv4Bytes(127, 0, 0, 1)]), true),
        (NetworkInterface(index: 2, name: "eth0", ipv4: [IPv4Bytes(192, 168, 1, 2)]), true),
        (NetworkInterface(index: 3, name: "wlan0", ipv4: [IPv4Bytes(10, 0, 0, 7)]), true),
        (NetworkInterface(index: 4, name: "tun0", ipv4: [IPv4Bytes(10, 8, 0, 1)]), false),
        (NetworkInterface(index: 5, name: "eth1"), true),
    ]

    static func chosen(configured: [String]? = nil, environment: [String: String] = [:]) -> [String] {
        let requested = InterfaceEnumerator.requestedNames(configured: configured, environment: environment)
        return InterfaceEnumerator.choose(from: Self.available, requested: requested).map(\.name)
    }

    @Test func theVariableIsAListOfNamesSeparatedByCommasWithSpacesAndEmptyEntriesIgnored() {
        let environment = [Self.variable: " wlan0 ,, eth0,"]
        #expect(InterfaceEnumerator.requestedNames(configured: nil, environment: environment) == ["wlan0", "eth0"])
        // The interfaces come in the system's order, whatever the order of the names.
        #expect(Self.chosen(environment: environment) == ["eth0", "wlan0"])
    }

    @Test func aNamedInterfaceIsUsedEvenWithoutMulticastOrAddresses() {
        #expect(Self.chosen(environment: [Self.variable: "tun0,eth1"]) == ["tun0", "eth1"])
    }

    @Test func theConfigurationWinsOverTheVariable() {
        #expect(Self.chosen(configured: ["eth0"], environment: [Self.variable: "wlan0"]) == ["eth0"])
    }

    @Test func withoutNamesEveryMulticastInterfaceWithAnAddressIsUsed() {
        let defaults = ["lo", "eth0", "wlan0"]
        #expect(Self.chosen() == defaults)
        #expect(Self.chosen(environment: [Self.variable: ""]) == defaults)
        #expect(Self.chosen(environment: [Self.variable: " , "]) == defaults)
        #expect(Self.chosen(environment: ["OTHER": "eth0"]) == defaults)
    }

    /// Container and virtual machine bridges (Docker, libvirt, LXC, CNI, Podman, the veth ends
    /// of containers) are left out unless named.
    @Test func containerAndVirtualMachineBridgesAreUsedOnlyWhenNamed() {
        let bridges = ["docker0", "br-5f1e2d3c4b5a", "veth3a1b2c4", "virbr0", "lxcbr0", "cni0", "podman0"]
        let available = Self.available + bridges.enumerated().map { offset, name in
            (NetworkInterface(index: 10 + offset, name: name, ipv4: [IPv4Bytes(172, 17, UInt8(offset), 1)]), true)
        }
        #expect(InterfaceEnumerator.choose(from: available, requested: nil).map(\.name) == ["lo", "eth0", "wlan0"])
        #expect(InterfaceEnumerator.choose(from: available, requested: ["docker0", "eth0"]).map(\.name) == ["eth0", "docker0"])
        // Names that merely contain a prefix are ordinary interfaces.
        #expect(!InterfaceEnumerator.isVirtualBridge("enp0s31f6") && !InterfaceEnumerator.isVirtualBridge("wlbr0"))
        #expect(!InterfaceEnumerator.isVirtualBridge("ogk0"))
    }

    /// Real interfaces named like Docker's bridge and a container's veth end, made in the sandbox:
    /// a default responder neither announces there nor lists their addresses; one that names
    /// docker0 does.
    @Test func aDefaultResponderStaysOffDockerBridgesAcrossProcesses() async throws {
        let result = try await SandboxScript.run(
            """
            # (The kernel here has no dummy interfaces: a bridge without ports, and a veth pair.)
            export OGK_SANDBOX_EXTRA_INTERFACES=docker0,veth9f8e7d6
            ip link add docker0 type bridge
            ip link add veth9f8e7d6 type veth peer name ogkc1
            # ogkc1, the veth's other end, gets no address at all: an ordinary interface with an IPv6
            # link-local address would carry the default responder's announcements to veth9f8e7d6.
            sysctl -q -w net.ipv6.conf.ogkc1.disable_ipv6=1
            for name in docker0 veth9f8e7d6 ogkc1; do ip link set $name multicast on up; done
            ip addr add 172.17.0.1/16 dev docker0
            ip addr add 172.31.0.1/16 dev veth9f8e7d6
            gk-mdns register --type _bridge._udp --name Default --port 7011 --seconds 4 --ignore-stdin | sed -u 's/^/X /' &
            gk-mdns register --type _bridge._udp --name Named --port 7012 --interface docker0 --seconds 4 --ignore-stdin | sed -u 's/^/Y /' &
            gk-mdns browse --type _bridge._udp --interface docker0 --seconds 3 --ignore-stdin | sed -u 's/^/D /' &
            gk-mdns browse --type _bridge._udp --interface veth9f8e7d6 --seconds 3 --ignore-stdin | sed -u 's/^/V /' &
            gk-mdns browse --type _bridge._udp --interface lo --seconds 3 --ignore-stdin | sed -u 's/^/L /'
            wait
            """)
        let output = result.lines.joined(separator: "\n")
        func found(_ tag: String) -> Set<String> {
            Set(result.objects(tagged: tag).filter { $0["event"] as? String == "found" }.compactMap { $0["instance"] as? String })
        }
        #expect(found("D") == ["Named"], "\(output)")
        #expect(found("V").isEmpty, "\(output)")
        #expect(found("L") == ["Default"], "\(output)")
        let addresses = result.objects(tagged: "L").flatMap { $0["addresses"] as? [String] ?? [] }
        #expect(!addresses.contains("172.17.0.1") && !addresses.contains("172.31.0.1"), "\(output)")
    }

    @Test func namesThatMatchNoInterfaceChooseNone() {
        #expect(Self.chosen(environment: [Self.variable: "ogk-none0"]).isEmpty)
        #expect(Self.chosen(environment: [Self.variable: "ETH0"]).isEmpty)  // names are exact
        #expect(Self.chosen(environment: [Self.variable: "ogk-none0,wlan0"]) == ["wlan0"])
    }

    @Test func theVariableReachesRealProcesses() async throws {
        // In the sandbox (lo only): a variable naming no interface makes gk-mdns fail with
        // noUsableInterface (its sentence); one naming lo among unknowns works; a configured interface
        // (--interface) overrides a variable that names none.
        let result = try await SandboxScript.run(
            """
            OGK_DISCOVERY_INTERFACES=ogk-none0 gk-mdns browse --type _env._udp --seconds 1 --ignore-stdin 2>&1 | sed -u 's/^/N /'
            echo "N status ${PIPESTATUS[0]}"
            OGK_DISCOVERY_INTERFACES="ogk-none0, lo" gk-mdns register --type _env._udp --name "Env" --port 7010 --seconds 3 --ignore-stdin | sed -u 's/^/R /' &
            OGK_DISCOVERY_INTERFACES=ogk-none0 gk-mdns browse --type _env._udp --interface lo --seconds 3 --ignore-stdin | sed -u 's/^/B /'
            wait
            """)
        #expect(result.lines.contains { $0.hasPrefix("N ") && $0.contains("No network interface can be used for discovery") }, "\(result.lines)")
        #expect(result.lines.contains { $0.hasPrefix("N status ") && $0 != "N status 0" })
        #expect(!result.lines.contains { $0.hasPrefix("N {") && $0.contains("browsing") })
        #expect(result.objects(tagged: "R").contains { $0["event"] as? String == "registered" })
        let found = result.objects(tagged: "B").filter { $0["event"] as? String == "found" }
        #expect(found.contains { $0["name"] as? String == "Env._env._udp.local." })
    }
}
