import NIOCore
import Testing

@testable import GameKitTransport
@testable import OpenGameKit

/// A machine of a ``SessionTestNetwork``: its index there and its peer ID.
struct TestPeer: Hashable, Sendable {
    let index: Int
    let peerID: UInt32
}

/// An in-memory transport for several ``SessionMachine``s at once, with no I/O and no clock.
///
/// What a machine does to the transport (connect, accept, send, close, …) becomes
/// ``TransportEvent``s queued for the machines concerned, in order; ``deliver()`` hands them
/// over, as the session's driver would, until nothing is left. Machines are found by their fake
/// address, 127.0.0.1:(40000 + index). Tests can also fill a link's send buffer (``setFull``), time
/// out a connection attempt, lose a link, and inject raw requests and messages.
final class SessionTestNetwork: @unchecked Sendable {
    /// What one machine holds as its ``SessionLinks``: the network, seen from that machine.
    final class Port: SessionLinks, @unchecked Sendable {
        unowned let network: SessionTestNetwork
        let node: Int

        init(network: SessionTestNetwork, node: Int) { (self.network, self.node) = (network, node) }

        func connect(to address: SocketAddress, payload: ByteBuffer, timeout: TimeAmount?) throws(TransportError) -> LinkID {
            self.network.connect(from: self.node, to: address, payload: payload)
        }
        func cancelConnect(_ link: LinkID) -> Bool { self.network.cancelConnect(link, by: self.node) }
        func accept(_ id: ConnectionRequest.ID, payload: ByteBuffer) throws(TransportError) -> LinkID {
            try self.network.accept(id, by: self.node, payload: payload)
        }
        func deny(_ id: ConnectionRequest.ID, code: UInt16) throws(TransportError) { try self.network.deny(id, by: self.node, code: code) }
        func send(_ message: ByteBuffer, on link: LinkID, mode: SendMode) throws(TransportError) {
            try self.network.send([(message, link)], by: self.node, mode: mode)
        }
        func send(_ batch: [(message: ByteBuffer, link: LinkID)], mode: SendMode) throws(TransportError) {
            try self.network.send(batch, by: self.node, mode: mode)
        }
        func close(_ link: LinkID, code: UInt16) throws(TransportError) { try self.network.close(link, by: self.node, code: code) }
        func watch(_ addresses: [SocketAddress], peerKey: [UInt8]) throws(TransportError) -> LivenessWatchID {
            self.network.watch(by: self.node, addresses: addresses, peerKey: peerKey)
        }
        func updateWatch(_ id: LivenessWatchID, addresses: [SocketAddress]) { self.network.watches[id]?.addresses = addresses }
        func unwatch(_ id: LivenessWatchID) { self.network.watches[id] = nil }
        func setAlternateAddresses(_ addresses: [SocketAddress], for link: LinkID) { self.network.alternates[link] = addresses }
    }

    /// A liveness watch a machine holds, as the transport would.
    struct Watch: Equatable {
        var node: Int
        var addresses: [SocketAddress]
        var peerKey: [UInt8]
    }

    /// The alternative addresses machines gave their links.
    private(set) var alternates: [LinkID: [SocketAddress]] = [:]

    /// The liveness watches machines hold now.
    fileprivate(set) var watches: [LivenessWatchID: Watch] = [:]
    private var nextWatch: UInt64 = 1

    fileprivate func watch(by node: Int, addresses: [SocketAddress], peerKey: [UInt8]) -> LivenessWatchID {
        let id = LivenessWatchID(rawValue: self.nextWatch)
        self.nextWatch += 1
        self.watches[id] = Watch(node: node, addresses: addresses, peerKey: peerKey)
        return id
    }

    /// The liveness key each machine advertises (a stand-in: 32 bytes of its peer ID).
    func livenessKey(of peer: TestPeer) -> [UInt8] { [UInt8](repeating: UInt8(truncatingIfNeeded: peer.peerID), count: 32) }

