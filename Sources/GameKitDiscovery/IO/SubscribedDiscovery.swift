@_spi(Machine) import GameKitMachine
import Logging
import NIOCore

/// The discovery machine as the driver runs it: the machine, and who hears its events (each
/// registration's handler, each browse's subscribers), kept under the driver's one lock so that
/// a subscriber that joins takes up exactly where the others are.
struct SubscribedDiscovery: DatagramMachine {
    /// An event, with the handler it goes to.
    enum Delivery {
        case service(@Sendable (ResponderEvent) -> Void, ResponderEvent)
        case browse(@Sendable (BrowseEvent) -> Void, BrowseEvent)
    }

    var machine: DiscoveryMachine
    var serviceHandlers: [ServiceID: @Sendable (ResponderEvent) -> Void] = [:]
    private var browseSubscribers: [ServiceType: [UInt64: @Sendable (BrowseEvent) -> Void]] = [:]
    private var nextSubscriberToken: UInt64 = 0
    private var queued: [Delivery] = []
    private var queuedPosition = 0
    private let logger: Logger

    init(machine: DiscoveryMachine, logger: Logger) {
        self.machine = machine
        self.logger = logger
    }

    // MARK: - DatagramMachine

    /// Logs the message (at trace level), then hands it on.
    mutating func handle(datagram: ByteBuffer, from source: MulticastDNSSource, now: NIODeadline) {
        if self.logger.logLevel <= .trace {
            if let message = try? DNSMessage(decoding: datagram) {
                self.logger.trace("received", metadata: ["from": "\(source.address)", "interface": "\(source.interfaceIndex)", "message": "\(message.logSummary)"])
            } else {
                self.logger.trace("undecodable datagram", metadata: ["from": "\(source.address)", "bytes": "\(datagram.readableBytes)"])
            }
        }
        self.machine.handle(datagram: datagram, from: source, now: now)
    }

    mutating func handleTimeout(now: NIODeadline) {
        self.machine.handleTimeout(now: now)
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> MulticastDNSDestination? {
        self.machine.pollTransmit(now: now, into: &buffer)
    }

    var nextDeadline: NIODeadline? { self.machine.nextDeadline }

    /// Deliveries queued by a subscription first, then the machine's events, each to every
    /// handler that wants it.
    mutating func pollEvent() -> Delivery? {
        while true {
            if self.queuedPosition < self.queued.count {
                defer {
                    self.queuedPosition += 1
                    if self.queuedPosition == self.queued.count {
                        self.queued.removeAll(keepingCapacity: true)
                        self.queuedPosition = 0
                    }
                }
                return self.queued[self.queuedPosition]
            }
            switch self.machine.pollEvent() {
            case nil:
                return nil
            case .responder(let event)?:
                let id: ServiceID
                switch event {
                case .registered(let service, _), .renamed(let service, _): id = service
                }
                if let handler = self.serviceHandlers[id] { return .service(handler, event) }
            case .browse(let event)?:
                self.queue(event)
            }
        }
    }

    // MARK: - Subscriptions

    /// Adds a subscriber to a service type's browse events (starting the browse if it is the
    /// first); returns the token that removes it.
    mutating func subscribe(_ type: ServiceType, now: NIODeadline, _ handler: @escaping @Sendable (BrowseEvent) -> Void) -> UInt64 {
        // Events the machine holds now belong to the existing subscribers; the newcomer starts
        // from the instances known after them, reported as found. All go out, in this order,
        // at the start of the next cycle.
        while let event = self.machine.browser.popEvent() { self.queue(event) }
        self.nextSubscriberToken += 1
        let token = self.nextSubscriberToken
        for instance in self.machine.browser.reported.values.filter({ $0.serviceType == type }).sorted(by: { $0.name.description < $1.name.description }) {
            self.queued.append(.browse(handler, .found(instance)))
        }
        self.browseSubscribers[type, default: [:]][token] = handler
        self.machine.browser.startBrowsing(type, now: now)
        return token
    }

    /// Removes a subscriber; the browse stops with its last one.
    mutating func unsubscribe(_ type: ServiceType, token: UInt64) {
        self.browseSubscribers[type]?[token] = nil
        if self.browseSubscribers[type]?.isEmpty ?? false {
            self.browseSubscribers[type] = nil
            self.machine.browser.stopBrowsing(type)
        }
    }

    /// Queues `event` for the subscribers of its type, in the order they joined.
    private mutating func queue(_ event: BrowseEvent) {
        self.logger.debug("browse", metadata: ["event": "\(event)"])
        for handler in (self.browseSubscribers[event.instance.serviceType] ?? [:]).sorted(by: { $0.key < $1.key }).map(\.value) {
            self.queued.append(.browse(handler, event))
        }
    }
}
