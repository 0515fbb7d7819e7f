import DequeModule
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitOnline
import NIOCore

/// The socket's machine as the driver runs it: the endpoint (with an online session's layer
/// under it, ``SocketMachine``), and the tasks waiting on it (for a link to open, for room in a
/// send buffer), whose resumption rides on the machine's events.
///
/// Keeping the waiters beside the machine, under the driver's one lock, is what makes a
/// waiter registered while a handshake starts unable to miss its outcome; delivering the
/// resumptions as events is what makes them run on the event loop with the lock released.
struct WaitingEndpoint: DatagramMachine {
    typealias OpenWaiter = CheckedContinuation<Result<OpenedLink, TransportError>, Never>
    /// Resumed with nil when room is released (or the link closes): try again.
    typealias SpaceWaiter = CheckedContinuation<Result<Void, TransportError>?, Never>

    /// What the driver delivers: the machine's events, and the waiters they resume. The
    /// waiters travel boxed: an enum holding a `CheckedContinuation` (a type of the resilient
    /// standard library) has no fixed layout, and every copy or test of it went through the
    /// runtime, once per message.
    enum Delivery {
        case event(TransportEvent)
        case resume(Resumption)
        /// The online layer's event (room, members, paths).
        case room(RoomEvent)
    }

    /// A waiting task and what it is resumed with.
    final class Resumption {
        enum Waiter {
            case opened(OpenWaiter, Result<OpenedLink, TransportError>)
            case space(SpaceWaiter)
        }

        let waiter: Waiter

        init(_ waiter: Waiter) {
            self.waiter = waiter
        }

        /// Resumes the task (once: the delivery is its only holder).
        func resume() {
            switch self.waiter {
            case .opened(let waiter, let result): waiter.resume(returning: result)
            case .space(let waiter): waiter.resume(returning: nil)
            }
        }
    }

    var socket: SocketMachine
    var openWaiters: [LinkID: OpenWaiter] = [:]
    var spaceWaiters: [LinkID: [(token: UInt64, continuation: SpaceWaiter)]] = [:]
    var nextWaiterToken: UInt64 = 0
    private var resumptions = Deque<Delivery>()
    private var releasedLinks: [LinkID] = []

    init(socket: SocketMachine) {
        self.socket = socket
    }

    // MARK: - DatagramMachine
    //
    // Written out rather than inherited from a generic wrapper: in a debug build a protocol
    // extension reaches `machine` through a witness's `modify` coroutine, which allocated on
    // every call (AllocationTests counted two more allocations per message).

    mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        self.socket.handle(datagram: datagram, from: source, now: now)
    }

    mutating func handleTimeout(now: NIODeadline) {
        self.socket.handleTimeout(now: now)
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        self.socket.pollTransmit(now: now, into: &buffer)
    }

    var nextDeadline: NIODeadline? { self.socket.nextDeadline }

    mutating func handleUnroutable(_ destination: SocketAddress, now: NIODeadline, isRoutable: (SocketAddress) -> Bool) {
        self.socket.handleUnroutable(destination, now: now, isRoutable: isRoutable)
    }

    /// The machine's next event, each followed by the waiters it resumes; then the waiters of
    /// links whose send buffer released room; then the online layer's events.
    mutating func pollEvent() -> Delivery? {
        if let resumption = self.resumptions.popFirst() { return resumption }
        if let event = self.socket.endpoint.pollEvent() {
            switch event {
            case .linkOpened(let link, let address, let payload):
                if let waiter = self.openWaiters.removeValue(forKey: link) {
                    self.resumptions.append(.resume(Resumption(.opened(waiter, .success(OpenedLink(id: link, remoteAddress: address, payload: payload))))))
                }
            case .connectFailed(let link, let error):
                if let waiter = self.openWaiters.removeValue(forKey: link) {
                    self.resumptions.append(.resume(Resumption(.opened(waiter, .failure(error)))))
                }
            case .linkClosed(let link, _):
                self.resumeSpaceWaiters(of: link)
            default:
                break
            }
            return .event(event)
        }
        if !self.socket.endpoint.releasedSpace.isEmpty {
            // Nobody waits most of the time: then the list is only cleared (keeping its
            // capacity; it refills whenever a packet leaves).
            if self.spaceWaiters.isEmpty {
                self.socket.endpoint.releasedSpace.removeAll(keepingCapacity: true)
            } else {
                swap(&self.releasedLinks, &self.socket.endpoint.releasedSpace)
                for index in self.releasedLinks.indices { self.resumeSpaceWaiters(of: self.releasedLinks[index]) }
                self.releasedLinks.removeAll(keepingCapacity: true)
                if let resumption = self.resumptions.popFirst() { return resumption }
            }
        }
        return self.socket.pollRoomEvent().map(Delivery.room)
    }

    private mutating func resumeSpaceWaiters(of link: LinkID) {
        guard !self.spaceWaiters.isEmpty, let waiters = self.spaceWaiters.removeValue(forKey: link) else { return }
        for waiter in waiters { self.resumptions.append(.resume(Resumption(.space(waiter.continuation)))) }
    }

    // MARK: - Waiters

    /// Registers a task waiting for room on `link`.
    mutating func waitForSpace(on link: LinkID, token: UInt64, _ continuation: SpaceWaiter) {
        self.spaceWaiters[link, default: []].append((token, continuation))
    }

    /// Removes a cancelled space waiter.
    mutating func removeSpaceWaiter(on link: LinkID, token: UInt64) -> SpaceWaiter? {
        guard let index = self.spaceWaiters[link]?.firstIndex(where: { $0.token == token }) else { return nil }
        return self.spaceWaiters[link]!.remove(at: index).continuation
    }

    /// Every waiter, removed (at shutdown, to fail them).
    mutating func takeAllWaiters() -> (opens: [OpenWaiter], spaces: [SpaceWaiter]) {
        let opens = Array(self.openWaiters.values)
        let spaces = self.spaceWaiters.values.flatMap { $0.map(\.continuation) }
        self.openWaiters.removeAll()
        self.spaceWaiters.removeAll()
        return (opens, spaces)
    }
}