    /// Whether `observer` watches `target`'s liveness.
    func isWatching(_ observer: TestPeer, _ target: TestPeer) -> Bool {
        self.watches.values.contains { $0.node == observer.index && $0.peerKey == self.livenessKey(of: target) }
    }

    /// `observer`'s transport reports `target` silent (or answering again), as its probes would.
    func liveness(_ observer: TestPeer, of target: TestPeer, alive: Bool) {
        guard let id = self.watches.first(where: { $0.value.node == observer.index && $0.value.peerKey == self.livenessKey(of: target) })?.key
        else { return self.missing("no watch") }
        self.queue.append((observer.index, .liveness(id, alive: alive)))
        self.deliver()
    }

    private struct Request {
        var initiator: Int, link: LinkID, responder: Int  // the link is the initiator's
        var payload: ByteBuffer
        var delivered = false
    }

    /// One end of a link: whose it is and the other end (nil while the initiator waits for an answer).
    private struct End { var node: Int, peer: LinkID? }

    private(set) var machines: [SessionMachine] = []
    private var names: [String] = []
    private var addresses: [SocketAddress] = []
    /// Further addresses of machines (``addAddress(of:)``).
    private var extraAddresses: [SocketAddress: Int] = [:]
    /// An address where nobody answers: attempts there end only by timeout (``timeOutUnanswered``).
    static let nowhere = try! SocketAddress(ipAddress: "192.0.2.1", port: 9)
    private var queue: [(node: Int, event: TransportEvent)] = []
    private var requests: [ConnectionRequest.ID: Request] = [:]
    private var ends: [LinkID: End] = [:]
    /// Accepted initiator links whose `linkOpened` has not been delivered: still cancellable.
    private var answered: Set<LinkID> = []
    private var full: Set<LinkID> = []
    private var refusedForSpace: Set<LinkID> = []
    private var nextLink: UInt32 = 1
    private var nextRequest: UInt64 = 1
    /// Every deny code the machines answered requests with, and every close code, in order.
    private(set) var denials: [UInt16] = [], closeCodes: [UInt16] = []
    /// The largest message a link takes (the transport's limit), or none.
    var messageLimit = Int.max
    /// Accepts fail as for an initiator's low-order key: the transport forgets the request,
    /// throws ``TransportError/authenticationFailed`` and fails the initiator the same way.
    var failAccepts = false

    subscript(peer: TestPeer) -> SessionMachine {
        get { self.machines[peer.index] }
        _modify { yield &self.machines[peer.index] }
    }

    func add(_ name: String, _ peerID: UInt32, _ mode: GKSessionMode, sessionID: String = "chess", relays: Bool = false) -> TestPeer {
        let index = self.machines.count
        let identity = SessionMachine.Identity(
            peerID: peerID, displayName: name, mode: mode, sessionKey: SessionHello.sessionKey(for: sessionID), relaysBetweenClients: relays)
        self.machines.append(SessionMachine(identity: identity, links: Port(network: self, node: index)))
        self.names.append(name)
        self.addresses.append(try! SocketAddress(ipAddress: "127.0.0.1", port: 40000 + index))
        return TestPeer(index: index, peerID: peerID)
    }

    // MARK: - Test controls

    /// Discovery at `observer` sees `target` (at `target`'s address unless `at` says another's).
    func sight(_ observer: TestPeer, _ target: TestPeer, busy: Bool = false, at address: TestPeer? = nil) {
        self[observer].peerSighted(
            target.peerID, displayName: self.names[target.index], addresses: [self.addresses[(address ?? target).index]], isBusy: busy,
            livenessKey: self.livenessKey(of: target))
    }

    /// Discovery at `observer` sees `target` at these addresses, in this order.
    func sight(_ observer: TestPeer, _ target: TestPeer, at addresses: [SocketAddress]) {
        self[observer].peerSighted(target.peerID, displayName: self.names[target.index], addresses: addresses, isBusy: false)
    }

