import CoreMetrics
import Crypto
import Logging
import Foundation
import GameKitDiscovery
@_spi(Machine) import GameKitOnline
@_spi(Machine) import GameKitTransport
import NIOConcurrencyHelpers
import NIOCore

/// Drives a ``SessionMachine``: holds it under a lock, binds the transport, keeps discovery in
/// step with what the machine wants, and hands the machine's notifications to the session in
/// order.
///
/// Threading: application calls come from any thread; transport events arrive on the
/// transport's event loop, discovery sightings on a task. Each takes the lock, acts on the
/// machine, and before releasing it passes the resulting notifications to `deliver` (which only
/// enqueues them: delegate calls run later on the delegate queue), so their order is the order
/// things happened. The transport and discovery never call back while holding a lock of their
/// own, so calling them under this lock cannot deadlock.
final class SessionCore: @unchecked Sendable {
    let identity: SessionMachine.Identity
    let serviceType: ServiceType
    let configuration: GKSession.Configuration
    /// The configuration's logger, with this session's name and peer ID as metadata.
    let logger: Logger
    /// Warns once when the delegate queue does not run (a main queue nobody runs).
    let deliveryWatch: DeliveryWatch
    /// `ogk_session_peers` for each state, set whenever a peer's state changes.
    private let peerGauges: [(GKPeerConnectionState, Gauge)]
    private let password: String?
    let slot = TransportSlot()
    let lock = NIOLock()

    // MARK: Guarded by `lock`
    var machine: SessionMachine
    private var deliver: (@Sendable ([SessionNotification], DeliveryContext) -> Void)?
    private(set) var phase = Phase.idle
    private(set) var startTask: Task<GKSessionError?, Never>?
    private var disconnectTimeout: TimeAmount
    private var discovery: DiscoveryEndpoint?
    private var registration: ServiceRegistration?
    private var wantAdvertise = false
    private var wantBrowse = false
    private var browser: ServiceBrowser?
    /// The service instance of each peer the browser reports, for reconfirmation.
    private var instances: [UInt32: ServiceInstance] = [:]
    private var browserGeneration = 0
    /// Calls waiting for room on links or for peers' connections (SessionCore+Waiting.swift);
    /// changed only under `lock`.
    var waiters: [UInt64: Waiter] = [:]
    var nextWaiter: UInt64 = 0
    /// Waiters a flush woke, resumed once the lock is released (``resumeWokenWaiters()``).
    var wokenWaiters: [(CheckedContinuation<WaitOutcome, Never>, WaitOutcome)] = []
    /// Each peer's last failed connection attempt, for a wait that wakes after it (the reason
    /// is thrown rather than a bare "connection failed"); cleared when an awaited attempt starts.
    var lastFailures: [UInt32: GKSessionError] = [:]
    /// Who takes the data of each library channel (``SessionChannel``); data on a channel
    /// nobody takes is dropped.
    var channelReceivers: [UInt8: ChannelReceiver] = [:]
    /// The online room and the LAN sightings merged with it (SessionCore+Online.swift), and a
    /// session failure's reason waiting to be delivered.
    var online = OnlineState()
    /// The configuration's online room, or the one the picker chose before the session started.
    var onlineSettings: GKSession.Configuration.Online?

    /// Takes a library channel's data and the peer it came from, on the transport's event loop.
    typealias ChannelReceiver = @Sendable (ByteBuffer, UInt32) -> Void

    /// What the notifications of one batch need besides themselves.
    struct DeliveryContext: Sendable {
        var names: [UInt32: String] = [:]
        var failures: [UInt32: GKSessionError] = [:]
        /// Why the session failed, when it says more than its code (an online room's error).
        var sessionFailure: GKSessionError?
    }

    enum Phase {
        case idle, starting, running, closed
    }

