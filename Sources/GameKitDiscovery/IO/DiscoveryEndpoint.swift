import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A multicast DNS responder and browser on the chosen interfaces: advertise services, browse
/// for others. No daemon is needed; the sockets share port 5353 with any other mDNS stack on the
/// host (Avahi, mDNSResponder, python-zeroconf, other processes of this library).
///
/// ```swift
/// let discovery = try await DiscoveryEndpoint.start()
/// let registration = try discovery.register(ServiceDescription(
///     instanceName: "Alice", serviceType: try ServiceType("_chat._udp"), port: 7000))
/// let browser = try discovery.browse(try ServiceType("_chat._udp"))
/// for await event in browser { print(event) }
/// ```
public final class DiscoveryEndpoint: Sendable {
    let core: DiscoveryCore

    private init(core: DiscoveryCore) {
        self.core = core
    }

    /// Opens the mDNS sockets on the configured interfaces.
    ///
    /// - Throws: `DiscoveryError.noUsableInterface` when no interface can be used.
    public static func start(
        configuration: DiscoveryConfiguration = DiscoveryConfiguration(),
        eventLoopGroup: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "opengamekit.discovery")
    ) async throws -> DiscoveryEndpoint {
        let label = configuration.hostLabel ?? Self.defaultHostLabel()
        let core = DiscoveryCore(configuration: configuration, eventLoop: eventLoopGroup.next(), hostLabel: label, logger: logger)
        try await core.start()
        return DiscoveryEndpoint(core: core)
    }

    /// Advertises a service. Probing and announcing take about a second; `onEvent` hears when
    /// the name is established (`registered`) or had to change (`renamed`).
    ///
    /// - Throws: `DiscoveryError.invalidService` when the instance name does not fit a label;
    ///   `DiscoveryError.shutDown` after `shutdown()`.
    public func register(_ service: ServiceDescription, onEvent: (@Sendable (ResponderEvent) -> Void)? = nil) throws -> ServiceRegistration {
        guard service.txt.wireLength <= TXTRecord.maximumWireLength else {
            throw DiscoveryError.invalidService("TXT record of \(service.txt.wireLength) bytes (at most \(TXTRecord.maximumWireLength))")
        }
        let id = try self.core.perform { machine, now in
            do {
                return try machine.responder.register(service, now: now)
            } catch {
                throw DiscoveryError.invalidService("\(error)")
            }
        }
        let registration = ServiceRegistration(core: self.core, id: id)
        self.core.setServiceHandler(id) { event in
            registration.handle(event)
            onEvent?(event)
        }
        self.core.onShutdown(id) { [weak registration] in registration?.releaseWaiters() }
        return registration
    }

    /// Browses for a service type until the browser is cancelled. Instances are reported found
    /// only once resolved (SRV, TXT and at least one address).
    ///
    /// `onEvent`, if given, hears every event from the start, on the endpoint's event loop, as
    /// soon as it happens (no task hop: the quickest way to react); the browser is also an
    /// `AsyncSequence` of the same events.
    public func browse(_ type: ServiceType, onEvent: (@Sendable (BrowseEvent) -> Void)? = nil) throws -> ServiceBrowser {
        try ServiceBrowser(core: self.core, type: type, onEvent: onEvent)
    }

    /// The interfaces in use now, with their addresses.
    public var interfaces: [NetworkInterface] { self.core.interfaces }

    /// Returns once every packet due now has been sent: after ``ServiceRegistration/withdraw()``,
    /// the goodbyes are on the wire (for a program about to exit).
    public func flush() async {
        await self.core.flush()
    }

    /// Withdraws every service (goodbye packets) and closes the sockets.
    public func shutdown() async {
        await self.core.shutdown()
    }

    /// `<host name>-<4 random hex digits>`, restricted to letters, digits and hyphens.
    static func defaultHostLabel() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let name = gethostname(&buffer, buffer.count) == 0
            ? String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) : "host"
        let first = name.split(separator: ".").first.map(String.init) ?? "host"
        let cleaned = String(first.map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "-" }.prefix(50))
        var random = SystemRandomNumberGenerator()
        let suffix = String(UInt16.random(in: .min ... .max, using: &random), radix: 16)
        return "\(cleaned.isEmpty ? "host" : cleaned)-\(String(repeating: "0", count: 4 - suffix.count))\(suffix)"
    }
}

/// A registered service. Keep it to keep the service advertised; `withdraw()` ends it.
public final class ServiceRegistration: Sendable {
    private let core: DiscoveryCore
    /// The service's identity within its endpoint.
    public let id: ServiceID
    private let state = NIOLockedValueBox<(registered: DNSName?, waiters: [CheckedContinuation<DNSName, Error>])>((nil, []))

    init(core: DiscoveryCore, id: ServiceID) {
        self.core = core
        self.id = id
    }

    /// The full instance name now: the one asked for, or the one conflicts led to.
    public var name: DNSName? {
        self.core.read { $0.responder.instanceName(of: self.id) }
    }