    /// `peer`'s own address.
    func address(of peer: TestPeer) -> SocketAddress { self.addresses[peer.index] }

    /// One more address that reaches `peer` (another interface of its host).
    func addAddress(of peer: TestPeer) -> SocketAddress {
        let address = try! SocketAddress(ipAddress: "127.0.0.2", port: 40000 + self.extraAddresses.count)
        self.extraAddresses[address] = peer.index
        return address
    }

    /// Every attempt of `a` that reached nobody times out.
    func timeOutUnanswered(from a: TestPeer) {
        let waiting = Set(self.requests.values.map(\.link))
        for (link, end) in self.ends.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where end.node == a.index && end.peer == nil && !waiting.contains(link) {
            self.ends[link] = nil
            self.queue.append((a.index, .connectFailed(link, .timedOut)))
        }
    }

    /// The request `a` sent to `b` over `b`'s address number `path` (0: its own, 1…: added ones,
    /// in the order the requests were made) is withdrawn at `b` for `reason`; `a`'s side of that
    /// path times out.
    func withdrawPath(_ path: Int, from a: TestPeer, to b: TestPeer, _ reason: ConnectionRequestWithdrawal) {
        let ids = self.requests.filter { $0.value.initiator == a.index && $0.value.responder == b.index }.keys.sorted { $0.rawValue < $1.rawValue }
        guard path < ids.count, let request = self.requests.removeValue(forKey: ids[path]) else { return self.missing("no such path") }
        self.ends[request.link] = nil
        self.queue.append((a.index, .connectFailed(request.link, .timedOut)))
        if request.delivered { self.queue.append((b.index, .connectionRequestWithdrawn(ids[path], reason))) }
    }

    /// Hands queued events to their machines until none is left; returns how many.
    @discardableResult
    func deliver() -> Int {
        var count = 0
        while count < 1_000_000, self.deliverNext() { count += 1 }
        if count == 1_000_000 { Issue.record("the machines never stop talking") }
        return count
    }

    /// Hands the oldest queued event to its machine; false when there was none.
    @discardableResult
    func deliverNext() -> Bool {
        guard !self.queue.isEmpty else { return false }
        let (node, event) = self.queue.removeFirst()
        self.dispatch(event, to: node)
        return true
    }

    /// `a` connects to `b`, `b` accepts, and everything is delivered.
    func establish(_ a: TestPeer, _ b: TestPeer) throws {
        self[a].connect(to: b.peerID, timeout: nil)
        self.deliver()
        try self[b].accept(a.peerID)
        self.deliver()
    }

    /// Throws away every machine's notifications and discovery commands so far.
    func drain() {
        for index in self.machines.indices {
            _ = self.machines[index].takeNotifications()
            _ = self.machines[index].takeDiscoveryCommands()
        }
    }

    /// The open links `a` holds to `b`.
    func links(from a: TestPeer, to b: TestPeer) -> [LinkID] {
        self.ends.filter { $0.value.node == a.index && $0.value.peer.flatMap { self.ends[$0]?.node } == b.index }.map(\.key)
    }

    /// Every link `peer` holds at the transport: open, accepted, or being opened.
    func linkEnds(of peer: TestPeer) -> Set<LinkID> { Set(self.ends.filter { $0.value.node == peer.index }.keys) }

    /// Fills (or empties) the send buffer of `a`'s link to `b`. Emptying it reports room to
    /// `a` when a send had failed for want of it.
    func setFull(_ a: TestPeer, to b: TestPeer, _ isFull: Bool) {
        guard let link = self.links(from: a, to: b).first else { return self.missing("no link") }
        if isFull {
            self.full.insert(link)
        } else if self.full.remove(link) != nil, self.refusedForSpace.remove(link) != nil {
            self.queue.append((a.index, .sendBufferAvailable(link)))
        }
    }