    init(identity: SessionMachine.Identity, serviceType: ServiceType, password: String?, configuration: GKSession.Configuration, disconnectTimeout: TimeAmount) {
        self.identity = identity
        var logger = configuration.logger
        logger[metadataKey: "session"] = "\(identity.displayName) (\(identity.peerID))"
        self.logger = logger
        let warningLogger = logger
        self.deliveryWatch = DeliveryWatch {
            warningLogger.warning(
                "The delegate queue has not run for \(Int(DeliveryWatch.limit)) s: delegate calls, connection requests and received data are waiting. Run the main queue (RunLoop.main.run(), dispatchMain() or an async main), or set delegateQueue.")
        }
        let factory = configuration.metricsFactory ?? MetricsSystem.factory
        self.peerGauges = GKPeerConnectionState.allCases.map { state in
            (state, Gauge(label: "ogk_session_peers", dimensions: [("session", "\(identity.peerID)"), ("state", "\(state)")], factory: factory))
        }
        self.serviceType = serviceType
        self.password = password
        self.configuration = configuration
        self.onlineSettings = configuration.online
        self.disconnectTimeout = disconnectTimeout
        self.machine = SessionMachine(identity: identity, links: self.slot)
    }

    func setDeliver(_ deliver: @escaping @Sendable ([SessionNotification], DeliveryContext) -> Void) {
        self.lock.withLock { self.deliver = deliver }
    }

    // MARK: - Acting on the machine

    /// Runs `body` on the machine under the lock, then hands on what it produced.
    func perform<Result>(_ body: (inout SessionMachine) throws(GKSessionError) -> Result) throws(GKSessionError) -> Result {
        // Deferred in this order: the lock is released first, then the woken waiters resume.
        defer { self.resumeWokenWaiters() }
        self.lock.lock()
        defer { self.lock.unlock() }
        let result: Result
        do {
            result = try body(&self.machine)
        } catch {
            self.flushLocked()
            throw error
        }
        self.flushLocked()
        return result
    }

    func read<Result>(_ body: (SessionMachine) -> Result) -> Result {
        self.lock.withLock { body(self.machine) }
    }

    func flushLocked() {
        for command in self.machine.takeDiscoveryCommands() {
            switch command {
            case .advertise: self.wantAdvertise = true
            case .withdraw: self.wantAdvertise = false
            case .startBrowsing:
                self.wantBrowse = true
                self.online.sightings.tellMembers(machine: &self.machine)
            case .stopBrowsing:
                self.wantBrowse = false
                self.online.sightings.forgetLAN()
            case .reconfirm(let peerID):
                if let instance = self.instances[peerID] { self.browser?.reconfirm(instance) }
            }
        }
        self.syncDiscoveryLocked()
        let notifications = self.machine.takeNotifications()
        guard !notifications.isEmpty else { return }
        // The display names as they are now, and each failed attempt as an error that says so
        // (made once: the log, the waits, the sequences and the delegate all use it).
        var context = DeliveryContext()
        context.sessionFailure = self.online.unreportedFailure
        self.online.unreportedFailure = nil
        var stateChanged = false
        var unauthenticated: Set<UInt32> = []
        for notification in notifications {
            switch notification {
            case .peerChanged(let peer, _):
                stateChanged = true
                context.names[peer] = self.machine.displayName(of: peer)
            case .connectionRequest(let peer):
                context.names[peer] = self.machine.displayName(of: peer)
            case .connectionFailed(let peer, let code):
                let name = self.machine.displayName(of: peer)
                context.names[peer] = name
                let cause = unauthenticated.remove(peer).map { _ in self.authenticationCauseLocked }
                context.failures[peer] = .connectionFailure(code, peer: peer, name: name, cause: cause)
                self.lastFailures[peer] = context.failures[peer]
            case .authenticationFailed(let peer):
                unauthenticated.insert(peer)
            default:
                break
            }
        }
        self.logLocked(notifications, context)
        if stateChanged {
            let counts = self.machine.peerCounts
            for (state, gauge) in self.peerGauges { gauge.record(counts[state] ?? 0) }
        }
        self.resumeConnectionWaitersLocked(after: notifications, failures: context.failures)
        self.deliver?(notifications, context)
    }

    // MARK: - Starting and stopping

    /// Binds the transport and joins discovery, returning when both are ready (every caller
    /// waits for the one attempt in progress). Failures are reported to the delegate as
    /// `GKSessionCannotEnableError` and returned; a later call tries again.
    @discardableResult
    func start() async -> GKSessionError? {
        let task = self.lock.withLock { () -> Task<GKSessionError?, Never>? in
            if self.phase == .closed { return nil }
            if let task = self.startTask { return task }
            let task = Task { await self.startOnce() }
            self.startTask = task
            return task
        }
        guard let task else { return GKSessionError(.cannotEnableError) }
        let error = await task.value
        if error != nil { self.lock.withLock { self.startTask = nil } }
        return error
    }

