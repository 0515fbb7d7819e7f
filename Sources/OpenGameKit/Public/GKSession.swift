import Foundation
import GameKitDiscovery
import GameKitTransport
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Game Kit session: finds the other peers of the same session ID on the local network
/// (multicast DNS), connects to them over encrypted UDP links, and carries data between them,
/// reliably and in order or unreliably.
///
/// ```swift
/// let session = GKSession(sessionID: "chess", displayName: "Alice", sessionMode: .peer)
/// session.delegate = self
/// session.setDataReceiveHandler(self, withContext: nil)
/// session.isAvailable = true
/// // … session(_:peer:didChange:) reports .stateAvailable → session.connect(toPeer:withTimeout:)
/// try session.sendData(toAllPeers: Data("hello".utf8), with: .reliable)
/// ```
///
/// Every method may be called from any thread. The delegate and the data handler are called on
/// ``delegateQueue`` (the main queue, as in Game Kit): a command-line program must run the main
/// queue (`dispatchMain()`, an async `main`, or `RunLoop.main.run()`), or set another queue.
public final class GKSession: @unchecked Sendable {
    /// The largest data one reliable send carries: 1 MiB (Game Kit: about 87 KB).
    public static let maximumReliableDataSize = 1 << 20
    /// The largest data one unreliable send carries: 96 KiB, sent as fragments and delivered
    /// whole or not at all.
    public static let maximumUnreliableDataSize = 96 << 10

    /// Network options of a session (a Swift-only addition).
    public struct Configuration: Sendable {
        /// Interfaces to discover peers on, by name (e.g. `["eth0"]`). Nil: the environment
        /// variable `OGK_DISCOVERY_INTERFACES` (comma-separated) if set, else every interface
        /// that is up, multicast-capable and addressed.
        public var interfaceNames: [String]?
        /// The local address of the session's UDP socket: nil for every address (IPv6 and IPv4
        /// when the system allows, else IPv4 only).
        public var bindAddress: String?
        /// The UDP port of the session's socket; 0 picks a free one.
        public var port: Int = 0

        public init(interfaceNames: [String]? = nil, bindAddress: String? = nil, port: Int = 0) {
            self.interfaceNames = interfaceNames
            self.bindAddress = bindAddress
            self.port = port
        }
    }

    /// The session's identifier: only sessions with the same ID see each other.
    public let sessionID: String
    /// The name others see for this peer.
    public let displayName: String
    /// This peer's ID: a random 32-bit number as a decimal string.
    public let peerID: String
    /// How the session finds and is found.
    public let sessionMode: GKSessionMode

    let core: SessionCore
    private let callbacks = NIOLockedValueBox(Callbacks())
    let subscribers = NIOLockedValueBox(Subscribers())

    struct Callbacks {
        weak var delegate: (any GKSessionDelegate)?
        var handler: (any GKSessionDataReceiveHandler)?
        var context: UnsafeMutableRawPointer?
        var closure: (@Sendable (Data, String, GKSession) -> Void)?
        var queue: DispatchQueue = .main
        var disconnectTimeout: TimeInterval = 20
    }

    /// Creates a session. A nil `sessionID` is derived from the executable's name, a nil
    /// `displayName` is the host name. `password` (a Swift-only addition) keeps anyone without
    /// it from connecting or even asking to: it is mixed into every link's key exchange.
    ///
    /// Nothing touches the network until ``isAvailable`` is set (or ``start()`` is called).
    public init(sessionID: String?, displayName: String?, sessionMode: GKSessionMode, password: String? = nil, configuration: Configuration = Configuration()) {
        let sessionID = sessionID ?? Self.executableName()
        let displayName = displayName ?? Self.hostName()
        let peerID = UInt32.random(in: 1...UInt32.max)
        self.sessionID = sessionID
        self.displayName = displayName
        self.peerID = String(peerID)
        self.sessionMode = sessionMode
        let identity = SessionMachine.Identity(
            peerID: peerID, displayName: displayName, mode: sessionMode, sessionKey: SessionHello.sessionKey(for: sessionID))
        self.core = SessionCore(
            identity: identity, serviceType: ServiceType(sessionIdentifier: sessionID), password: password,
            configuration: configuration, disconnectTimeout: .seconds(20))
        self.core.setDeliver { [weak self] notifications, names in self?.deliver(notifications, names: names) }
    }

