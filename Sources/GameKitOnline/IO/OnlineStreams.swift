@_spi(Machine) import GameKitMachine
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// An online session's TCP streams to its rendezvous and relay, for networks that block UDP
/// (PROTOCOL §18.12). The socket's driver writes through ``socket(over:)``: datagrams to an
/// address with a stream go down it, framed. Frames that arrive are handed to the driver as
/// datagrams from that address, so the socket's one machine reads them as it reads UDP.
///
/// Streams are opened when the rendezvous has not answered over UDP ``fallbackDelay`` after the
/// start, when it stops answering later, and for the room's relay once it is known while
/// streams are in use.
package final class OnlineStreams: Sendable {
    /// Without an answer over UDP this long after starting, the rendezvous is tried over TCP.
    package static let fallbackDelay = TimeAmount.seconds(2)

    /// How the streams reach the socket's driver.
    package struct Hooks: Sendable {
        /// The event loop of the socket (streams run on it too).
        package var eventLoop: EventLoop
        /// Takes a frame as a datagram from an address (event loop only).
        package var receive: @Sendable (ByteBuffer, SocketAddress) -> Void
        /// The frames handed over so far are all there: the driver runs its cycle.
        package var complete: @Sendable () -> Void
        /// The rendezvous addresses and the room's relay, if known.
        package var servers: @Sendable () -> [SocketAddress]
        /// Whether the session is in its room (then the fallback timer does nothing).
        package var inRoom: @Sendable () -> Bool

        package init(
            eventLoop: EventLoop, receive: @escaping @Sendable (ByteBuffer, SocketAddress) -> Void, complete: @escaping @Sendable () -> Void,
            servers: @escaping @Sendable () -> [SocketAddress], inRoom: @escaping @Sendable () -> Bool
        ) {
            self.eventLoop = eventLoop
            self.receive = receive
            self.complete = complete
            self.servers = servers
            self.inRoom = inRoom
        }
    }

    private struct State {
        var hooks: Hooks?
        var started = false
        var opened: Set<SocketAddress> = []
    }

    let carrier = StreamCarrier()
    private let state = NIOLockedValueBox(State())

    package init() {}

    /// The socket the driver writes to: `base`, with datagrams to a stream's address sent down it.
    package func socket(over base: any DatagramSocket<SocketAddress>) -> any DatagramSocket<SocketAddress> {
        StreamRoutedSocket(base: base, carrier: self.carrier)
    }

    /// Starts: streams open when UDP gets no answer (``fallbackDelay``).
    package func start(_ hooks: Hooks) {
        self.state.withLockedValue { $0.hooks = hooks }
        hooks.eventLoop.scheduleTask(in: Self.fallbackDelay) { [weak self] in
            guard let self, !hooks.inRoom() else { return }
            self.use()
        }
    }

    /// Follows the room: a rendezvous that stopped answering is tried over TCP too; once streams
    /// are in use, the relay of a room just joined gets one as well.
    package func follow(_ event: RoomEvent) {
        switch event {
        case .rendezvousLost: self.use()
        case .joined where self.state.withLockedValue({ $0.started }): self.use()
        default: break
        }
    }

    /// Whether datagrams to `address` go over TCP now.
    package func usesStream(to address: SocketAddress) -> Bool { self.carrier.stream(to: address) != nil }

    /// Opens a stream to each server that has none.
    private func use() {
        guard let hooks = self.state.withLockedValue({ $0.hooks }) else { return }
        let wanted = Set(hooks.servers())
        let new = self.state.withLockedValue { state -> [SocketAddress] in
            state.started = true
            let new = wanted.subtracting(state.opened)
            state.opened.formUnion(new)
            return new.sorted { "\($0)" < "\($1)" }
        }
        for address in new { self.open(to: address, hooks: hooks) }
    }

    private func open(to address: SocketAddress, hooks: Hooks) {
        let carrier = self.carrier
        let state = self.state
        ClientBootstrap(group: hooks.eventLoop)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                StreamCarrier.configure(channel).flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try channel.pipeline.syncOperations.addHandler(
                        StreamFrameHandler(
                            source: address, receive: hooks.receive, complete: hooks.complete,
                            closed: { channel in
                                carrier.remove(channel, for: address)
                                state.withLockedValue { _ = $0.opened.remove(address) }
                            }))
                }
            }
            .connect(to: address)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    carrier.add(channel, for: address)
                    hooks.complete()
                case .failure:
                    state.withLockedValue { _ = $0.opened.remove(address) }
                }
            }
    }
}