    private func startOnce() async -> GKSessionError? {
        self.lock.withLock {
            if self.phase == .idle { self.phase = .starting }
            // A new attempt: an earlier one's failure no longer answers the room's code.
            self.online.failure = nil
        }
        do {
            let endpoint = try await self.bindTransport()
            self.slot.install(endpoint)
            // An online session that keeps to its room uses no multicast DNS at all.
            let nearby = self.onlineConfiguration?.alsoNearby ?? true
            let discovery = nearby ? try await SharedDiscovery.shared.acquire(interfaces: self.configuration.interfaceNames) : nil
            self.logger.debug("started", metadata: [
                "transport": "\(endpoint.localAddress)", "service": "\(self.serviceType)",
                "interfaces": "\(self.configuration.interfaceNames.map { $0.joined(separator: ",") } ?? "all usable")",
            ])
            let closed = self.lock.withLock { () -> Bool in
                guard self.phase == .starting else { return true }
                self.phase = .running
                self.discovery = discovery
                self.syncDiscoveryLocked()
                return false
            }
            if closed {
                if discovery != nil { await SharedDiscovery.shared.release(interfaces: self.configuration.interfaceNames) }
                await self.slot.current?.shutdown()
                self.slot.install(nil)
            }
            return nil
        } catch {
            // Nothing usable now; a later start (setting isAvailable again) tries again.
            if let endpoint = self.slot.current {
                self.slot.install(nil)
                await endpoint.shutdown()
            }
            // The delegate hears the reason (a bad rendezvous address, no interface) with it.
            let failure = GKSessionError(.cannotEnableError, "The session could not start: \(error.localizedDescription)", underlying: error)
            var codeWaiters: [CheckedContinuation<Result<String, GKSessionError>, Never>] = []
            try? self.perform { machine in
                self.online.unreportedFailure = failure
                if self.online.code == nil { codeWaiters = self.failCodeWaitsLocked(failure) }
                machine.discoveryFailed()
            }
            for waiter in codeWaiters { waiter.resume(returning: .failure(failure)) }
            self.lock.withLock { if self.phase == .starting { self.phase = .idle } }
            return failure
        }
    }

    private func bindTransport() async throws -> TransportEndpoint {
        var transport = TransportConfiguration(password: self.password)
        // An online session's room record carries the liveness key, so the key is made here.
        let livenessKey = Curve25519.KeyAgreement.PrivateKey()
        transport.livenessPrivateKey = Array(livenessKey.rawRepresentation)
        let room = try await self.makeOnlineMachine(livenessPublicKey: Array(livenessKey.publicKey.rawRepresentation))
        let online = room?.machine
        if let room {
            // Members prove the room's secret, with the session password, in every handshake:
            // one who knows only what the rendezvous knows fails it (PROTOCOL §18.7).
            transport.preSharedKey = Self.roomKey(secret: room.secret, password: transport.preSharedKey)
            self.lock.withLock { self.online.secret = room.secret }
        }
        transport.logger = self.logger
        transport.logger[metadataKey: "layer"] = "transport"
        transport.metricsFactory = self.configuration.metricsFactory
        transport.metricsDimensions = [("session", "\(self.identity.peerID)")]
        transport.disconnectTimeout = self.lock.withLock { self.disconnectTimeout }
        // Room for the session's own header (type byte, relay destinations) on top of the
        // largest application data.
        transport.maxReliableMessageSize = GKSession.maximumReliableDataSize + Self.headerAllowance
        transport.maxUnreliableMessageSize = GKSession.maximumUnreliableDataSize + Self.headerAllowance
        let onEvent: @Sendable (TransportEvent) -> Void = { [weak self] event in self?.handle(event) }
        let onRoomEvent: @Sendable (RoomEvent) -> Void = { [weak self] event in self?.handle(event) }
        if let host = self.configuration.bindAddress {
            let address = try SocketAddress(ipAddress: host, port: self.configuration.port)
            return try await TransportEndpoint.bind(to: address, configuration: transport, online: online, onEvent: onEvent, onRoomEvent: onRoomEvent)
        }
        do {
            let address = try SocketAddress(ipAddress: "::", port: self.configuration.port)
            return try await TransportEndpoint.bind(to: address, configuration: transport, online: online, onEvent: onEvent, onRoomEvent: onRoomEvent)
        } catch {
            let address = try SocketAddress(ipAddress: "0.0.0.0", port: self.configuration.port)
            return try await TransportEndpoint.bind(to: address, configuration: transport, online: online, onEvent: onEvent, onRoomEvent: onRoomEvent)
        }
    }

