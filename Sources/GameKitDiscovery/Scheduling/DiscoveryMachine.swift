import NIOCore

/// The responder and the browser of one endpoint, fed the same messages and driven by one
/// deadline. No I/O: `DiscoveryCore` drives it over sockets, tests over a virtual network.
struct DiscoveryMachine: Sendable {
    var responder: ResponderMachine
    var browser: BrowserMachine

    init(hostLabel: String, random: DiscoveryRandom) {
        var random = random
        self.responder = ResponderMachine(hostLabel: hostLabel, random: DiscoveryRandom(seed: random.next()))
        self.browser = BrowserMachine(random: DiscoveryRandom(seed: random.next()))
    }

    mutating func setInterfaces(_ interfaces: [NetworkInterface], now: NIODeadline) {
        self.responder.setInterfaces(interfaces, now: now)
        self.browser.setInterfaces(interfaces, now: now)
    }

    mutating func receive(_ incoming: IncomingMessage, now: NIODeadline) {
        self.responder.receive(incoming, now: now)
        self.browser.receive(incoming, now: now)
    }

    mutating func advance(now: NIODeadline) {
        self.responder.advance(now: now)
        self.browser.advance(now: now)
    }

    var nextDeadline: NIODeadline? {
        [self.responder.nextDeadline, self.browser.nextDeadline].compactMap { $0 }.min()
    }

    mutating func takeOutgoing() -> [OutgoingMessage] {
        self.responder.takeOutgoing() + self.browser.takeOutgoing()
    }
}
