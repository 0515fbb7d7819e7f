@_spi(Machine) import GameKitMachine
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A real-time (media) connection on its own UDP socket, set up ICE-style: it gathers host,
/// server-reflexive (STUN) and relayed (TURN) candidates, runs connectivity checks against the
/// other side's candidates, keeps consent on the chosen pair, and seals every media packet with
/// keys from a key exchange the caller carried in its signalling.
///
/// ```swift
/// let connection = try await RealTimeConnection.open(configuration: .init())
/// let mine = try await connection.gatherCandidates()     // send to the other side, with
/// let exchange = RealTimeKeyExchange()                   // exchange.publicKeyBytes
/// // … receive theirs …
/// connection.connect(keys: try exchange.keys(remotePublicKey: theirKey, isInitiator: true, context: callID),
///                    remoteCandidates: theirs) { event in … }
/// connection.send(mediaPacket)
/// ```
///
/// Every method may be called from any thread; events are delivered on the connection's event
/// loop, one at a time.
public final class RealTimeConnection: @unchecked Sendable {
    /// A TURN server and the long-term credentials to use it.
    public struct TURNServer: Sendable, Equatable {
        /// The server's IPv4 address (a literal).
        public var host: String
        /// Its UDP port.
        public var port: Int
        /// The long-term credential's user name.
        public var username: String
        /// The long-term credential's password.
        public var password: String