    /// What a handshake that failed authentication means here: another session password, or
    /// (online) a peer without the room code's secret part. Called with the lock held.
    var authenticationCauseLocked: GKSessionError.FailureCause {
        self.onlineSettings == nil ? .passwordMismatch : .roomSecretMismatch
    }

    /// The transport's password in an online room: the room code's secret part and the session
    /// password (PROTOCOL §18.2).
    static func roomKey(secret: UInt32, password: [UInt8]?) -> [UInt8] {
        TransportConfiguration.combinedKey([RoomInvitation.bytes(ofSecret: secret), password ?? []])
    }

    /// Bytes of session header a message may add: the type byte and a relay's destination list.
    static let headerAllowance = 3 + 4 * SessionMessage.maximumPeers

    /// Leaves every peer, withdraws the advertisement, stops browsing and closes the socket.
    func shutdown() async {
        var codeWaiters: [CheckedContinuation<Result<String, GKSessionError>, Never>] = []
        let (discovery, waiters) = self.lock.withLock { () -> (DiscoveryEndpoint?, [CheckedContinuation<WaitOutcome, Never>]) in
            guard self.phase != .closed else { return (nil, []) }
            self.phase = .closed
            self.machine.disconnectFromAllPeers()
            self.machine.setAvailable(false)
            self.flushLocked()
            self.registration?.withdraw()
            self.registration = nil
            self.browser?.cancel()
            self.browser = nil
            self.instances.removeAll()
            let discovery = self.discovery
            self.discovery = nil
            let waiters = self.waiters.values.map(\.continuation)
            self.waiters.removeAll()
            codeWaiters = self.online.takeCodeWaiters()
            return (discovery, waiters)
        }
        self.resumeWokenWaiters()
        for waiter in waiters { waiter.resume(returning: .failed(Self.closedError)) }
        for waiter in codeWaiters { waiter.resume(returning: .failure(Self.closedError)) }
        // The goodbyes first, links and advertisement at once: the program may exit as soon as
        // this returns.
        await withTaskGroup(of: Void.self) { group in
            if let endpoint = self.slot.current {
                self.slot.install(nil)
                group.addTask { await endpoint.shutdown() }
            }
            if let discovery {
                group.addTask { await discovery.flush() }
            }
        }
        if discovery != nil {
            await SharedDiscovery.shared.release(interfaces: self.configuration.interfaceNames)
        }
        LiveSessions.shared.remove(self)
    }

    var isClosed: Bool { self.lock.withLock { self.phase == .closed } }

    /// Goodbyes this session's browser heard for its session's advertisements (for tests and
    /// diagnostics: withdrawn peers, as against peers that fell silent).
    var goodbyesHeard: Int { self.lock.withLock { self.browser?.goodbyesHeard ?? 0 } }

    /// The transport's local port, once bound.
    var transportPort: Int? { self.slot.current?.localAddress.port }

    /// A transport link's verification code.
    func transportVerificationCode(_ link: LinkID) -> [UInt8]? {
        self.slot.current?.verificationCode(for: link)
    }

    /// Where a link of the transport sends now.
    func transportLinkAddress(_ link: LinkID) -> SocketAddress? {
        self.slot.current?.statistics(for: link)?.remoteAddress
    }

    /// The transport endpoint's counters, once bound (for diagnostics).
    var transportStatistics: EndpointStatistics? { self.slot.current?.statistics }

    func setDisconnectTimeout(_ timeout: TimeAmount) {
        self.lock.withLock { self.disconnectTimeout = timeout }
        try? self.slot.current?.setDisconnectTimeout(timeout)
    }