    deinit {
        let core = self.core
        Task { await core.shutdown() }
    }

    // MARK: - Properties

    /// The delegate (held weakly), called on ``delegateQueue``.
    public var delegate: (any GKSessionDelegate)? {
        get { self.callbacks.withLockedValue { $0.delegate } }
        set { self.callbacks.withLockedValue { $0.delegate = newValue } }
    }

    /// Where the delegate and the data handler are called: the main queue unless changed (a
    /// Swift-only addition). Calls are made one at a time, in order.
    public var delegateQueue: DispatchQueue {
        get { self.callbacks.withLockedValue { $0.queue } }
        set { self.callbacks.withLockedValue { $0.queue = newValue } }
    }

    /// Whether the session is visible and looking: true makes a server or peer advertise and a
    /// client or peer browse; false withdraws the advertisement (others see this peer
    /// `.stateUnavailable`) and stops browsing, keeping existing connections.
    public var isAvailable: Bool {
        get { self.core.read { $0.isAvailable } }
        set {
            try? self.core.perform { machine in machine.setAvailable(newValue) }
            if newValue {
                let core = self.core
                Task { await core.start() }
            }
        }
    }

    /// Seconds a connected peer may stay silent before it is disconnected (default 20). Applies
    /// to connections already open too.
    public var disconnectTimeout: TimeInterval {
        get { self.callbacks.withLockedValue { $0.disconnectTimeout } }
        set {
            let seconds = newValue.isFinite && newValue > 0 ? newValue : 20
            self.callbacks.withLockedValue { $0.disconnectTimeout = seconds }
            self.core.setDisconnectTimeout(.nanoseconds(Int64(min(seconds, 86_400) * 1e9)))
        }
    }

    /// The session's counters (a Swift-only addition).
    public var statistics: GKSessionStatistics {
        self.core.read { $0.statistics }
    }

    /// The transport endpoint's counters, once bound (handshakes, drops; for diagnostics).
    var transportStatistics: EndpointStatistics? { self.core.transportStatistics }

    /// Binds the session's socket and joins discovery, returning once both are ready (a
    /// Swift-only addition; setting ``isAvailable`` does the same in the background).
    ///
    /// - Throws: ``GKSessionError/cannotEnableError`` when no network interface can be used
    ///   (the delegate hears it too).
    public func start() async throws(GKSessionError) {
        if let error = await self.core.start() { throw error }
    }

    /// Leaves every peer, withdraws, stops browsing and closes the socket (a Swift-only
    /// addition; dropping the last reference does the same in the background). The session
    /// cannot be used afterwards.
    public func close() async {
        await self.core.shutdown()
        for finish in self.subscribers.withLockedValue({ $0.close() }) { finish() }
    }

    // MARK: - Connecting

    /// Asks a peer seen as available to connect. The outcome arrives as
    /// `session(_:peer:didChange:)` with `.stateConnected`, or as
    /// `session(_:connectionWithPeerFailed:withError:)`: declined, timed out (after `timeout`
    /// seconds; 0 waits as long as the peer is there), cancelled, in progress (the peer asked
    /// first), peer not found.
    public func connect(toPeer peerID: String, withTimeout timeout: TimeInterval) {
        guard let id = UInt32(peerID) else {
            try? self.core.perform { machine in machine.notify(.connectionFailed(0, .peerNotFoundError)) }
            return
        }
        let limit: TimeAmount? = timeout > 0 && timeout.isFinite ? .nanoseconds(Int64(min(timeout, 86_400) * 1e9)) : .hours(24 * 365)
        try? self.core.perform { machine in machine.connect(to: id, timeout: limit) }
    }

