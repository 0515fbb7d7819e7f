import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The discovery machine behind a lock, its sockets, and the event-loop cycle that drives it
/// (the same shape as the transport's endpoint core).
///
/// Application calls take the lock, change the machine and ask for a cycle. The cycle, on the
/// event loop, runs the machine's timers, takes its messages and events under the lock, then
/// with the lock released writes the messages and hands the events to their handlers, and
/// re-arms the single timer. Interfaces are re-read periodically; sockets follow them.
final class DiscoveryCore: @unchecked Sendable {
    struct SocketKey: Hashable { var interfaceIndex: Int; var family: MulticastSocket.Family }
    static let portCheckInterval = TimeAmount.seconds(1)

    let eventLoop: EventLoop
    private let configuration: DiscoveryConfiguration
    private let logger: Logger
    private let lock = NIOLock()

    // MARK: Guarded by `lock`
    private var machine: DiscoveryMachine
    private var serviceHandlers: [ServiceID: @Sendable (ResponderEvent) -> Void] = [:]
    private var browseSubscribers: [ServiceType: [UInt64: @Sendable (BrowseEvent) -> Void]] = [:]
    private var nextSubscriberToken: UInt64 = 0
    private var cycleRequested = false
    private var isShutDown = false
    /// Browse events taken out of the machine outside a cycle (when a subscriber joins), to be
    /// delivered first by the next cycle, in order.
    private var queuedBrowseDeliveries: [(@Sendable (BrowseEvent) -> Void, BrowseEvent)] = []
    /// Called once at shutdown (registrations waiting for their name are released).
    private var shutdownHooks: [ServiceID: @Sendable () -> Void] = [:]

    // MARK: Event loop only
    private var sockets: [SocketKey: Channel] = [:]
    private var socketSources: [SocketKey: IPv4Bytes] = [:]
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var interfacePoll: RepeatedTask?
    private var currentInterfaces: [NetworkInterface] = []
    /// When the port was last checked for other mDNS stacks (``PortSharing``).
    private var portCheckedAt: NIODeadline?

