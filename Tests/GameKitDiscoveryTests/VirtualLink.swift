import GameKitMachine
import NIOCore
import Testing

@testable import GameKitDiscovery

/// Several discovery machines on one simulated link, with a virtual clock.
///
/// Every multicast a machine sends reaches every machine, the sender included (multicast
/// loopback), after a round trip through the codec; unicast reaches the machine whose address
/// it names. Every datagram is logged with its time, so tests check what went on the wire.
struct VirtualLink {
    struct Node {
        var machine: DiscoveryMachine
        var address: SocketAddress
        var interface: NetworkInterface
        var responderEvents: [ResponderEvent] = []
        var browseEvents: [(time: NIODeadline, event: BrowseEvent)] = []
    }

    struct Sent {
        var time: NIODeadline
        var from: Int
        var message: DNSMessage
        var bytes: ByteBuffer
        var destination: MessageDestination
    }

    static let interfaceIndex = 2
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    var nodes: [Node] = []
    var now = VirtualLink.start
    var log: [Sent] = []
    /// Decides whether a datagram from node `from` is delivered (true) or lost.
    var deliver: (_ from: Int, _ message: DNSMessage) -> Bool = { _, _ in true }

    /// Adds a machine with address 10.0.0.(n+1) and a seeded random source.
    @discardableResult
    mutating func addNode(hostLabel: String? = nil, seed: UInt64? = nil) -> Int {
        let index = self.nodes.count
        let bytes = IPv4Bytes(10, 0, 0, UInt8(index + 1))
        let interface = NetworkInterface(index: Self.interfaceIndex, name: "vlink", ipv4: [bytes])
        var machine = DiscoveryMachine(hostLabel: hostLabel ?? "host\(index)", random: MachineRandom(seed: seed ?? UInt64(index + 1) * 7919))
        machine.setInterfaces([interface], now: self.now)
        let address = try! SocketAddress(ipAddress: "10.0.0.\(index + 1)", port: MulticastDNSAddress.port)
        self.nodes.append(Node(machine: machine, address: address, interface: interface))
        return index
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
        let decoded = try! DNSMessage(decoding: bytes)
        for index in targets ?? Array(self.nodes.indices) {
            self.nodes[index].machine.receive(IncomingMessage(message: decoded, interfaceIndex: Self.interfaceIndex, source: source), now: self.now)
        }
        self.pump()
    }

    /// Runs the clock forward by `duration`, firing every deadline on the way, in order.
    mutating func run(for duration: TimeAmount) {
        let end = self.now + duration
        var steps = 0
        while steps < 1_000_000 {
            steps += 1
            let next = self.nodes.compactMap(\.machine.nextDeadline).min()
            guard let next, next <= end else { break }
            self.now = max(self.now, next)
            // A message received while pumping may make a deadline due now (a conflict restarts
            // probing at once); advancing again must clear it. A deadline still due after three
            // advances in a row with nothing received would make a real event loop spin.
            var clear = false
            for _ in 0..<3 {
                for index in self.nodes.indices { self.nodes[index].machine.handleTimeout(now: self.now) }
                self.pump()
                if self.nodes.compactMap(\.machine.nextDeadline).allSatisfy({ $0 > self.now }) {
                    clear = true
                    break
                }
            }
            if !clear {
                Issue.record("a deadline stays due after advancing (would spin): \(self.nodes.compactMap(\.machine.nextDeadline))")
                break
            }
        }
        self.now = end
        for index in self.nodes.indices { self.nodes[index].machine.handleTimeout(now: self.now) }
        self.pump()
    }

    /// Moves every queued message, repeatedly, until nobody has anything to send.
    mutating func pump() {
        var rounds = 0
        while rounds < 100 {
            rounds += 1
            var anything = false
            for index in self.nodes.indices {
                self.collectEvents(index)
                let outgoing = self.nodes[index].machine.takeOutgoing()
                for item in outgoing {
                    anything = true
                    let bytes = item.message.encoded()
                    #expect(bytes.readableBytes <= MessagePacker.limit + 200)
                    let decoded = try! DNSMessage(decoding: bytes)
                    self.log.append(Sent(time: self.now, from: index, message: decoded, bytes: bytes, destination: item.destination))
                    guard self.deliver(index, decoded) else { continue }
                    switch item.destination {
                    case .multicast:
                        for target in self.nodes.indices {
                            self.nodes[target].machine.receive(IncomingMessage(message: decoded, interfaceIndex: Self.interfaceIndex, source: self.nodes[index].address), now: self.now)
                        }
                    case .unicast(let address):
                        for target in self.nodes.indices where self.nodes[target].address.ipAddress == address.ipAddress {
                            self.nodes[target].machine.receive(IncomingMessage(message: decoded, interfaceIndex: Self.interfaceIndex, source: self.nodes[index].address), now: self.now)
                        }
                    }
                }
            }
            for index in self.nodes.indices { self.collectEvents(index) }
            if !anything { return }
        }
    }

    private mutating func collectEvents(_ index: Int) {
        self.nodes[index].responderEvents += self.nodes[index].machine.responder.takeEvents()
        for event in self.nodes[index].machine.browser.takeEvents() {
            self.nodes[index].browseEvents.append((self.now, event))
        }
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
