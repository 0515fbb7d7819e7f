@_spi(Machine) import GameKitMachine
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitDiscovery

/// Several discovery machines on one simulated link, with a virtual clock: the package's one
/// virtual network, with multicast.
///
/// Every multicast a machine sends reaches every machine, the sender included (multicast
/// loopback); unicast reaches the machine whose address it names. Every datagram is logged,
/// decoded, with its time, so tests check what went on the wire.
struct VirtualLink {
    /// One discovery machine on the link, with what it reported.
    struct Node: VirtualHost {
        var machine: DiscoveryMachine
        var address: SocketAddress
        var interface: NetworkInterface
        var responderEvents: [ResponderEvent] = []
        var browseEvents: [(time: NIODeadline, event: BrowseEvent)] = []
        let index: Int
        let wire: Wire

        func source(for destination: MulticastDNSDestination) -> MulticastDNSSource {
            MulticastDNSSource(address: self.address, interfaceIndex: destination.interfaceIndex)
        }

        func accepts(_ destination: MulticastDNSDestination, from source: MulticastDNSSource) -> Bool {
            switch destination.destination {
            case .multicast: return destination.interfaceIndex == self.interface.index
            case .unicast(let address): return address.ipAddress == self.address.ipAddress
            }
        }

        /// Logs every datagram as it is sent, decoded.
        mutating func didSend(_ bytes: ByteBuffer, to destination: MulticastDNSDestination, now: NIODeadline) {
            #expect(bytes.readableBytes <= MessagePacker.limit + 200)
            let message = try! DNSMessage(decoding: bytes)
            self.wire.log.append(Sent(time: now, from: self.index, message: message, bytes: bytes, destination: destination.destination))
        }

        mutating func record(_ event: DiscoveryEvent, now: NIODeadline) {
            switch event {
            case .responder(let event): self.responderEvents.append(event)
            case .browse(let event): self.browseEvents.append((now, event))
            }
        }
    }

    struct Sent {
        var time: NIODeadline
        var from: Int
        var message: DNSMessage
        var bytes: ByteBuffer
        var destination: MessageDestination
    }

    /// The log and the loss rule, shared with the network's interceptor.
    final class Wire: @unchecked Sendable {
        var log: [Sent] = []
        var deliver: (_ from: Int, _ message: DNSMessage) -> Bool = { _, _ in true }
    }

    static let interfaceIndex = 2
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    var network = VirtualNetwork<Node>(start: VirtualLink.start)
    let wire = Wire()

    init() {
        self.network.onSpin = { Issue.record(Comment(rawValue: "a deadline stays due (would spin): \($0)")) }
        self.network.timeoutPassesPerInstant = 3
        // Applies the test's loss rule to each datagram (node n's address is 10.0.0.(n + 1)).
        let wire = self.wire
        self.network.interceptor = { datagram in
            guard case .v4(let v4) = datagram.source.address, let message = try? DNSMessage(decoding: datagram.bytes) else { return true }
            return wire.deliver(Int(UInt32(bigEndian: v4.address.sin_addr.s_addr) & 0xFF) - 1, message)
        }
    }

    var now: NIODeadline {
        get { self.network.now }
        set { self.network.now = newValue }
    }

    var nodes: [Node] {
        get { self.network.hosts }
        _modify { yield &self.network.hosts }
    }

    /// Every datagram sent so far, in order (tests clear it between steps).
    var log: [Sent] {
        get { self.wire.log }
        nonmutating set { self.wire.log = newValue }
    }

    /// Decides whether a datagram from node `from` is delivered (true) or lost.
    var deliver: (_ from: Int, _ message: DNSMessage) -> Bool {
        get { self.wire.deliver }
        nonmutating set { self.wire.deliver = newValue }
    }

    /// Adds a machine with address 10.0.0.(n+1) and a seeded random source.
    @discardableResult
    mutating func addNode(hostLabel: String? = nil, seed: UInt64? = nil) -> Int {
        let index = self.nodes.count
        let bytes = IPv4Bytes(10, 0, 0, UInt8(index + 1))
        let interface = NetworkInterface(index: Self.interfaceIndex, name: "vlink", ipv4: [bytes])
        var machine = DiscoveryMachine(hostLabel: hostLabel ?? "host\(index)", random: MachineRandom(seed: seed ?? UInt64(index + 1) * 7919))
        machine.setInterfaces([interface], now: self.now)
        let address = try! SocketAddress(ipAddress: "10.0.0.\(index + 1)", port: MulticastDNSAddress.port)
        return self.network.add(Node(machine: machine, address: address, interface: interface, index: index, wire: self.wire))
    }

    /// Changes node `index`'s machine and delivers what that makes it send.
    mutating func with<Result>(_ index: Int, _ body: (inout DiscoveryMachine, NIODeadline) throws -> Result) rethrows -> Result {
        let result = try body(&self.nodes[index].machine, self.now)
        self.pump()
        return result
    }

    /// Delivers a message from outside (a foreign querier at `source`) to every node.
    mutating func inject(_ message: DNSMessage, from source: SocketAddress, to targets: [Int]? = nil) {
        let bytes = message.encoded()
        for index in targets ?? Array(self.nodes.indices) {
            self.nodes[index].machine.handle(
                datagram: bytes, from: MulticastDNSSource(address: source, interfaceIndex: Self.interfaceIndex), now: self.now)
        }
        self.pump()
    }

    /// Runs the clock forward by `duration`, firing every deadline on the way, in order.
    mutating func run(for duration: TimeAmount) {
        self.network.advance(by: duration)
    }

    /// Moves every queued message, repeatedly, until nobody has anything to send.
    mutating func pump() {
        self.network.settle()
    }

    /// Messages node `index` sent, in order.
    func sent(by index: Int) -> [Sent] {
        self.log.filter { $0.from == index }
    }
}

extension ServiceDescription {
    static func test(_ name: String = "Alice", type: String = "_chat._udp", port: UInt16 = 7000, txt: TXTRecord = TXTRecord()) -> ServiceDescription {
        ServiceDescription(instanceName: name, serviceType: try! ServiceType(type), port: port, txt: txt)
    }
}
