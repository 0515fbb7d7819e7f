import Crypto
@_spi(Machine) import GameKitMachine
import GameKitTraversal
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A session's room membership on the session's own socket (PROTOCOL §18): the room client and
/// the members' direct paths (``OnlineMachine``) run on the package's driver as the socket's
/// tenant, beside the transport. The transport's datagrams to member addresses
/// (``MemberAddress``) go straight to the member once a direct path is found, else through the
/// relay; what arrives from either reaches the transport as from the member's address.
@_spi(Machine) public final class OnlineTenant: SocketTenant, @unchecked Sendable {
    public let eventLoop: EventLoop
    /// The configured TURN server, whose datagrams are unwrapped here.
    private let turnServer: SocketAddress?
    private let driver: DatagramDriver<OnlineMachine>
    /// The direct paths, readable per datagram without the driver's lock.
    private let routes = NIOLockedValueBox(Routes())
    /// TCP streams to the rendezvous and relay, when UDP gets no answer (PROTOCOL §18.12).
    private let streams = StreamCarrier()
    private let owner = NIOLockedValueBox<TenantOwner?>(nil)
    private let fallback = NIOLockedValueBox(Fallback())
    /// Without an answer over UDP this long after starting, the rendezvous is tried over TCP.
    static let streamFallbackDelay = TimeAmount.seconds(2)

    struct Fallback {
        var started = false
        var opened: Set<SocketAddress> = []
    }
    /// How long closing waits for the goodbye to leave.
    static let closeFlushLimit = TimeAmount.milliseconds(200)

    /// Where the transport's datagrams to members go, and which sources are members.
    struct Routes {
        /// Members reached straight at an address.
        var direct: [UInt32: SocketAddress] = [:]
        /// Sources whose datagrams are a member's (shown to the transport as its member
        /// address): each direct path's address and each address a member nominated one from,
        /// until the member leaves. A path given up keeps its address here, so that datagrams the
        /// member still sends there (it has not given the path up yet) stay the member's.
        var members: [SocketAddress: UInt32] = [:]
        /// Members reached through the TURN allocation (carried: the machine wraps them).
        var turn: [UInt32: SocketAddress] = [:]

        /// Follows the room client's event.
        mutating func follow(_ event: RoomEvent) {
            switch event {
            case .pathChanged(let peer, let path):
                self.direct[peer] = nil
                self.turn[peer] = nil
                switch path {
                case .direct(let address):
                    self.direct[peer] = address
                    self.members[address.unmappingIPv4] = peer
                case .turn(let address):
                    self.turn[peer] = address
                case .relayed:
                    break
                }
            case .memberSendsFrom(let peer, let address):
                self.members[address.unmappingIPv4] = peer
            case .memberLeft(let peer):
                self.direct[peer] = nil
                self.turn[peer] = nil
                self.members = self.members.filter { $0.value != peer }
            case .left, .failed:
                self = Routes()
            default:
                break
            }
        }
    }

    /// A room client for `request` in the session `sessionKey`, reporting on `eventLoop` (the
    /// one the session's socket is then bound on). Nothing is sent before the socket is attached.
    /// `directPaths` false: members are reached through the relay only. `stunServers`: more
    /// servers than the rendezvous to learn this socket's public addresses from; `turn`: a TURN
    /// server whose allocation is one more way to members (with direct paths only).
    public init(
        rendezvous: [SocketAddress], sessionKey: UInt64, request: RoomRequest, record: MemberRecord, directPaths: Bool = true,
        stunServers: [SocketAddress] = [], turn: TURNServer? = nil, eventLoop: EventLoop, onEvent: @escaping @Sendable (RoomEvent) -> Void
    ) {
        self.eventLoop = eventLoop
        self.turnServer = directPaths ? turn?.address : nil
        var random = MachineRandom.system()
        let configuration = RoomClient.Configuration(rendezvous: rendezvous, sessionKey: sessionKey, request: request, record: record)
        let room = RoomClient(configuration: configuration, clock: .system(), now: .now(), random: random.split())
        let paths = directPaths
            ? MemberPaths(
                configuration: .init(
                    localPeerID: record.peerID, localUfrag: Self.token(8, &random), localPassword: Self.token(24, &random), socketAcceptsIPv6: true),
                random: random.split())
            : nil
        let routes = self.routes
        let fallback = self.fallback
        weak var weakSelf: OnlineTenant?
        self.driver = DatagramDriver(machine: OnlineMachine(room: room, paths: paths, stunServers: stunServers, turn: turn, random: random.split()), eventLoop: eventLoop) { event in
            if case .rendezvousLost = event { weakSelf?.useStreams() }
            if case .joined = event, fallback.withLockedValue({ $0.started }) { weakSelf?.useStreams() }
            routes.withLockedValue { $0.follow(event) }
            onEvent(event)
        }
        weakSelf = self
    }

