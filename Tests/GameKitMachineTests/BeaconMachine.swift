@_spi(Machine) import GameKitMachine
import NIOCore

/// A small machine for the driver's tests: it answers every datagram with "re:" and the same
/// text, sends what the test queues, sends "beacon" to ``beaconAddress`` on a timer, and moves
/// a destination with no route to its alternate.
struct BeaconMachine: DatagramMachine {
    enum Event: Equatable {
        case received(String, from: SocketAddress)
        case beacon(Int)
        case unroutable(SocketAddress)
    }

    static let beaconAddress = try! SocketAddress(ipAddress: "10.9.0.1", port: 9)

    var beaconInterval: TimeAmount?
    var nextBeacon: NIODeadline?
    var beacons = 0
    var outbox: [(SocketAddress, String)] = []
    var events: [Event] = []
    /// Where to send instead of a destination with no route.
    var alternates: [SocketAddress: SocketAddress] = [:]
    /// How often each entry point ran (to check the driver calls each as it should).
    var handled = 0
    var timeouts = 0

    mutating func startBeacons(every interval: TimeAmount, now: NIODeadline) {
        self.beaconInterval = interval
        self.nextBeacon = now + interval
    }

    mutating func send(_ text: String, to destination: SocketAddress) {
        self.outbox.append((destination, text))
    }

    mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        self.handled += 1
        let text = String(buffer: datagram)
        self.events.append(.received(text, from: source))
        if !text.hasPrefix("re:") { self.outbox.append((source, "re:" + text)) }
    }

    mutating func handleTimeout(now: NIODeadline) {
        self.timeouts += 1
        guard let due = self.nextBeacon, due <= now, let interval = self.beaconInterval else { return }
        self.beacons += 1
        self.outbox.append((Self.beaconAddress, "beacon \(self.beacons)"))
        self.events.append(.beacon(self.beacons))
        self.nextBeacon = due + interval
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        guard !self.outbox.isEmpty else { return nil }
        let (destination, text) = self.outbox.removeFirst()
        buffer.writeString(text)
        return destination
    }

    mutating func pollEvent() -> Event? {
        self.events.isEmpty ? nil : self.events.removeFirst()
    }

    var nextDeadline: NIODeadline? { self.nextBeacon }

    mutating func handleUnroutable(_ destination: SocketAddress, now: NIODeadline, isRoutable: (SocketAddress) -> Bool) {
        self.events.append(.unroutable(destination))
        if let alternate = self.alternates[destination], isRoutable(alternate) {
            self.outbox.append((alternate, "moved"))
        }
    }
}
