@_spi(Machine) import GameKitMachine
import NIOCore

/// The responder and the browser of one endpoint, fed the same messages and driven by one
/// deadline: discovery's ``DatagramMachine``. No I/O: ``DiscoveryCore`` runs it on the package's
/// driver over one socket per interface and address family, tests over a virtual link.
struct DiscoveryMachine: DatagramMachine, Sendable {
    var responder: ResponderMachine
    var browser: BrowserMachine
    /// Datagrams that were not DNS messages.
    private(set) var undecodable = 0
    private var transmitQueue: [OutgoingMessage] = []
    private var transmitPosition = 0

    init(hostLabel: String, random: MachineRandom) {
        var random = random
        self.responder = ResponderMachine(hostLabel: hostLabel, random: random.split())
        self.browser = BrowserMachine(random: random.split())
    }

    mutating func setInterfaces(_ interfaces: [NetworkInterface], now: NIODeadline) {
        self.responder.setInterfaces(interfaces, now: now)
        self.browser.setInterfaces(interfaces, now: now)
    }

    /// A decoded message (tests inject these directly).
    mutating func receive(_ incoming: IncomingMessage, now: NIODeadline) {
        self.responder.receive(incoming, now: now)
        self.browser.receive(incoming, now: now)
    }

    // MARK: - DatagramMachine

    /// A datagram from `source`: decoded, handed to both halves, and what is due at once (an
    /// answer without delay, a conflict's new probe) queued.
    mutating func handle(datagram: ByteBuffer, from source: MulticastDNSSource, now: NIODeadline) {
        guard let message = try? DNSMessage(decoding: datagram) else {
            self.undecodable += 1
            return
        }
        self.receive(IncomingMessage(message: message, interfaceIndex: source.interfaceIndex, source: source.address), now: now)
        self.handleTimeout(now: now)
    }

    mutating func handleTimeout(now: NIODeadline) {
        self.responder.handleTimeout(now: now)
        self.browser.handleTimeout(now: now)
    }

    var nextDeadline: NIODeadline? {
        [self.responder.nextDeadline, self.browser.nextDeadline].compactMap { $0 }.min()
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> MulticastDNSDestination? {
        if self.transmitPosition == self.transmitQueue.count {
            self.transmitQueue = self.takeOutgoing()
            self.transmitPosition = 0
            guard !self.transmitQueue.isEmpty else { return nil }
        }
        let item = self.transmitQueue[self.transmitPosition]
        self.transmitPosition += 1
        buffer.writeImmutableBuffer(item.message.encoded())
        return MulticastDNSDestination(interfaceIndex: item.interfaceIndex, destination: item.destination)
    }

    /// The responder's events first, then the browser's, each in order.
    mutating func pollEvent() -> DiscoveryEvent? {
        if let event = self.responder.popEvent() { return .responder(event) }
        if let event = self.browser.popEvent() { return .browse(event) }
        return nil
    }

    /// Every message both halves queued (tests that check the decoded messages use this).
    mutating func takeOutgoing() -> [OutgoingMessage] {
        self.responder.takeOutgoing() + self.browser.takeOutgoing()
    }
}

/// Where an mDNS datagram came from: the sender, and the interface it arrived on.
struct MulticastDNSSource: Sendable, Hashable {
    var address: SocketAddress
    var interfaceIndex: Int
}

/// Where an mDNS datagram goes: an interface, and the group or one querier on it.
struct MulticastDNSDestination: Sendable, Hashable {
    var interfaceIndex: Int
    var destination: MessageDestination
}

/// What discovery reports: a registration's progress, or a browse's findings.
enum DiscoveryEvent: Sendable {
    case responder(ResponderEvent)
    case browse(BrowseEvent)
}
