@_spi(Machine) import GameKitMachine
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The discovery machine on the package's one driver, over one socket per interface and
/// address family, following the interfaces as they come and go.
///
/// The driver (``DatagramDriver``) does the locking, the cycle and the timer. This type adds
/// what only mDNS has: the sockets per interface (``MulticastSocketSet``), re-read
/// periodically; the check for another mDNS stack on the port while a name is being claimed
/// (``PortSharing``); and the hooks that release registrations at shutdown.
final class DiscoveryCore: @unchecked Sendable {
    static let portCheckInterval = TimeAmount.seconds(1)
    /// How long shutdown waits for the goodbyes to leave.
    static let shutdownFlushLimit = TimeAmount.milliseconds(500)

    let eventLoop: EventLoop
    private let configuration: DiscoveryConfiguration
    private let logger: Logger
    let driver: DatagramDriver<SubscribedDiscovery>
    /// Called once at shutdown (registrations waiting for their name are released).
    private let shutdownHooks = NIOLockedValueBox<[ServiceID: @Sendable () -> Void]>([:])

    // MARK: Event loop only
    private let sockets: MulticastSocketSet
    private var interfacePoll: RepeatedTask?
    private var portCheck: RepeatedTask?
    private var currentInterfaces: [NetworkInterface] = []
    /// When the port was last checked for other mDNS stacks.
    private var portCheckedAt: NIODeadline?