    init(configuration: DiscoveryConfiguration, eventLoop: EventLoop, hostLabel: String, logger: Logger) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.logger = logger
        self.machine = DiscoveryMachine(hostLabel: hostLabel, random: .system())
    }

    // MARK: - Start and stop

    /// Opens the sockets of the chosen interfaces and starts polling for changes.
    ///
    /// - Throws: `DiscoveryError.noUsableInterface` when no interface could be used.
    func start() async throws {
        try await self.refreshInterfaces()
        let usable = try await self.eventLoop.submit { !self.sockets.isEmpty }.get()
        guard usable else {
            await self.closeSockets()
            throw DiscoveryError.noUsableInterface
        }
        let interval = self.configuration.interfacePollInterval
        try await self.eventLoop.submit {
            self.interfacePoll = self.eventLoop.scheduleRepeatedAsyncTask(initialDelay: interval, delay: interval) { _ in
                self.eventLoop.makeFutureWithTask { try? await self.refreshInterfaces() }
            }
        }.get()
    }

    /// Sends goodbyes for every service, then closes the sockets.
    func shutdown() async {
        let alreadyShutDown = self.lock.withLock { () -> Bool in
            defer { self.isShutDown = true }
            if !self.isShutDown { self.machine.responder.unregisterAll(now: .now()) }
            return self.isShutDown
        }
        guard !alreadyShutDown else { return }
        let hooks = self.lock.withLock { () -> [@Sendable () -> Void] in
            defer { self.shutdownHooks = [:] }
            return Array(self.shutdownHooks.values)
        }
        for hook in hooks { hook() }
        try? await self.eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            self.interfacePoll?.cancel()
            self.interfacePoll = nil
            self.timer?.cancel()
            self.timer = nil
            return self.writeOutgoing()
        }.get()
        await self.closeSockets()
    }

    private func closeSockets() async {
        let channels = (try? await self.eventLoop.submit { () -> [Channel] in
            defer { self.sockets.removeAll() }
            return Array(self.sockets.values)
        }.get()) ?? []
        for channel in channels { try? await channel.close() }
    }

    // MARK: - Interfaces

    /// Re-reads the interfaces; opens and closes sockets to match and tells the machine.
    private func refreshInterfaces() async throws {
        let interfaces = InterfaceEnumerator.selected(names: self.configuration.interfaceNames, environment: InterfaceEnumerator.processEnvironment())
        let unchanged = try await self.eventLoop.submit { interfaces == self.currentInterfaces }.get()
        if unchanged || self.lock.withLock({ self.isShutDown }) { return }
        var wanted: [SocketKey: NetworkInterface] = [:]
        for interface in interfaces {
            if self.configuration.useIPv4, !interface.ipv4.isEmpty { wanted[SocketKey(interfaceIndex: interface.index, family: .ipv4)] = interface }
            if self.configuration.useIPv6, !interface.ipv6.isEmpty { wanted[SocketKey(interfaceIndex: interface.index, family: .ipv6)] = interface }
        }
        // An IPv4 socket sends from the address it was opened with: reopen it when that changed.
        let wantedSources = wanted.mapValues { $0.ipv4.first }
        let (existing, unwanted) = try await self.eventLoop.submit { () -> (Set<SocketKey>, Set<SocketKey>) in
            let keep = Set(self.sockets.keys.filter { key in
                wantedSources[key] != nil && (key.family == .ipv6 || self.socketSources[key] == wantedSources[key] ?? nil)
            })
            return (keep, Set(self.sockets.keys).subtracting(keep))
        }.get()
        for key in unwanted {
            if let channel = try await self.eventLoop.submit({ () -> Channel? in
                self.socketSources[key] = nil
                return self.sockets.removeValue(forKey: key)
            }).get() {
                try? await channel.close()
            }
        }
        var allOpened = true
        for (key, interface) in wanted where !existing.contains(key) {
            do {
                let channel = try await MulticastSocket.open(family: key.family, interface: interface, port: self.configuration.port, eventLoop: self.eventLoop) {
                    DiscoveryChannelHandler(core: self, interfaceIndex: interface.index)
                }
                // Shut down meanwhile: this socket must not outlive the endpoint.
                if self.lock.withLock({ self.isShutDown }) {
                    try? await channel.close()
                    return
                }
                try await self.eventLoop.submit {
                    self.sockets[key] = channel
                    self.socketSources[key] = interface.ipv4.first
                }.get()
                self.logger.debug("listening", metadata: ["interface": "\(interface.name)", "family": "\(key.family)"])
            } catch {
                allOpened = false
                self.logger.warning("mDNS socket on \(interface.name) (\(key.family)) failed: \(error)")
            }
        }
        let active = try await self.eventLoop.submit { () -> [NetworkInterface] in
            let indexes = Set(self.sockets.keys.map(\.interfaceIndex))
            return interfaces.filter { indexes.contains($0.index) }
        }.get()
        let complete = allOpened
        try await self.eventLoop.submit {
            // After a failure the next poll tries again.
            self.currentInterfaces = complete ? interfaces : []
            self.lock.withLock { self.machine.setInterfaces(active, now: .now()) }
            self.runCycle()
        }.get()
    }

    /// The interfaces in use.
    var interfaces: [NetworkInterface] {
        self.lock.withLock { Array(self.machine.responder.interfaces.values).sorted { $0.index < $1.index } }
    }

    // MARK: - Application side (any thread)

    /// Runs `body` on the machine under the lock, then schedules a cycle.
    func perform<Result>(_ body: (inout DiscoveryMachine, NIODeadline) throws -> Result) throws -> Result {
        let result: Result
        let schedule: Bool
        self.lock.lock()
        guard !self.isShutDown else {
            self.lock.unlock()
            throw DiscoveryError.shutDown
        }
        do {
            result = try body(&self.machine, .now())
        } catch {
            self.lock.unlock()
            throw error
        }
        schedule = !self.cycleRequested
        self.cycleRequested = true
        self.lock.unlock()
        if schedule { self.eventLoop.execute { self.runCycle() } }
        return result
    }

    func read<Result>(_ body: (DiscoveryMachine) -> Result) -> Result {
        self.lock.withLock { body(self.machine) }
    }

    func setServiceHandler(_ id: ServiceID, _ handler: (@Sendable (ResponderEvent) -> Void)?) {
        self.lock.withLock { self.serviceHandlers[id] = handler }
    }

    /// Adds a subscriber to a service type's browse events (starting the browse if it is the
    /// first); returns the token that removes it.
    func subscribe(_ type: ServiceType, _ handler: @escaping @Sendable (BrowseEvent) -> Void) throws -> UInt64 {
        try self.perform { machine, now in
            // Events the machine holds now belong to the existing subscribers; the newcomer
            // starts from the instances known after them, reported as found. All go out, in
            // this order, at the start of the next cycle.
            self.queueBrowseEvents(machine.browser.takeEvents())
            self.nextSubscriberToken += 1
            let token = self.nextSubscriberToken
            for instance in machine.browser.reported.values.filter({ $0.serviceType == type }).sorted(by: { $0.name.description < $1.name.description }) {
                self.queuedBrowseDeliveries.append((handler, .found(instance)))
            }
            self.browseSubscribers[type, default: [:]][token] = handler
            machine.browser.startBrowsing(type, now: now)
            return token
        }
    }

    /// Queues `events` for the subscribers of their types (lock held).
    private func queueBrowseEvents(_ events: [BrowseEvent]) {
        for event in events {
            self.logger.debug("browse", metadata: ["event": "\(event)"])
            for handler in (self.browseSubscribers[event.instance.serviceType] ?? [:]).sorted(by: { $0.key < $1.key }).map(\.value) {
                self.queuedBrowseDeliveries.append((handler, event))
            }
        }
    }

    /// Registers a closure to run once at shutdown.
    func onShutdown(_ id: ServiceID, _ hook: (@Sendable () -> Void)?) {
        self.lock.withLock { self.shutdownHooks[id] = hook }
    }

    func unsubscribe(_ type: ServiceType, token: UInt64) {
        self.lock.withLock {
            self.browseSubscribers[type]?[token] = nil
            if self.browseSubscribers[type]?.isEmpty ?? false {
                self.browseSubscribers[type] = nil
                self.machine.browser.stopBrowsing(type)
            }
        }
    }

    // MARK: - Event loop side

    func receive(_ bytes: ByteBuffer, from source: SocketAddress, interfaceIndex: Int) {
        guard let message = try? DNSMessage(decoding: bytes) else {
            self.logger.trace("undecodable datagram", metadata: ["from": "\(source)", "bytes": "\(bytes.readableBytes)"])
            return
        }
        self.logger.trace("received", metadata: ["from": "\(source)", "interface": "\(interfaceIndex)", "message": "\(message.logSummary)"])
        let proceed = self.lock.withLock { () -> Bool in
            guard !self.isShutDown else { return false }
            self.machine.receive(IncomingMessage(message: message, interfaceIndex: interfaceIndex, source: source), now: .now())
            return true
        }
        if proceed { self.runCycle() }
    }

    /// Runs due timers, delivers events, writes messages, re-arms the timer.
    /// Runs a cycle now and waits until what it sent is on the wire: withdrawals' goodbyes have
    /// left when it returns.
    func flush() async {
        try? await self.eventLoop.flatSubmit { self.runCycle() }.get()
    }

    /// Advances the machine, sends what it produced and hands on its events; the future
    /// completes when the sends have.
    @discardableResult
    func runCycle() -> EventLoopFuture<Void> {
        self.eventLoop.assertInEventLoop()
        var serviceEvents: [(@Sendable (ResponderEvent) -> Void, ResponderEvent)] = []
        var browseEvents: [(@Sendable (BrowseEvent) -> Void, BrowseEvent)] = []
        // At most once a second, and only while a name is waiting or probing: the port matters
        // only to a probe (RFC 6762 §15.1), and reading /proc on every cycle would cost every
        // process on the host a table walk per multicast packet.
        let checkNow = NIODeadline.now()
        var shared: Bool?
        if self.portCheckedAt.map({ checkNow - $0 >= Self.portCheckInterval }) ?? true,
            self.lock.withLock({ self.machine.responder.hasUnestablishedClaims })
        {
            self.portCheckedAt = checkNow
            shared = PortSharing.isShared(port: self.configuration.port)
        }
        let deadline = self.lock.withLock { () -> NIODeadline? in
            if let shared { self.machine.responder.mayAskForUnicast = !shared }
            self.cycleRequested = false
            guard !self.isShutDown else { return nil }
            let now = NIODeadline.now()
            self.machine.advance(now: now)
            for event in self.machine.responder.takeEvents() {
                let id: ServiceID
                switch event {
                case .registered(let service, _), .renamed(let service, _): id = service
                }
                if let handler = self.serviceHandlers[id] { serviceEvents.append((handler, event)) }
            }
            self.queueBrowseEvents(self.machine.browser.takeEvents())
            browseEvents = self.queuedBrowseDeliveries
            self.queuedBrowseDeliveries = []
            return self.machine.nextDeadline
        }
        let written = self.writeOutgoing()
        for (handler, event) in serviceEvents { handler(event) }
        for (handler, event) in browseEvents { handler(event) }
        self.arm(deadline)
        return written
    }

    @discardableResult
    private func writeOutgoing() -> EventLoopFuture<Void> {
        let outgoing = self.lock.withLock { self.machine.takeOutgoing() }
        var futures: [EventLoopFuture<Void>] = []
        for item in outgoing {
            let bytes = item.message.encoded()
            self.logger.trace("sending", metadata: ["to": "\(item.destination)", "interface": "\(item.interfaceIndex)", "message": "\(item.message.logSummary)"])
            switch item.destination {
            case .multicast:
                for family in [MulticastSocket.Family.ipv4, .ipv6] {
                    guard let channel = self.sockets[SocketKey(interfaceIndex: item.interfaceIndex, family: family)] else { continue }
                    futures.append(channel.writeAndFlush(AddressedEnvelope(remoteAddress: self.destination(family), data: bytes)))
                }
            case .unicast(let address):
                let family: MulticastSocket.Family = address.protocol == .inet6 ? .ipv6 : .ipv4
                let channel = self.sockets[SocketKey(interfaceIndex: item.interfaceIndex, family: family)]
                    ?? self.sockets.first(where: { $0.key.family == family })?.value
                if let channel {
                    futures.append(channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: bytes)))
                }
            }
        }
        // A failed send (an interface that just went away) loses one message, which mDNS's
        // repetitions make good; it is not an error of the endpoint.
        return EventLoopFuture.whenAllComplete(futures, on: self.eventLoop).map { _ in }
    }

    private func destination(_ family: MulticastSocket.Family) -> SocketAddress {
        var group = MulticastSocket.group(family)
        if self.configuration.port != MulticastDNSAddress.port {
            group.port = self.configuration.port
        }
        return group
    }

    private func arm(_ deadline: NIODeadline?) {
        guard deadline != self.timerDeadline else { return }
        self.timer?.cancel()
        self.timerDeadline = deadline
        guard let deadline else {
            self.timer = nil
            return
        }
        self.timer = self.eventLoop.scheduleTask(deadline: deadline) { [self] in
            self.timerDeadline = nil
            self.timer = nil
            self.runCycle()
        }
    }
}

/// Hands received datagrams to the core, with the interface they arrived on.
final class DiscoveryChannelHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let core: DiscoveryCore
    private let interfaceIndex: Int

    init(core: DiscoveryCore, interfaceIndex: Int) {
        self.core = core
        self.interfaceIndex = interfaceIndex
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        let info = envelope.metadata?.packetInfo
        // Linux filters IPv6 multicast by group only, not by the interface it was joined on, so
        // a socket may hear another interface's traffic, which that interface's socket handles.
        if let info, info.destinationAddress.isMulticast, info.interfaceIndex != self.interfaceIndex { return }
        let index = info?.interfaceIndex ?? self.interfaceIndex
        self.core.receive(envelope.data, from: envelope.remoteAddress, interfaceIndex: index)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // ICMP errors for unicast replies and the like: nothing to do, keep the socket.
    }
}
