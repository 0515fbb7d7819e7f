import Crypto
@_spi(Machine) import GameKitMachine
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// A session's room membership on the session's own socket (PROTOCOL §18): the room client runs
/// on the package's driver as the socket's tenant, beside the transport. It registers in the
/// room, carries the transport's datagrams to member addresses (``MemberAddress``) through the
/// relay, and hands relayed datagrams back to the transport as coming from the member's address.
@_spi(Machine) public final class OnlineTenant: SocketTenant, @unchecked Sendable {
    public let eventLoop: EventLoop
    private let driver: DatagramDriver<RoomClient>
    /// How long closing waits for the goodbye to leave.
    static let closeFlushLimit = TimeAmount.milliseconds(200)

    /// A room client for `request` in the session `sessionKey`, reporting on `eventLoop` (the
    /// one the session's socket is then bound on). Nothing is sent before the socket is attached.
    public init(
        rendezvous: [SocketAddress], sessionKey: UInt64, request: RoomRequest, record: MemberRecord, eventLoop: EventLoop,
        onEvent: @escaping @Sendable (RoomEvent) -> Void
    ) {
        self.eventLoop = eventLoop
        let configuration = RoomClient.Configuration(rendezvous: rendezvous, sessionKey: sessionKey, request: request, record: record)
        let machine = RoomClient(configuration: configuration, clock: .system(), now: .now())
        self.driver = DatagramDriver(machine: machine, eventLoop: eventLoop, deliver: onEvent)
    }

    // MARK: - SocketTenant

    public func attach(_ socket: any DatagramSocket<SocketAddress>) {
        self.driver.attach(socket)
    }

    public func receive(_ datagram: ByteBuffer, from source: SocketAddress) -> (ByteBuffer, SocketAddress)? {
        // A dual-stack socket reports IPv4 senders as IPv4-mapped IPv6 addresses: the room
        // client knows the rendezvous and relay by their IPv4 addresses.
        let source = source.unmappingIPv4
        guard datagram.getInteger(at: datagram.readerIndex, as: UInt8.self) == OnlinePacketType.relayData.rawValue else {
            self.driver.receive(datagram, from: source)
            return nil
        }
        guard let (payload, peer) = self.driver.withLockedMachine({ $0.unwrap(datagram, from: source) }) else { return nil }
        return (payload, MemberAddress.of(peer))
    }

    public func receiveComplete() {
        self.driver.runCycle()
    }

    public func carries(_ destination: SocketAddress) -> Bool {
        MemberAddress.peer(of: destination) != nil
    }

    public func carry(_ datagram: ByteBuffer, to destination: SocketAddress) {
        guard let peer = MemberAddress.peer(of: destination) else { return }
        self.driver.withLockedMachine { $0.carry(datagram, to: peer) }
    }

    public func carryComplete() {
        self.driver.runCycle()
    }

    public func close() -> EventLoopFuture<Void> {
        let promise = self.eventLoop.makePromise(of: Void.self)
        promise.completeWithTask {
            _ = await self.driver.shutdown(flushLimit: Self.closeFlushLimit) { client, now in client.leave(now: now) }
        }
        return promise.futureResult
    }

    // MARK: - Operations

    /// Changes this member's record (the others are told).
    public func update(_ change: (inout MemberRecord) -> Void) {
        _ = self.driver.perform { client, now in client.update(change, now: now) }
    }

    /// The room's code, once known.
    public var code: RoomCode? { self.driver.read(\.code) }

    /// Whether the relay carries for this session now.
    public var relayReady: Bool { self.driver.read(\.relayReady) }
}