    /// Waits until the name has been probed and announced; returns it.
    ///
    /// - Throws: `DiscoveryError.shutDown` if the service is withdrawn first.
    public func registered() async throws -> DNSName {
        guard self.core.read({ $0.responder.instanceName(of: self.id) }) != nil else { throw DiscoveryError.shutDown }
        return try await withCheckedThrowingContinuation { continuation in
            let ready: DNSName? = self.state.withLockedValue { state in
                if let name = state.registered { return name }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Replaces the TXT record; the new one is announced.
    ///
    /// - Throws: `DiscoveryError.invalidService` for a record over `TXTRecord.maximumWireLength`
    ///   bytes; `DiscoveryError.shutDown` after shutdown.
    public func updateTXT(_ txt: TXTRecord) throws {
        guard txt.wireLength <= TXTRecord.maximumWireLength else {
            throw DiscoveryError.invalidService("TXT record of \(txt.wireLength) bytes (at most \(TXTRecord.maximumWireLength))")
        }
        try self.core.perform { machine, now in machine.responder.updateTXT(self.id, txt, now: now) }
    }

    /// Withdraws the service: goodbye packets go out at once.
    public func withdraw() {
        _ = try? self.core.perform { machine, now in machine.responder.unregister(self.id, now: now) }
        self.core.setServiceHandler(self.id, nil)
        self.core.onShutdown(self.id, nil)
        self.releaseWaiters()
    }

    /// Fails every `registered()` still waiting (withdrawn, or the endpoint shut down).
    func releaseWaiters() {
        let waiters = self.state.withLockedValue { state in
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(throwing: DiscoveryError.shutDown) }
    }

    func handle(_ event: ResponderEvent) {
        switch event {
        case .registered(_, let name):
            let waiters = self.state.withLockedValue { state in
                state.registered = name
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: name) }
        case .renamed:
            self.state.withLockedValue { $0.registered = nil }
        }
    }
}

/// Browse events for one service type, as an `AsyncSequence` and through a callback.
///
/// Iterate it (`for await event in browser`), or set `onEvent`; both see every event. The
/// browse stops when `cancel()` is called or the browser is deinitialised.
public final class ServiceBrowser: AsyncSequence, Sendable {
    public typealias Element = BrowseEvent

    private let core: DiscoveryCore
    /// The service type browsed for.
    public let serviceType: ServiceType
    private let stream: AsyncStream<BrowseEvent>
    private let continuation: AsyncStream<BrowseEvent>.Continuation
    private let token = NIOLockedValueBox<UInt64?>(nil)
    private let callback = NIOLockedValueBox<(@Sendable (BrowseEvent) -> Void)?>(nil)

    init(core: DiscoveryCore, type: ServiceType, onEvent: (@Sendable (BrowseEvent) -> Void)? = nil) throws {
        self.core = core
        self.serviceType = type
        self.callback.withLockedValue { $0 = onEvent }
        (self.stream, self.continuation) = AsyncStream.makeStream(of: BrowseEvent.self, bufferingPolicy: .bufferingNewest(4096))
        let continuation = self.continuation
        let callback = self.callback
        let token = try core.subscribe(type) { event in
            continuation.yield(event)
            callback.withLockedValue { $0 }?(event)
        }
        self.token.withLockedValue { $0 = token }
    }

    deinit {
        self.cancel()
    }

    /// Called on the endpoint's event loop for every event, in addition to the sequence.
    public var onEvent: (@Sendable (BrowseEvent) -> Void)? {
        get { self.callback.withLockedValue { $0 } }
        set { self.callback.withLockedValue { $0 = newValue } }
    }

    /// Goodbyes heard so far for instances of this type (their PTR records withdrawn, RFC 6762
    /// §10.1), counted once per record and interface.
    public var goodbyesHeard: Int {
        self.core.read { machine in machine.browser.goodbyesHeard[self.serviceType.domainName] ?? 0 }
    }

    /// The instances resolved now.
    public var instances: [ServiceInstance] {
        self.core.read { machine in machine.browser.reported.values.filter { $0.serviceType == self.serviceType } }
            .sorted { $0.name.description < $1.name.description }
    }

    /// Asks again for an instance whose data proved wrong (say, a connection to it failed); if
    /// no responder answers within ten seconds, it is reported lost (RFC 6762 §10.4).
    public func reconfirm(_ instance: ServiceInstance) {
        _ = try? self.core.perform { machine, now in machine.browser.reconfirm(instance.name, now: now) }
    }

    /// Stops browsing and finishes the sequence.
    public func cancel() {
        if let token = self.token.withLockedValue({ token -> UInt64? in
            defer { token = nil }
            return token
        }) {
            self.core.unsubscribe(self.serviceType, token: token)
        }
        self.continuation.finish()
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: self.stream.makeAsyncIterator(), browser: self)
    }

    /// Iterates the events. It keeps its browser alive, so that
    /// `for await event in try endpoint.browse(type)` browses for as long as the loop runs.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<BrowseEvent>.Iterator
        let browser: ServiceBrowser

        public mutating func next() async -> BrowseEvent? {
            await self.base.next()
        }
    }
}