    /// Withdraws a connection request; both sides hear `GKSessionCancelledError`.
    public func cancelConnect(toPeer peerID: String) {
        guard let id = UInt32(peerID) else { return }
        try? self.core.perform { machine in machine.cancelConnect(to: id) }
    }

    /// Accepts a peer's connection request; both sides then see `.stateConnected`.
    ///
    /// - Throws: ``GKSessionError/peerNotFoundError`` when no request from that peer awaits an
    ///   answer.
    public func acceptConnection(fromPeer peerID: String) throws {
        guard let id = UInt32(peerID) else { throw GKSessionError.peerNotFoundError }
        try self.core.perform { machine throws(GKSessionError) in try machine.accept(id) }
    }

    /// Declines a peer's connection request; the peer hears `GKSessionDeclinedError`.
    public func denyConnection(fromPeer peerID: String) {
        guard let id = UInt32(peerID) else { return }
        try? self.core.perform { machine in machine.deny(id) }
    }

    // MARK: - Disconnecting

    /// Disconnects from every peer; each becomes `.stateDisconnected`.
    public func disconnectFromAllPeers() {
        try? self.core.perform { machine in machine.disconnectFromAllPeers() }
    }

    /// Makes every member of the session drop a peer (the peer itself included).
    public func disconnectPeer(fromAllPeers peerID: String) {
        guard let id = UInt32(peerID) else { return }
        try? self.core.perform { machine in machine.disconnectPeerFromAllPeers(id) }
    }

    // MARK: - Peers

    /// The peers in a state: available, unavailable (busy), connecting (either direction),
    /// connected, or connected through a server. Nil when there are none, as in Game Kit.
    public func peers(with state: GKPeerConnectionState) -> [String]? {
        self.core.read { $0.peers(in: state) }?.map(String.init)
    }

    /// A peer's display name; nil for a peer the session never knew. `peerID` may be this
    /// session's own.
    public func displayName(forPeer peerID: String) -> String? {
        guard let id = UInt32(peerID) else { return nil }
        return self.core.read { $0.displayName(of: id) }
    }

    // MARK: - Sending

    /// Queues data for some connected peers without waiting: all of them get it or none does.
    ///
    /// - Throws: ``GKSessionError/invalidParameterError`` (empty list, malformed peer ID, this
    ///   peer's own ID), ``GKSessionError/peerNotFoundError`` (a peer the session does not know),
    ///   ``GKSessionError/notConnectedError``, ``GKSessionError/dataTooBigError`` (over
    ///   ``maximumReliableDataSize`` or ``maximumUnreliableDataSize``),
    ///   ``GKSessionError/systemError`` (a peer's send buffer is full: retry, or use the `async`
    ///   form that waits).
    public func send(_ data: Data, toPeers peers: [String], with mode: GKSendDataMode) throws {
        let (buffer, ids, transportMode) = try Self.prepare(data, peers, mode)
        try self.core.perform { machine throws(GKSessionError) in try machine.send(buffer, to: ids, mode: transportMode) }
    }

    /// Queues data for every connected peer (those reached through a server included) without
    /// waiting. Nothing to do when no peer is connected.
    ///
    /// - Throws: as ``send(_:toPeers:with:)``.
    public func sendData(toAllPeers data: Data, with mode: GKSendDataMode) throws {
        let (buffer, _, transportMode) = try Self.prepare(data, [], mode)
        try self.core.perform { machine throws(GKSessionError) in
            let peers = machine.allConnectedPeers
            if !peers.isEmpty { try machine.send(buffer, to: peers, mode: transportMode) }
        }
    }

    /// Sends data to some connected peers, waiting while a send buffer is full (a Swift-only
    /// addition; named apart from the non-waiting `send` so that code in async functions keeps
    /// calling the Game Kit one). Throws as ``send(_:toPeers:with:)`` otherwise.
    public func write(_ data: Data, toPeers peers: [String], with mode: GKSendDataMode) async throws {
        let (buffer, ids, transportMode) = try Self.prepare(data, peers, mode)
        try await self.core.sendWaitingForRoom({ machine throws(GKSessionError) in try machine.send(buffer, to: ids, mode: transportMode) },
                                               links: { $0.routes(to: ids) })
    }