    /// `count` random letters and digits (ICE's ufrag and password alphabet, RFC 8445 §5.3).
    private static func token(_ count: Int, _ random: inout MachineRandom) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }

    // MARK: - SocketTenant

    public func attach(_ socket: any DatagramSocket<SocketAddress>, localAddress: SocketAddress?, owner: TenantOwner) {
        self.owner.withLockedValue { $0 = owner }
        let candidates = localAddress.map(Self.hostCandidates(for:)) ?? []
        _ = self.driver.perform { machine, now in machine.start(hostCandidates: candidates, now: now) }
        self.driver.attach(StreamRoutedSocket(base: socket, carrier: self.streams))
        self.eventLoop.scheduleTask(in: Self.streamFallbackDelay) { [weak self] in
            guard let self, self.code == nil else { return }
            self.useStreams()
        }
    }

    // MARK: - TCP

    /// Reaches the rendezvous (and the room's relay) over TCP too: each gets a stream, and the
    /// room client's datagrams to them go down it from then on.
    func useStreams() {
        let (rendezvous, relay) = self.driver.read { ($0.room.configuration.rendezvous, $0.room.relay) }
        let wanted = Set(rendezvous + (relay.map { [$0] } ?? []))
        let new = self.fallback.withLockedValue { fallback -> [SocketAddress] in
            fallback.started = true
            let new = wanted.subtracting(fallback.opened)
            fallback.opened.formUnion(new)
            return Array(new)
        }
        for address in new { self.openStream(to: address) }
    }

    private func openStream(to address: SocketAddress) {
        let carrier = self.streams
        let driver = self.driver
        let owner = self.owner.withLockedValue { $0 }
        let fallback = self.fallback
        ClientBootstrap(group: self.eventLoop)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                StreamCarrier.configure(channel).flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try channel.pipeline.syncOperations.addHandler(
                        StreamFrameHandler(
                            source: address,
                            receive: { frame, source in
                                // As from the socket: relayed datagrams are the transport's.
                                if frame.getInteger(at: frame.readerIndex, as: UInt8.self) == OnlinePacketType.relayData.rawValue {
                                    let now = driver.eventLoop.now
                                    if let (payload, peer) = driver.withLockedMachine({ $0.unwrap(frame, from: source, now: now) }) {
                                        owner?.receive(payload, MemberAddress.of(peer))
                                    }
                                } else {
                                    driver.receive(frame, from: source)
                                }
                            },
                            complete: {
                                owner?.receiveComplete()
                                driver.runCycle()
                            },
                            closed: { channel in
                                carrier.remove(channel)
                                fallback.withLockedValue { _ = $0.opened.remove(address) }
                            }))
                }
            }
            .connect(to: address)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    carrier.add(channel, for: address)
                    driver.runCycle()
                case .failure:
                    fallback.withLockedValue { _ = $0.opened.remove(address) }
                }
            }
    }

    /// Whether the room client's datagrams to `address` go over TCP now.
    public func usesStream(to address: SocketAddress) -> Bool { self.streams.stream(to: address) != nil }

    /// The addresses this socket can be reached at on its own interfaces: the bound address, or
    /// for a wildcard, each interface's (never loopback or link-local ones), with its port.
    static func hostCandidates(for local: SocketAddress) -> [SocketAddress] {
        guard let bound = TraversalAddress(local) else { return [] }
        return TraversalAddress.hostAddresses(bound: bound, loopbackIfAlone: false).map(\.socketAddress)
    }

    public func receive(_ datagram: ByteBuffer, from source: SocketAddress) -> (ByteBuffer, SocketAddress)? {
        // A dual-stack socket reports IPv4 senders as IPv4-mapped IPv6 addresses: the room
        // client knows the rendezvous, the relay and members by their IPv4 addresses.
        let source = source.unmappingIPv4
        if source == self.turnServer {
            // The TURN server: its answers, and members' datagrams in Data indications.
            let now = self.eventLoop.now
            let unwrapped = self.driver.withLockedMachine { $0.unwrapTURN(datagram, now: now) }
            return unwrapped.map { ($0.0, MemberAddress.of($0.1)) }
        }
        guard datagram.getInteger(at: datagram.readerIndex, as: UInt8.self) == OnlinePacketType.relayData.rawValue else {
            self.driver.receive(datagram, from: source)
            return nil
        }
        let now = self.eventLoop.now
        guard let (payload, peer) = self.driver.withLockedMachine({ $0.unwrap(datagram, from: source, now: now) }) else { return nil }
        return (payload, MemberAddress.of(peer))
    }

    public func receiveComplete() {
        self.driver.runCycle()
    }

    public func route(_ destination: SocketAddress) -> TenantRoute {
        guard let peer = MemberAddress.peer(of: destination) else { return .own }
        if let direct = self.routes.withLockedValue({ $0.direct[peer] }) { return .direct(direct) }
        return .carried
    }

    public func translate(source: SocketAddress) -> SocketAddress {
        let peer = self.routes.withLockedValue { routes in routes.members.isEmpty ? nil : routes.members[source.unmappingIPv4] }
        return peer.map(MemberAddress.of) ?? source
    }

    public func carry(_ datagram: ByteBuffer, to destination: SocketAddress) {
        guard let peer = MemberAddress.peer(of: destination) else { return }
        // On the event loop, inside the transport's write: queued under the lock only; the
        // batch's ``carryComplete()`` runs the cycle that sends them all.
        let now = self.eventLoop.now
        self.driver.withLockedMachine { $0.carry(datagram, to: peer, now: now) }
    }

    public func carryComplete() {
        self.driver.runCycle()
    }

    public func close() -> EventLoopFuture<Void> {
        let promise = self.eventLoop.makePromise(of: Void.self)
        promise.completeWithTask {
            _ = await self.driver.shutdown(flushLimit: Self.closeFlushLimit) { machine, now in machine.leave(now: now) }
        }
        return promise.futureResult
    }

    // MARK: - Operations

    /// Changes this member's record (the others are told).
    public func update(_ change: (inout MemberRecord) -> Void) {
        _ = self.driver.perform { machine, now in machine.update(change, now: now) }
    }

    /// The room's code, once known.
    public var code: RoomCode? { self.driver.read(\.room.code) }

    /// Whether the relay carries for this session now.
    public var relayReady: Bool { self.driver.read(\.room.relayReady) }

    /// How the transport's datagrams to `peer` travel now.
    public func path(to peer: UInt32) -> OnlinePath {
        self.routes.withLockedValue { routes in
            routes.direct[peer].map(OnlinePath.direct) ?? routes.turn[peer].map(OnlinePath.turn) ?? .relayed
        }
    }
}