        /// A server and its credentials.
        public init(host: String, port: Int = 3478, username: String, password: String) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
        }
    }

    /// A STUN server.
    public struct STUNServer: Sendable, Equatable {
        /// The server's IPv4 address (a literal).
        public var host: String
        /// Its UDP port.
        public var port: Int

        /// A server.
        public init(host: String, port: Int = 3478) {
            self.host = host
            self.port = port
        }
    }

    /// Options of a real-time connection.
    public struct Configuration: Sendable {
        /// STUN servers asked for this socket's outside address.
        public var stunServers: [STUNServer] = []
        /// TURN servers; the first is asked for a relayed address.
        public var turnServers: [TURNServer] = []
        /// The local address to bind: "::" (the default) for every interface, IPv6 and IPv4 on one
        /// dual-stack socket (a host without IPv6 gets "0.0.0.0" instead); "0.0.0.0" for every
        /// IPv4 interface only; or one address.
        public var bindAddress = "::"
        /// The local UDP port; 0 picks a free one.
        public var port = 0
        /// Use only the TURN relay (never a direct pair).
        public var relayOnly = false
        /// How long consent may go unanswered before the connection counts as lost (RFC 7675:
        /// 30 s).
        public var consentTimeout: TimeAmount = .seconds(30)
        /// Interfaces whose addresses become host candidates (nil: every interface that is up).
        public var interfaceNames: [String]?

        /// The defaults: no servers, every address, an ephemeral port.
        public init() {}
    }

    /// What the connection reports after ``connect(keys:remoteCandidates:events:)``.
    public enum Event: Sendable, Equatable {
        /// A path was chosen; media flows.
        case connected(RealTimePath, remote: TraversalAddress?)
        /// Every candidate pair failed.
        case failed
        /// The chosen path stopped answering consent checks.
        case consentLost
        /// A media packet arrived (opened and authenticated), on a UDP path or through the
        /// application's channel.
        case media([UInt8], viaClient: Bool)
    }

    /// The event loop everything runs on.
    public let eventLoop: EventLoop
    /// The socket's local address.
    public let localAddress: TraversalAddress

    private let driver: DatagramDriver<RealTimeMachine>
    private let logger = Logger(label: "opengamekit.realtime")

    // MARK: Event loop only
    private var handler: (@Sendable (Event) -> Void)?
    private var gathered: EventLoopPromise<[ICECandidate]>?
    private var candidates: [ICECandidate]?
    private var laterCandidates: [ICECandidate] = []
    private var candidateHandler: (@Sendable ([ICECandidate]) -> Void)?
    private var clientSend: (@Sendable ([UInt8]) -> Void)?
    private var closed = false
    private var lastSummary = ""

    /// A connection on `channel` (already bound; the driver's handler is added here, on the
    /// event loop, before anything is sent).
    private init(channel: Channel, machine: RealTimeMachine, localAddress: TraversalAddress) throws {
        self.eventLoop = channel.eventLoop
        self.localAddress = localAddress
        let target = WeakConnection()
        self.driver = DatagramDriver(machine: machine, eventLoop: channel.eventLoop) { event in target.connection?.deliver(event) }
        target.connection = self
        // Destinations with no route are not handed to the socket, which NIO would close on
        // `ENETUNREACH` (a STUN or TURN server on a network with no default route), ending the
        // call although a direct path exists.
        let socket = UDPChannelSocket(channel: channel, segmentationOffload: false)
        try channel.pipeline.syncOperations.addHandler(DriverChannelHandler(driver: self.driver, source: { $0.remoteAddress }))
        self.driver.attach(socket)
    }

    /// Opens the socket and starts gathering candidates.
    public static func open(
        configuration: Configuration, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> RealTimeConnection {
        try await Self.makeConnection(configuration: configuration, group: group).get()
    }

    /// Opens the socket and starts gathering candidates, with a future: nothing of it waits on
    /// Swift's cooperative thread pool (which a busy application may hold).
    public static func makeConnection(
        configuration: Configuration, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) -> EventLoopFuture<RealTimeConnection> {
        let loop = group.next()
        var settings = RealTimeMachine.Settings()
        settings.ice.relayOnly = configuration.relayOnly
        settings.ice.consentTimeout = configuration.consentTimeout
        do {
            settings.stunServers = try Self.resolve(configuration.stunServers.map { ($0.host, $0.port) })
            let turnAddresses = try Self.resolve(configuration.turnServers.map { ($0.host, $0.port) })
            settings.turnServers = zip(turnAddresses, configuration.turnServers).map { ($0, $1.username, $1.password) }
        } catch {
            return loop.makeFailedFuture(error)
        }
        let requested = settings
        // No SO_REUSEADDR: with it Linux may give two sockets one ephemeral port.
        @Sendable func bind(_ host: String) -> EventLoopFuture<Channel> {
            DatagramBootstrap(group: loop).bind(host: host, port: configuration.port)
        }
        let bound = configuration.bindAddress == "::"
            ? bind("::").flatMapError { _ in bind("0.0.0.0") }  // a host without IPv6
            : bind(configuration.bindAddress)
        return bound
            .flatMapErrorThrowing { error in throw RealTimeError.bindFailed("\(error)") }
            .flatMapThrowing { channel in
                guard let socketAddress = channel.localAddress, let local = TraversalAddress(socketAddress) else {
                    channel.close(promise: nil)
                    throw RealTimeError.bindFailed("no local address")
                }
                // An IPv6 socket (dual-stack when bound to "::") reaches IPv6 and IPv4 addresses;
                // an IPv4 one only IPv4: servers of the other family are left out.
                var settingsToUse = requested
                settingsToUse.socketAcceptsIPv6 = socketAddress.protocol == .inet6
                if !settingsToUse.socketAcceptsIPv6 {
                    settingsToUse.stunServers.removeAll { !$0.isIPv4 }
                    settingsToUse.turnServers.removeAll { !$0.address.isIPv4 }
                }
                let hosts = TraversalAddress.hostAddresses(bound: local, interfaceNames: configuration.interfaceNames, loopbackIfAlone: true)
                let machine = RealTimeMachine(settings: settingsToUse, hostAddresses: hosts, now: loop.now)
                do {
                    return try RealTimeConnection(channel: channel, machine: machine, localAddress: local)
                } catch {
                    channel.close(promise: nil)
                    throw RealTimeError.bindFailed("\(error)")
                }
            }
    }

    private static func resolve(_ servers: [(String, Int)]) throws -> [TraversalAddress] {
        try servers.map { host, port in
            guard let address = TraversalAddress(host, port: UInt16(clamping: port)) else {
                throw RealTimeError.invalidServer("\(host):\(port) is not an IPv4 or IPv6 address")
            }
            return address
        }
    }

    // MARK: - API

    /// This side's first candidates (its host addresses, at once); server-reflexive and relayed
    /// ones follow through ``onNewCandidates(_:)`` as the servers answer.
    public func gatherCandidates() async throws -> [ICECandidate] {
        try await self.candidatesFuture().get()
    }

    /// ``gatherCandidates()`` as a future.
    public func candidatesFuture() -> EventLoopFuture<[ICECandidate]> {
        self.eventLoop.flatSubmit {
            if let candidates = self.candidates { return self.eventLoop.makeSucceededFuture(candidates) }
            let promise = self.gathered ?? self.eventLoop.makePromise()
            self.gathered = promise
            return promise.futureResult
        }
    }

    /// Hears every candidate learnt after the first ones (those learnt already come at once), to
    /// be sent to the other side ("trickled").
    public func onNewCandidates(_ handler: @escaping @Sendable ([ICECandidate]) -> Void) {
        self.eventLoop.execute {
            self.candidateHandler = handler
            if !self.laterCandidates.isEmpty {
                handler(self.laterCandidates)
                self.laterCandidates = []
            }
        }
    }

    /// Candidates the other side trickled after its first message.
    public func addRemoteCandidates(_ candidates: [ICECandidate]) {
        _ = self.driver.perform { machine, now in machine.addRemote(candidates, now: now) }
    }

    /// Starts connectivity checks; `events` hears the outcome and every media packet.
    public func connect(keys: RealTimeKeys, remoteCandidates: [ICECandidate], events: @escaping @Sendable (Event) -> Void) {
        self.eventLoop.execute {
            guard !self.closed else { return }
            self.handler = events
            self.logger.debug("checking", metadata: ["remote": "\(remoteCandidates)"])
            _ = self.driver.perform { machine, now in machine.connect(keys: keys, remote: remoteCandidates, now: now) }
        }
    }

    /// Sends a media packet on the chosen path (dropped before one is chosen). From any thread;
    /// it is sealed and sent on the event loop. The caller (an audio thread) never waits for the
    /// connection's lock, which the event loop holds while it opens a batch of arrivals: a
    /// capture loop stalled behind it loses audio.
    public func send(_ payload: [UInt8]) {
        self.eventLoop.execute {
            guard self.driver.perform({ machine, _ in machine.queueMedia(payload) }) != nil else { return }
            self.driver.runCycle()
        }
    }

    /// Gives up on UDP paths: media is sealed as before but handed to `send` (the application's
    /// channel); packets from that channel come back through ``receiveFromClient(_:)``.
    public func useClientPath(_ send: @escaping @Sendable ([UInt8]) -> Void) {
        self.eventLoop.execute {
            guard !self.closed, self.clientSend == nil else { return }
            self.logger.debug("using the application's channel", metadata: ["pairs": "\(self.driver.read(\.pairSummary))"])
            self.clientSend = send
            _ = self.driver.perform { machine, now in machine.useClientPath(now: now) }
        }
    }

    /// A sealed media packet that arrived through the application's channel.
    public func receiveFromClient(_ packet: [UInt8]) {
        self.eventLoop.execute {
            guard self.driver.perform({ machine, _ in machine.receiveFromClient(packet) }) != nil else { return }
            self.driver.runCycle()
        }
    }

    /// Media packets refused (failed authentication or replayed).
    public func rejectedMediaCount() async -> Int {
        self.driver.read(\.rejectedMedia)
    }

    /// Releases the relay and closes the socket. No event follows.
    public func close() {
        self.eventLoop.execute {
            guard !self.closed else { return }
            self.closed = true
            self.handler = nil
            self.gathered?.fail(ChannelError.ioOnClosedChannel)
            self.gathered = nil
            let driver = self.driver
            Task { await driver.shutdown(flushLimit: .milliseconds(200)) { machine, _ in machine.close() } }
        }
    }

    // MARK: - Events (on the event loop)

    private func deliver(_ event: RealTimeMachine.Event) {
        if self.logger.logLevel <= .trace {
            let summary = self.driver.read(\.pairSummary)
            if summary != self.lastSummary {
                self.lastSummary = summary
                self.logger.trace("pairs", metadata: ["pairs": "\(summary)"])
            }
        }
        guard !self.closed else { return }
        switch event {
        case .candidates(let candidates):
            self.logger.debug("gathered", metadata: ["candidates": "\(candidates)"])
            if self.candidates == nil {
                self.candidates = candidates
                self.gathered?.succeed(candidates)
                self.gathered = nil
            } else if let handler = self.candidateHandler {
                handler(candidates)
            } else {
                self.laterCandidates += candidates
            }
        case .connected(let path, let remote):
            self.logger.debug("connected", metadata: ["path": "\(path)", "remote": "\(remote)"])
            self.handler?(.connected(path, remote: remote))
        case .failed:
            self.logger.debug("no path", metadata: ["pairs": "\(self.driver.read(\.pairSummary))"])
            self.handler?(.failed)
        case .consentLost: self.handler?(.consentLost)
        case .media(let payload, let viaClient): self.handler?(.media(payload, viaClient: viaClient))
        case .clientPacket(let packet): self.clientSend?(packet)
        }
    }
}

/// The connection the driver's events go to, held weakly (the connection owns the driver).
private final class WeakConnection: @unchecked Sendable {
    weak var connection: RealTimeConnection?
}