    /// `a`'s connection attempt to `b` times out on both sides.
    func timeOutConnect(from a: TestPeer, to b: TestPeer) {
        guard let (id, request) = self.requests.first(where: { $0.value.initiator == a.index && $0.value.responder == b.index }).map({ ($0.key, $0.value) })
        else { return self.missing("no connection attempt") }
        self.requests[id] = nil
        self.ends[request.link] = nil
        self.queue.append((a.index, .connectFailed(request.link, .timedOut)))
        if request.delivered { self.queue.append((b.index, .connectionRequestWithdrawn(id, .timedOut))) }
    }

    /// The link between `a` and `b` goes silent: both sides time out.
    func loseLink(_ a: TestPeer, _ b: TestPeer) {
        guard let link = self.links(from: a, to: b).first, let peer = self.ends[link]?.peer else { return self.missing("no link") }
        self.ends[link] = nil
        self.ends[peer] = nil
        self.queue.append((a.index, .linkClosed(link, .timedOut)))
        self.queue.append((b.index, .linkClosed(peer, .timedOut)))
    }

    /// A connection request from `a` to `b` with any payload, as if from another program at
    /// `a`'s address. Returns `a`'s side of the attempt (unknown to `a`'s machine).
    @discardableResult
    func injectRequest(_ payload: ByteBuffer, from a: TestPeer, to b: TestPeer) -> LinkID {
        self.connect(from: a.index, to: self.addresses[b.index], payload: payload)
    }

    /// `b` receives `message` from `a` on their link, as if `a`'s machine had sent it.
    func injectMessage(_ message: ByteBuffer, from a: TestPeer, to b: TestPeer, mode: SendMode = .reliable) {
        guard let link = self.links(from: b, to: a).first else { return self.missing("no link") }
        self.queue.append((b.index, .received(message, link: link, mode: mode)))
    }

    private func missing(_ what: Comment) { Issue.record(what) }

    // MARK: - Transport operations

    private func newLink() -> LinkID {
        defer { self.nextLink += 1 }
        return LinkID(rawValue: self.nextLink)
    }

    private func connect(from node: Int, to address: SocketAddress, payload: ByteBuffer) -> LinkID {
        let link = self.newLink()
        self.ends[link] = End(node: node, peer: nil)
        // Nobody at that address: only a timeout ends the attempt.
        guard let responder = self.addresses.firstIndex(of: address) ?? self.extraAddresses[address] else { return link }
        let id = ConnectionRequest.ID(rawValue: self.nextRequest)
        self.nextRequest += 1
        self.requests[id] = Request(initiator: node, link: link, responder: responder, payload: payload)
        self.queue.append((responder, .connectionRequest(ConnectionRequest(id: id, remoteAddress: self.addresses[node], payload: payload))))
        return link
    }

    private func cancelConnect(_ link: LinkID, by node: Int) -> Bool {
        guard let end = self.ends[link], end.node == node else { return false }
        if let peer = end.peer {
            // Accepted, but the initiator has not heard so yet: the responder's link closes.
            guard self.answered.remove(link) != nil, let responder = self.ends.removeValue(forKey: peer) else { return false }
            self.queue.append((responder.node, .linkClosed(peer, .cancelledByPeer)))
        } else if let (id, request) = self.requests.first(where: { $0.value.link == link }).map({ ($0.key, $0.value) }) {
            self.requests[id] = nil
            if request.delivered { self.queue.append((request.responder, .connectionRequestWithdrawn(id, .cancelled))) }
        }
        self.ends[link] = nil
        self.queue.append((node, .connectFailed(link, .cancelled)))
        return true
    }