    init(configuration: DiscoveryConfiguration, eventLoop: EventLoop, hostLabel: String, logger: Logger) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.logger = logger
        self.sockets = MulticastSocketSet(eventLoop: eventLoop, port: configuration.port, logger: logger)
        let machine = SubscribedDiscovery(machine: DiscoveryMachine(hostLabel: hostLabel, random: .system()), logger: logger)
        self.driver = DatagramDriver(machine: machine, eventLoop: eventLoop) { delivery in
            switch delivery {
            case .service(let handler, let event): handler(event)
            case .browse(let handler, let event): handler(event)
            }
        }
    }

    // MARK: - Start and stop

    /// Opens the sockets of the chosen interfaces and starts polling for changes.
    ///
    /// - Throws: `DiscoveryError.noUsableInterface` when no interface could be used.
    func start() async throws {
        try await self.eventLoop.submit { self.driver.attach(self.sockets) }.get()
        try await self.refreshInterfaces()
        let usable = try await self.eventLoop.submit { !self.sockets.sockets.isEmpty }.get()
        guard usable else {
            await self.closeSockets()
            throw DiscoveryError.noUsableInterface
        }
        let interval = self.configuration.interfacePollInterval
        try await self.eventLoop.submit {
            self.interfacePoll = self.eventLoop.scheduleRepeatedAsyncTask(initialDelay: interval, delay: interval) { _ in
                self.eventLoop.makeFutureWithTask { try? await self.refreshInterfaces() }
            }
            // While a name is being claimed, at most once a second: the port matters only to a
            // probe (RFC 6762 §15.1), and reading /proc on every cycle would cost every process
            // on the host a table walk per multicast packet.
            self.portCheck = self.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: Self.portCheckInterval) { _ in
                self.checkPortSharing()
            }
        }.get()
    }

    /// Sends goodbyes for every service, then closes the sockets.
    func shutdown() async {
        let first = await self.driver.shutdown(flushLimit: Self.shutdownFlushLimit) { discovery, now in
            discovery.machine.responder.unregisterAll(now: now)
        }
        guard first else { return }
        let hooks = self.shutdownHooks.withLockedValue { hooks in
            defer { hooks = [:] }
            return Array(hooks.values)
        }
        for hook in hooks { hook() }
        try? await self.eventLoop.submit {
            self.interfacePoll?.cancel()
            self.interfacePoll = nil
            self.portCheck?.cancel()
            self.portCheck = nil
        }.get()
        await self.closeSockets()
    }

    private func closeSockets() async {
        try? await self.eventLoop.flatSubmit { self.sockets.close() }.get()
    }

    // MARK: - Interfaces

    /// Re-reads the interfaces; opens and closes sockets to match and tells the machine.
    private func refreshInterfaces() async throws {
        let interfaces = InterfaceEnumerator.selected(names: self.configuration.interfaceNames, environment: InterfaceEnumerator.processEnvironment())
        let unchanged = try await self.eventLoop.submit { interfaces == self.currentInterfaces }.get()
        if unchanged || self.driver.isClosing { return }
        var wanted: [MulticastSocketSet.Key: NetworkInterface] = [:]
        for interface in interfaces {
            if self.configuration.useIPv4, !interface.ipv4.isEmpty { wanted[.init(interfaceIndex: interface.index, family: .ipv4)] = interface }
            if self.configuration.useIPv6, !interface.ipv6.isEmpty { wanted[.init(interfaceIndex: interface.index, family: .ipv6)] = interface }
        }
        // An IPv4 socket sends from the address it was opened with: reopen it when that changed.
        let wantedSources = wanted.mapValues { $0.ipv4.first }
        let (existing, unwanted) = try await self.eventLoop.submit { () -> (Set<MulticastSocketSet.Key>, Set<MulticastSocketSet.Key>) in
            let current = self.sockets.sockets.keys
            let keep = Set(current.filter { key in
                wantedSources[key] != nil && (key.family == .ipv6 || self.sockets.sources[key] == wantedSources[key] ?? nil)
            })
            return (keep, Set(current).subtracting(keep))
        }.get()
        for key in unwanted {
            if let channel = try await self.eventLoop.submit({ self.sockets.remove(key) }).get() {
                try? await channel.close()
            }
        }
        var allOpened = true
        for (key, interface) in wanted where !existing.contains(key) {
            do {
                let driver = self.driver
                let index = interface.index
                let channel = try await MulticastSocket.open(family: key.family, interface: interface, port: self.configuration.port, eventLoop: self.eventLoop) {
                    DriverChannelHandler(driver: driver, source: { envelope in Self.source(of: envelope, socketInterface: index) })
                }
                // Shut down meanwhile: this socket must not outlive the endpoint.
                if self.driver.isClosing {
                    try? await channel.close()
                    return
                }
                try await self.eventLoop.submit { self.sockets.add(channel, for: key, source: interface.ipv4.first) }.get()
                self.logger.debug("listening", metadata: ["interface": "\(interface.name)", "family": "\(key.family)"])
            } catch {
                allOpened = false
                self.logger.warning("mDNS socket on \(interface.name) (\(key.family)) failed: \(error)")
            }
        }
        let complete = allOpened
        try await self.eventLoop.submit {
            let indexes = Set(self.sockets.sockets.keys.map(\.interfaceIndex))
            let active = interfaces.filter { indexes.contains($0.index) }
            // After a failure the next poll tries again.
            self.currentInterfaces = complete ? interfaces : []
            _ = self.driver.perform { discovery, now in discovery.machine.setInterfaces(active, now: now) }
            // Before the host name's first probe (armed by the cycle just requested, so later on
            // this loop): whether it may ask for unicast answers depends on who else holds the
            // port. Checked later, a first probe could ask for one that the kernel then hands to
            // the other process on the port.
            self.checkPortSharing()
        }.get()
    }

    /// Where a datagram came from, or nil for one that belongs to another interface's socket.
    /// (Linux filters IPv6 multicast by group only, not by the interface it was joined on, so a
    /// socket may hear another interface's traffic, which that interface's socket handles.)
    private static func source(of envelope: AddressedEnvelope<ByteBuffer>, socketInterface: Int) -> MulticastDNSSource? {
        let info = envelope.metadata?.packetInfo
        if let info, info.destinationAddress.isMulticast, info.interfaceIndex != socketInterface { return nil }
        return MulticastDNSSource(address: envelope.remoteAddress, interfaceIndex: info?.interfaceIndex ?? socketInterface)
    }

    /// The interfaces in use.
    var interfaces: [NetworkInterface] {
        self.driver.read { Array($0.machine.responder.interfaces.values).sorted { $0.index < $1.index } }
    }

    /// Whether another mDNS stack shares the port (then replies to this one's probes must come
    /// by multicast: a unicast reply would reach only one of the two). Event loop only.
    private func checkPortSharing() {
        let now = self.eventLoop.now
        guard self.portCheckedAt.map({ now - $0 >= Self.portCheckInterval }) ?? true,
            self.driver.read({ $0.machine.responder.hasUnestablishedClaims })
        else { return }
        self.portCheckedAt = now
        let shared = PortSharing.isShared(port: self.configuration.port)
        self.driver.withLockedMachine { $0.machine.responder.mayAskForUnicast = !shared }
    }

    // MARK: - Application side (any thread)

    /// Runs `body` on the machine under the lock, then schedules a cycle. A registration checks
    /// the port first (its first probe asks for unicast replies only when nobody shares it).
    func perform<Result>(_ body: (inout DiscoveryMachine, NIODeadline) throws -> Result) throws -> Result {
        // Whether a claim is in progress is read under the same lock, not taken again after.
        let outcome = try self.driver.perform { (discovery: inout SubscribedDiscovery, now) throws -> (Result, Bool) in
            (try body(&discovery.machine, now), discovery.machine.responder.hasUnestablishedClaims)
        }
        guard let (result, claiming) = outcome else { throw DiscoveryError.shutDown }
        if claiming { self.eventLoop.execute { self.checkPortSharing() } }
        return result
    }

    func read<Result>(_ body: (DiscoveryMachine) -> Result) -> Result {
        self.driver.read { body($0.machine) }
    }

    func setServiceHandler(_ id: ServiceID, _ handler: (@Sendable (ResponderEvent) -> Void)?) {
        self.driver.withLockedMachine { $0.serviceHandlers[id] = handler }
    }

    /// Adds a subscriber to a service type's browse events (starting the browse if it is the
    /// first); returns the token that removes it.
    func subscribe(_ type: ServiceType, _ handler: @escaping @Sendable (BrowseEvent) -> Void) throws -> UInt64 {
        let token = self.driver.perform { discovery, now in discovery.subscribe(type, now: now, handler) }
        guard let token else { throw DiscoveryError.shutDown }
        return token
    }

    /// Registers a closure to run once at shutdown.
    func onShutdown(_ id: ServiceID, _ hook: (@Sendable () -> Void)?) {
        self.shutdownHooks.withLockedValue { $0[id] = hook }
    }

    func unsubscribe(_ type: ServiceType, token: UInt64) {
        self.driver.withLockedMachine { $0.unsubscribe(type, token: token) }
    }

    /// Runs a cycle now and waits until what it sent is on the wire: withdrawals' goodbyes have
    /// left when it returns.
    func flush() async {
        // What is due now (a delayed answer that just fell due) goes too.
        self.driver.withLockedMachine { $0.handleTimeout(now: self.eventLoop.now) }
        try? await self.driver.flush().get()
    }
}
