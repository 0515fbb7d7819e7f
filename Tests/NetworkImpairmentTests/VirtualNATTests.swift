import NIOCore
import NetworkImpairment
import Testing

/// The virtual network's NAT routers: mappings and filtering as RFC 4787 names them,
/// hairpinning, a carrier NAT in front of a home NAT, and mappings that expire.
@Suite("Virtual NAT routers")
struct VirtualNATTests {
    static func address(_ ip: String, _ port: Int) -> SocketAddress { try! SocketAddress(ipAddress: ip, port: port) }

    static let alice = address("10.1.0.2", 5000)
    static let bob = address("10.1.0.3", 5000)
    static let server = address("192.0.2.1", 7878)
    static let other = address("192.0.2.2", 3478)
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// Sends from `source` to `destination`: where it arrives (source, destination), or nil.
    static func send(_ nats: VirtualNATs, _ source: SocketAddress, _ destination: SocketAddress, at now: NIODeadline = start)
        -> (SocketAddress, SocketAddress)?
    {
        var (source, destination) = (source, destination)
        return nats.route(source: &source, destination: &destination, now: now) ? (source, destination) : nil
    }

    @Test func anEndpointIndependentMappingKeepsItsPortForEveryDestination() throws {
        let nats = VirtualNATs()
        nats.add(.init(inside: "10.1.", publicIP: "198.51.100.1", mapping: .endpointIndependent, filtering: .addressAndPortDependent))
        let first = try #require(Self.send(nats, Self.alice, Self.server))
        let second = try #require(Self.send(nats, Self.alice, Self.other))
        #expect(first.0 == Self.address("198.51.100.1", 40_000) && first.1 == Self.server)
        #expect(second.0 == first.0)
        // The server's answer gets in; a stranger's does not (filtering by address and port),
        // nor one from the server's other port.
        #expect(Self.send(nats, Self.server, first.0).map(\.1) == Self.alice)
        #expect(Self.send(nats, Self.address("192.0.2.9", 7878), first.0) == nil)
        #expect(Self.send(nats, Self.address("192.0.2.1", 9999), first.0) == nil)
        #expect(nats.filtered[0] == 2)
    }

    @Test func anAddressAndPortDependentMappingTakesANewPortPerDestination() throws {
        let nats = VirtualNATs()
        nats.add(.init(inside: "10.1.", publicIP: "198.51.100.1", mapping: .addressAndPortDependent))
        let first = try #require(Self.send(nats, Self.alice, Self.server))
        let second = try #require(Self.send(nats, Self.alice, Self.other))
        #expect(first.0.port == 40_000 && second.0.port == 40_001)
        // What the server learnt is no way in for the other address.
        #expect(Self.send(nats, Self.other, first.0) == nil)
        #expect(Self.send(nats, Self.other, second.0).map(\.1) == Self.alice)
    }

    @Test(arguments: [VirtualNATs.Filtering.endpointIndependent, .addressDependent, .addressAndPortDependent])
    func filteringLetsInWhatItShould(_ filtering: VirtualNATs.Filtering) throws {
        let nats = VirtualNATs()
        nats.add(.init(inside: "10.1.", publicIP: "198.51.100.1", filtering: filtering))
        let mapped = try #require(Self.send(nats, Self.alice, Self.server)).0
        let samePortElsewhere = Self.send(nats, Self.address("192.0.2.1", 1111), mapped) != nil
        let stranger = Self.send(nats, Self.address("203.0.113.5", 1111), mapped) != nil
        switch filtering {
        case .endpointIndependent: #expect(samePortElsewhere && stranger)
        case .addressDependent: #expect(samePortElsewhere && !stranger)
        case .addressAndPortDependent: #expect(!samePortElsewhere && !stranger)
        }
    }

    @Test(arguments: [true, false]) func hairpinningBringsADatagramBackInOnlyWhenSupported(_ hairpinning: Bool) throws {
        let nats = VirtualNATs()
        nats.add(.init(inside: "10.1.", publicIP: "198.51.100.1", filtering: .endpointIndependent, hairpinning: hairpinning))
        let bobOutside = try #require(Self.send(nats, Self.bob, Self.server)).0
        let arrived = Self.send(nats, Self.alice, bobOutside)
        if hairpinning {
            // It arrives from Alice's mapping, as from outside.
            #expect(arrived?.1 == Self.bob)
            #expect(arrived?.0 == nats.mapping(of: Self.alice, router: 0, toward: bobOutside))
        } else {
            #expect(arrived == nil)
        }
        // Inside the network, nothing is translated.
        #expect(Self.send(nats, Self.alice, Self.bob).map { [$0.0, $0.1] } == [Self.alice, Self.bob])
    }

    @Test func aCarrierNATInFrontOfAHomeNATTranslatesTwiceBothWays() throws {
        let nats = VirtualNATs()
        nats.add(.init(inside: "192.168.1.", publicIP: "100.64.0.2", filtering: .endpointIndependent))
        nats.add(.init(inside: "100.64.", publicIP: "203.0.113.9", filtering: .addressDependent))
        let home = Self.address("192.168.1.2", 5000)
        let out = try #require(Self.send(nats, home, Self.server))
        #expect(out.0 == Self.address("203.0.113.9", 40_000))
        #expect(nats.mapping(of: home, router: 0, toward: Self.server) == Self.address("100.64.0.2", 40_000))
        #expect(Self.send(nats, Self.server, out.0).map(\.1) == home)
        // The carrier filters by address: another host on the internet is not let in.
        #expect(Self.send(nats, Self.address("198.51.100.77", 7878), out.0) == nil)
    }

    @Test func aMappingNotUsedForItsLifetimeIsForgotten() throws {
        let nats = VirtualNATs()
        nats.add(.init(inside: "10.1.", publicIP: "198.51.100.1", mappingLifetime: .seconds(30)))
        let mapped = try #require(Self.send(nats, Self.alice, Self.server)).0
        #expect(Self.send(nats, Self.server, mapped, at: Self.start + .seconds(29)) != nil)
        #expect(Self.send(nats, Self.server, mapped, at: Self.start + .seconds(31)) == nil)
        // Sending again makes a new mapping, on a new port.
        let again = try #require(Self.send(nats, Self.alice, Self.server, at: Self.start + .seconds(31))).0
        #expect(again.port == 40_001)
    }
}