    // MARK: - Discovery

    private func syncDiscoveryLocked() {
        guard self.phase == .running, let discovery = self.discovery, let port = self.transportPort else { return }
        switch (self.wantAdvertise, self.registration) {
        case (true, nil):
            let ad = PeerAdvertisement(
                peerID: String(self.identity.peerID), displayName: self.identity.displayName, transportPort: UInt16(port),
                livenessKey: self.slot.current?.livenessPublicKey)
            let service = ServiceDescription(instanceName: ad.instanceName, serviceType: self.serviceType, port: UInt16(port), txt: ad.txtRecord)
            self.registration = try? discovery.register(service)
        case (false, let registration?):
            registration.withdraw()
            self.registration = nil
        default:
            break
        }
        if self.wantBrowse, self.browser == nil {
            self.browserGeneration += 1
            let generation = self.browserGeneration
            // Events are handled on discovery's event loop as they happen, with no task hop in
            // between: under load every hop waits for a thread (gk-bench lan, 32 peers).
            self.browser = try? discovery.browse(self.serviceType) { [weak self] event in
                self?.handle(event, generation: generation)
            }
        } else if !self.wantBrowse, let browser = self.browser {
            browser.cancel()
            self.browser = nil
            self.instances.removeAll()
        }
    }

    private func handle(_ event: BrowseEvent, generation: Int) {
        let instance = event.instance
        guard let advertisement = PeerAdvertisement(txt: instance.txt), let peerID = UInt32(advertisement.peerID) else { return }
        let dualStack = self.slot.current?.localAddress.protocol == .inet6
        let addresses = instance.addresses.sorted { $0.preference < $1.preference }
            .compactMap { $0.socketAddress(port: instance.port, dualStack: dualStack) }
        switch event {
        case .found, .updated:
            self.logger.debug("peer seen", metadata: [
                "peer": "\(advertisement.displayName) (\(peerID))", "addresses": "\(addresses)", "busy": "\(advertisement.isBusy)",
            ])
        case .lost:
            self.logger.debug("peer's advertisement gone", metadata: ["peer": "\(advertisement.displayName) (\(peerID))"])
        }
        try? self.perform { machine throws(GKSessionError) in
            guard generation == self.browserGeneration else { return }
            switch event {
            case .found, .updated:
                self.instances[peerID] = instance
                let sighting = PeerSightings.LANSighting(
                    displayName: advertisement.displayName, addresses: addresses, isBusy: advertisement.isBusy,
                    livenessKey: advertisement.livenessKey)
                self.online.sightings.lanSighting(peerID, sighting, machine: &machine)
            case .lost:
                self.instances[peerID] = nil
                self.online.sightings.lanSighting(peerID, nil, machine: &machine)
            }
        }
    }

    // MARK: - Transport events

    private func handle(_ event: TransportEvent) {
        var resumed: [CheckedContinuation<WaitOutcome, Never>] = []
        var channelData: [SessionChannelDelivery] = []
        var receivers: [UInt8: ChannelReceiver] = [:]
        defer {
            // Outside the lock: a receiver may call the session (to answer, for one).
            for delivery in channelData { receivers[delivery.channel]?(delivery.data, delivery.from) }
        }
        try? self.perform { machine throws(GKSessionError) in
            defer {
                channelData = machine.takeChannelDeliveries()
                if !channelData.isEmpty { receivers = self.channelReceivers }
            }
            machine.handle(event)
            switch event {
            case .linkClosed(let link, _), .sendBufferAvailable(let link):
                resumed = self.takeRoomWaitersLocked(for: link)
            case .handshakeFailed(let address, .authenticationFailed):
                // Someone tried to connect here without the password (online: the room code's
                // secret part): the one attempt it had is spent, and the user hears of it.
                let cause = self.authenticationCauseLocked
                let who = MemberAddress.peer(of: address).map { "room member \(machine.displayName(of: $0) ?? "?") (\($0))" } ?? "\(address)"
                self.logger.warning("incoming handshake not authenticated", metadata: ["from": "\(who)", "why": "\(cause.explanation)"])
            default:
                break
            }
        }
        for waiter in resumed { waiter.resume(returning: .retry) }
    }
}