    private func accept(_ id: ConnectionRequest.ID, by node: Int, payload: ByteBuffer) throws(TransportError) -> LinkID {
        guard let request = self.requests[id], request.responder == node, request.delivered else { throw .unknownConnectionRequest }
        self.requests[id] = nil
        if self.failAccepts {
            self.ends[request.link] = nil
            self.queue.append((request.initiator, .connectFailed(request.link, .authenticationFailed)))
            throw .authenticationFailed
        }
        let link = self.newLink()
        self.ends[link] = End(node: node, peer: request.link)
        self.ends[request.link]!.peer = link
        self.answered.insert(request.link)
        self.queue.append((request.initiator, .linkOpened(request.link, remoteAddress: self.addresses[node], payload: payload)))
        self.queue.append((node, .linkOpened(link, remoteAddress: self.addresses[request.initiator], payload: request.payload)))
        return link
    }

    private func deny(_ id: ConnectionRequest.ID, by node: Int, code: UInt16) throws(TransportError) {
        guard let request = self.requests[id], request.responder == node, request.delivered else { throw .unknownConnectionRequest }
        self.requests[id] = nil
        self.ends[request.link] = nil
        self.denials.append(code)
        self.queue.append((request.initiator, .connectFailed(request.link, .denied(code: code))))
    }

    /// All or nothing, like the transport's batch send.
    private func send(_ batch: [(message: ByteBuffer, link: LinkID)], by node: Int, mode: SendMode) throws(TransportError) {
        var receivers: [(node: Int, link: LinkID)] = []
        for (message, link) in batch {
            guard let end = self.ends[link], end.node == node, let peer = end.peer, let other = self.ends[peer] else { throw .linkNotOpen }
            guard message.readableBytes <= self.messageLimit else { throw .dataTooBig(size: message.readableBytes, limit: self.messageLimit) }
            if self.full.contains(link) {
                self.refusedForSpace.insert(link)
                throw .bufferFull
            }
            receivers.append((other.node, peer))
        }
        for ((message, _), receiver) in zip(batch, receivers) {
            self.queue.append((receiver.node, .received(message, link: receiver.link, mode: mode)))
        }
    }

    private func close(_ link: LinkID, by node: Int, code: UInt16) throws(TransportError) {
        guard let end = self.ends[link], end.node == node, let peer = end.peer else { throw .linkNotOpen }
        self.ends[link] = nil
        self.answered.remove(link)
        self.closeCodes.append(code)
        self.queue.append((node, .linkClosed(link, .closedLocally(code: code))))
        if let other = self.ends.removeValue(forKey: peer) {
            self.queue.append((other.node, .linkClosed(peer, .closedByPeer(code: code))))
        }
    }

    // MARK: - Delivery

    /// What the session's driver does with a transport event.
    private func dispatch(_ event: TransportEvent, to node: Int) {
        switch event {
        case .connectionRequest(let request):
            guard self.requests[request.id] != nil else { return }  // withdrawn before it arrived
            self.requests[request.id]!.delivered = true
            self.machines[node].handleConnectionRequest(request)
        case .connectionRequestWithdrawn(let id, let reason):
            self.machines[node].handleRequestWithdrawn(id, reason)
        case .linkOpened(let link, _, let payload):
            guard self.ends[link] != nil else { return }  // closed or cancelled before it opened
            self.answered.remove(link)
            self.machines[node].handleLinkOpened(link, payload: payload)
        case .connectFailed(let link, let error):
            self.machines[node].handleConnectFailed(link, error)
        case .received(let message, let link, let mode):
            self.machines[node].handleReceived(message, on: link, mode: mode)
        case .linkClosed(let link, let reason):
            self.machines[node].handleLinkClosed(link, reason)
        case .sendBufferAvailable(let link):
            self.machines[node].handleSendBufferAvailable(link)
        case .handshakeFailed:
            self.machines[node].statistics.authenticationFailures += 1
        case .liveness(let id, let alive):
            self.machines[node].handleLiveness(id, alive: alive)
        case .linkMoved:
            self.machines[node].statistics.linkMoves += 1
        }
    }
}