    /// Sends data to every connected peer, waiting while a send buffer is full (a Swift-only
    /// addition).
    public func write(toAllPeers data: Data, with mode: GKSendDataMode) async throws {
        let (buffer, _, transportMode) = try Self.prepare(data, [], mode)
        try await self.core.sendWaitingForRoom({ machine throws(GKSessionError) in
            let peers = machine.allConnectedPeers
            if !peers.isEmpty { try machine.send(buffer, to: peers, mode: transportMode) }
        }, links: { $0.routes(to: $0.allConnectedPeers) })
    }

    private static func prepare(_ data: Data, _ peers: [String], _ mode: GKSendDataMode) throws(GKSessionError) -> (ByteBuffer, [UInt32], SendMode) {
        let limit = mode == .reliable ? Self.maximumReliableDataSize : Self.maximumUnreliableDataSize
        guard data.count <= limit else { throw .dataTooBigError }
        var ids: [UInt32] = []
        for peer in peers {
            guard let id = UInt32(peer) else { throw .invalidParameterError }
            ids.append(id)
        }
        var buffer = ByteBuffer()
        buffer.writeBytes(data)
        return (buffer, ids, mode == .reliable ? .reliable : .unreliable)
    }

    // MARK: - Receiving

    /// Sets the object that receives data from peers, and the context passed back to it with
    /// every call (Game Kit's `setDataReceiveHandler:withContext:`). The handler is held
    /// strongly until replaced; pass nil to remove it. Called on ``delegateQueue``.
    public func setDataReceiveHandler(_ handler: (any GKSessionDataReceiveHandler)?, withContext context: UnsafeMutableRawPointer?) {
        self.callbacks.withLockedValue {
            $0.handler = handler
            $0.context = context
        }
    }

    /// Sets a closure that receives data from peers (a Swift-only addition; called after the
    /// handler object, if both are set). Called on ``delegateQueue``.
    public func setDataReceiveHandler(_ handler: (@Sendable (_ data: Data, _ peerID: String, _ session: GKSession) -> Void)?) {
        self.callbacks.withLockedValue { $0.closure = handler }
    }

    // MARK: - Delivery

    private func deliver(_ notifications: [SessionNotification], names: [UInt32: String]) {
        self.subscribers.withLockedValue { $0.yield(notifications, names: names) }
        let queue = self.callbacks.withLockedValue { $0.queue }
        queue.async { [weak self] in
            self?.dispatch(notifications)
        }
    }

    private func dispatch(_ notifications: [SessionNotification]) {
        for notification in notifications {
            let callbacks = self.callbacks.withLockedValue { $0 }
            switch notification {
            case .peerChanged(let peer, let state):
                callbacks.delegate?.session(self, peer: String(peer), didChange: state)
            case .connectionRequest(let peer):
                callbacks.delegate?.session(self, didReceiveConnectionRequestFromPeer: String(peer))
            case .connectionFailed(let peer, let error):
                callbacks.delegate?.session(self, connectionWithPeerFailed: String(peer), withError: error)
            case .failed(let error):
                callbacks.delegate?.session(self, didFailWithError: error)
            case .received(let buffer, let peer, _):
                guard callbacks.handler != nil || callbacks.closure != nil else { continue }
                let data = Data(buffer.readableBytesView)
                callbacks.handler?.receiveData(data, fromPeer: String(peer), inSession: self, context: callbacks.context)
                callbacks.closure?(data, String(peer), self)
            }
        }
    }

    // MARK: - Defaults

    static func executableName() -> String {
        let name = URL(fileURLWithPath: CommandLine.arguments.first ?? "").lastPathComponent
        return name.isEmpty ? ProcessInfo.processInfo.processName : name
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "Linux" }
        let name = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "Linux" : name
    }
}
