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
/// let session: GKSession = GKSession(sessionID: "chess", displayName: "Alice", sessionMode: .peer)
/// session.delegate = self
/// session.setDataReceiveHandler(self, withContext: nil)
/// session.isAvailable = true
/// // … session(_:peer:didChange:) reports .stateAvailable → session.connect(toPeer:withTimeout:)
/// try session.sendData(toAllPeers: Data("hello".utf8), with: .reliable)
/// ```
///
/// The class has the shape Swift gives Apple's: an open subclass of `NSObject`, implicitly
/// unwrapped strings where Apple's header has no nullability, `throws` where Objective-C had an
/// error out-parameter. Every method may be called from any thread. The delegate and the data
/// handler are called on ``delegateQueue``: the main queue, as in Game Kit. A command-line program
/// runs the main queue with `RunLoop.main.run()`, which calls them on the main thread; under
/// `dispatchMain()` or an `async` `main`, Linux runs the main queue on another thread, so calls
/// come one at a time on the main queue but not on the main thread.
open class GKSession: NSObject, @unchecked Sendable {
    /// The largest data one reliable send carries: 1 MiB (Game Kit: about 87 KB).
    public static let maximumReliableDataSize = 1 << 20
    /// The largest data one unreliable send carries: 96 KiB, sent as fragments and delivered
    /// whole or not at all.
    public static let maximumUnreliableDataSize = 96 << 10

    private let identifier: String
    private let name: String
    private let ownPeerID: String
    private let mode: GKSessionMode

    let core: SessionCore
    private let callbacks = NIOLockedValueBox(Callbacks())
    let streams = SessionStreams()

    struct Callbacks {
        weak var delegate: (any GKSessionDelegate)?
        var handler: (any GKSessionDataReceiveHandler)?
        var context: UnsafeMutableRawPointer?
        var closure: (@Sendable (Data, String, GKSession) -> Void)?
        var queue: DispatchQueue = .main
        var disconnectTimeout: TimeInterval = 20
    }

    /// Creates a session (Game Kit's `initWithSessionID:displayName:sessionMode:`). A nil
    /// `sessionID` is derived from the executable's name, a nil `name` is the host name. Never
    /// nil here; the result is implicitly unwrapped because Apple's is.
    ///
    /// Nothing touches the network until ``isAvailable`` is set (or ``start()`` is called).
    public init!(sessionID: String!, displayName name: String!, sessionMode mode: GKSessionMode) {
        (self.identifier, self.name, self.ownPeerID, self.mode, self.core) =
            Self.parts(sessionID: sessionID, displayName: name, sessionMode: mode, password: nil, configuration: Configuration())
        super.init()
        self.connectDelivery()
    }

    /// Creates a session with a password and network options (a Swift-only addition; the
    /// result is not optional). `password` keeps anyone without it from connecting or even
    /// asking to: it is mixed into every link's key exchange.
    public init(sessionID: String?, displayName: String?, sessionMode: GKSessionMode, password: String? = nil, configuration: Configuration = Configuration()) {
        (self.identifier, self.name, self.ownPeerID, self.mode, self.core) =
            Self.parts(sessionID: sessionID, displayName: displayName, sessionMode: sessionMode, password: password, configuration: configuration)
        super.init()
        self.connectDelivery()
    }

    private static func parts(
        sessionID: String?, displayName: String?, sessionMode: GKSessionMode, password: String?, configuration: Configuration
    ) -> (String, String, String, GKSessionMode, SessionCore) {
        let sessionID = sessionID ?? Self.executableName()
        let displayName = displayName ?? Self.hostName()
        let peerID = UInt32.random(in: 1...UInt32.max)
        let identity = SessionMachine.Identity(
            peerID: peerID, displayName: displayName, mode: sessionMode, sessionKey: SessionHello.sessionKey(for: sessionID),
            relaysBetweenClients: configuration.relaysBetweenClients)
        let core = SessionCore(
            identity: identity, serviceType: ServiceType(sessionIdentifier: sessionID), password: password,
            configuration: configuration, disconnectTimeout: .seconds(20))
        return (sessionID, displayName, String(peerID), sessionMode, core)
    }

    private func connectDelivery() {
        self.core.setDeliver { [weak self] notifications, context in self?.deliver(notifications, context) }
        let core = self.core
        LiveSessions.shared.add(core) { [weak self] in
            if let self { await self.close() } else { await core.shutdown() }
        }
    }

    /// A session whose last reference goes away closes as ``close()`` does, in the background:
    /// its peers are told, its advertisement is withdrawn.
    deinit {
        let core = self.core
        Task { await core.shutdown() }
    }

    /// Ends every session of the process as ``close()`` ends one (a Swift-only addition): each
    /// connected peer is told (it sees `.stateDisconnected` at once), each advertisement is
    /// withdrawn with multicast DNS goodbyes (every browser, Avahi's and the picker's included,
    /// drops the peer at once), each browser stops. Returns when those packets are on the wire,
    /// or after `timeout` seconds; true when every session finished in time.
    ///
    /// Call it from your program's own handling of termination signals (a `DispatchSource`
    /// signal source, not a C signal handler, which may call nothing of this kind) and then end
    /// the process:
    ///
    /// ```swift
    /// signal(SIGTERM, SIG_IGN)
    /// let source = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
    /// source.setEventHandler {
    ///     GKSession.closeAll()
    ///     exit(EXIT_SUCCESS)
    /// }
    /// source.resume()
    /// ```
    ///
    /// `exit()` (and returning from `main`) runs it too, waiting at most half a second. A
    /// process killed by a signal it does not handle (SIGKILL, or SIGTERM left to its default)
    /// says no goodbye; the others then see it gone within a few seconds (PROTOCOL §14.7).
    ///
    /// It blocks the calling thread; the work happens on the sessions' own threads, so any
    /// thread or queue may call it, the main queue included.
    @discardableResult
    public static func closeAll(timeout: TimeInterval = 1) -> Bool {
        LiveSessions.shared.closeAll(timeout: timeout)
    }

    // MARK: - Properties

    /// The session's identifier: only sessions with the same ID see each other.
    open var sessionID: String! { self.identifier }
    /// The name others see for this peer.
    open var displayName: String! { self.name }
    /// This peer's ID: a random 32-bit number as a decimal string.
    open var peerID: String! { self.ownPeerID }
    /// How the session finds and is found.
    open var sessionMode: GKSessionMode { self.mode }

    /// The delegate (held weakly), called on ``delegateQueue``.
    open var delegate: (any GKSessionDelegate)! {
        get { self.callbacks.withLockedValue { $0.delegate } }
        set { self.callbacks.withLockedValue { $0.delegate = newValue } }
    }

    /// Where the delegate and the data handler are called: the main queue unless changed (a
    /// Swift-only addition). Calls are made one at a time, in order.
    open var delegateQueue: DispatchQueue {
        get { self.callbacks.withLockedValue { $0.queue } }
        set { self.callbacks.withLockedValue { $0.queue = newValue } }
    }

    /// Whether the session is visible and looking (default false). While true a server or peer
    /// advertises itself and a client or peer browses, connected or not; false withdraws the
    /// advertisement (others see this peer `.stateUnavailable`) and stops browsing, keeping
    /// existing connections.
    open var isAvailable: Bool {
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
    open var disconnectTimeout: TimeInterval {
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

    /// The counters of the session's transport endpoint, once bound: packets, handshakes,
    /// drops, link moves and liveness probes (`livenessProbesSent` is what watching the peers it
    /// sees costs, PROTOCOL §6.6). Swift-only; for diagnostics and benchmarks.
    public var transportStatistics: EndpointStatistics? { self.core.transportStatistics }

    /// "<GKSession Alice (peer 1234) sessionID chess, mode peer, available>".
    open override var description: String {
        "<GKSession \(self.name) (peer \(self.ownPeerID)) sessionID \(self.identifier), mode \(self.mode), \(self.isAvailable ? "available" : "unavailable")>"
    }

    /// Binds the session's socket and joins discovery, returning once both are ready (a
    /// Swift-only addition; setting ``isAvailable`` does the same in the background).
    ///
    /// - Throws: ``GKSessionError/Code/cannotEnableError`` when no network interface can be used
    ///   (the delegate hears it too).
    public func start() async throws(GKSessionError) {
        if let error = await self.core.start() { throw error }
    }

    /// Leaves every peer, withdraws, stops browsing and closes the socket (a Swift-only
    /// addition; dropping the last reference does the same in the background). The session
    /// cannot be used afterwards.
    public func close() async {
        await self.core.shutdown()
        self.streams.finish()
    }

    // MARK: - Connecting

    /// Asks a peer seen as available to connect. The outcome arrives as
    /// `session(_:peer:didChange:)` with `.stateConnected`, or as
    /// `session(_:connectionWithPeerFailed:withError:)`: declined, timed out (after `timeout`
    /// seconds; 0 waits as long as the peer is there), cancelled, in progress (the peer asked
    /// first), peer not found.
    open func connect(toPeer peerID: String!, withTimeout timeout: TimeInterval) {
        guard let id = peerID.flatMap(UInt32.init) else {
            try? self.core.perform { machine in machine.notify(.connectionFailed(0, .peerNotFoundError)) }
            return
        }
        let limit: TimeAmount? = timeout > 0 && timeout.isFinite ? .nanoseconds(Int64(min(timeout, 86_400) * 1e9)) : .hours(24 * 365)
        try? self.core.perform { machine in machine.connect(to: id, timeout: limit) }
    }

    /// Withdraws a connection request; both sides hear `GKSessionCancelledError`.
    open func cancelConnect(toPeer peerID: String!) {
        guard let id = peerID.flatMap(UInt32.init) else { return }
        try? self.core.perform { machine in machine.cancelConnect(to: id) }
    }

    /// Accepts a peer's connection request; both sides then see `.stateConnected`.
    ///
    /// - Throws: ``GKSessionError/Code/peerNotFoundError`` when no request from that peer awaits
    ///   an answer.
    open func acceptConnection(fromPeer peerID: String!) throws {
        guard let id = peerID.flatMap(UInt32.init) else { throw GKSessionError(.peerNotFoundError) }
        try self.core.perform { machine throws(GKSessionError) in try machine.accept(id) }
    }

    /// Declines a peer's connection request; the peer hears `GKSessionDeclinedError`.
    open func denyConnection(fromPeer peerID: String!) {
        guard let id = peerID.flatMap(UInt32.init) else { return }
        try? self.core.perform { machine in machine.deny(id) }
    }

    // MARK: - Disconnecting

    /// Disconnects from every peer; each becomes `.stateDisconnected`.
    open func disconnectFromAllPeers() {
        try? self.core.perform { machine in machine.disconnectFromAllPeers() }
    }

    /// Makes every member of the session drop a peer (the peer itself included).
    open func disconnectPeer(fromAllPeers peerID: String!) {
        guard let id = peerID.flatMap(UInt32.init) else { return }
        try? self.core.perform { machine in machine.disconnectPeerFromAllPeers(id) }
    }

    // MARK: - Peers

    /// The peers in a state: available, unavailable, connecting (either direction) or
    /// connected. Empty, not nil, when there are none: Game Kit's nil meant an empty list in
    /// Objective-C, and in Swift a nil here would trap in `for peer in session.peers(with: …)`.
    /// (Apple's Swift type is `[Any]!`; these are the same peer ID strings, typed.)
    open func peers(with state: GKPeerConnectionState) -> [String]! {
        self.core.read { $0.peers(in: state) }.map(String.init)
    }

    /// A peer's display name; nil for a peer the session never knew. `peerID` may be this
    /// session's own.
    open func displayName(forPeer peerID: String!) -> String! {
        guard let id = peerID.flatMap(UInt32.init) else { return nil }
        return self.core.read { $0.displayName(of: id) }
    }

    /// How a connected peer is reached: directly, or through the server of a room that relays
    /// between its clients; nil for a peer that is not connected (a Swift-only addition).
    public func route(toPeer peerID: String) -> PeerRoute? {
        guard let id = UInt32(peerID) else { return nil }
        return self.core.read { machine -> PeerRoute? in
            switch machine.route(to: id) {
            case .direct?: .direct
            case .server(let server)?: .throughServer(String(server))
            case nil: nil
            }
        }
    }

    // MARK: - Sending

    /// Queues data for some connected peers without waiting: all of them get it or none does.
    /// `peers` holds peer ID strings (Apple's Swift type for the `NSArray` of its header).
    ///
    /// - Throws: ``GKSessionError/Code/invalidParameterError`` (no data, an empty list, an
    ///   element that is not a peer ID, this peer's own ID), ``GKSessionError/Code/peerNotFoundError``
    ///   (a peer the session does not know), ``GKSessionError/Code/notConnectedError``,
    ///   ``GKSessionError/Code/dataTooBigError`` (over ``maximumReliableDataSize`` or
    ///   ``maximumUnreliableDataSize``), ``GKSessionError/Code/systemError`` (a peer's send
    ///   buffer is full: retry, or use the `async` form that waits).
    open func send(_ data: Data!, toPeers peers: [Any]!, with mode: GKSendDataMode) throws {
        let (buffer, ids, transportMode) = try Self.prepare(data, Self.peerIDs(peers), mode)
        try self.core.perform { machine throws(GKSessionError) in try machine.send(buffer, to: ids, mode: transportMode) }
    }

    /// Queues data for every connected peer without waiting. Nothing to do when no peer is
    /// connected.
    ///
    /// - Throws: as ``send(_:toPeers:with:)``.
    open func sendData(toAllPeers data: Data!, with mode: GKSendDataMode) throws {
        let (buffer, _, transportMode) = try Self.prepare(data, [], mode)
        try self.core.perform { machine throws(GKSessionError) in
            let peers = machine.allConnectedPeers
            if !peers.isEmpty { try machine.send(buffer, to: peers, mode: transportMode) }
        }
    }

    /// Sends data to some peers, waiting while a send buffer is full and while a connection to
    /// one of them is being opened (a Swift-only addition; named apart from the non-waiting
    /// `send` so that code in async functions keeps calling the Game Kit one). So a `write`
    /// right after ``acceptConnection(fromPeer:)`` or ``connect(toPeer:withTimeout:)`` goes out
    /// once the peer is connected, or fails with the reason the connection did not open.
    ///
    /// - Throws: as ``send(_:toPeers:with:)``; the connection attempt's error when it fails
    ///   (declined, timed out, cancelled); `CancellationError` as soon as the task is cancelled
    ///   (nothing is sent then); ``GKSessionError/Code/notConnectedError`` when the session
    ///   closes first.
    public func write(_ data: Data, toPeers peers: [String], with mode: GKSendDataMode) async throws {
        let (buffer, ids, transportMode) = try Self.prepare(data, peers, mode)
        try await self.core.waitFor { machine throws(GKSessionError) in
            do throws(GKSessionError) {
                try machine.send(buffer, to: ids, mode: transportMode)
                return .done
            } catch .systemError {
                return .waitForRoom(machine.routes(to: ids))
            } catch .notConnectedError {
                let opening = machine.opening(ids)
                guard !opening.isEmpty else { throw GKSessionError(.notConnectedError) }
                return .waitForConnection(opening)
            }
        }
    }

    /// Sends data to every connected peer, waiting while a send buffer is full (a Swift-only
    /// addition).
    ///
    /// - Throws: as ``write(_:toPeers:with:)``, and ``GKSessionError/Code/notConnectedError``
    ///   when no peer is connected (Game Kit's ``sendData(toAllPeers:with:)`` does nothing then).
    public func write(toAllPeers data: Data, with mode: GKSendDataMode) async throws {
        let (buffer, _, transportMode) = try Self.prepare(data, [], mode)
        try await self.core.waitFor { machine throws(GKSessionError) in
            let peers = machine.allConnectedPeers
            guard !peers.isEmpty else { throw GKSessionError(.notConnectedError, "No peer is connected: there is nobody to send to.") }
            do throws(GKSessionError) {
                try machine.send(buffer, to: peers, mode: transportMode)
                return .done
            } catch .systemError {
                return .waitForRoom(machine.routes(to: peers))
            }
        }
    }

    /// The peer ID strings of Game Kit's peer array (strings, or optionals holding them).
    private static func peerIDs(_ peers: [Any]?) throws(GKSessionError) -> [String] {
        guard let peers else { throw GKSessionError(.invalidParameterError, "The list of peers to send to is nil.") }
        var strings: [String] = []
        strings.reserveCapacity(peers.count)
        for peer in peers {
            guard let string = peer as? String else {
                throw GKSessionError(.invalidParameterError, "The list of peers holds a \(type(of: peer)), not a peer ID string.")
            }
            strings.append(string)
        }
        return strings
    }

    private static func prepare(_ data: Data?, _ peers: [String], _ mode: GKSendDataMode) throws(GKSessionError) -> (ByteBuffer, [UInt32], SendMode) {
        guard let data else { throw GKSessionError(.invalidParameterError, "The data to send is nil.") }
        let limit = mode == .reliable ? Self.maximumReliableDataSize : Self.maximumUnreliableDataSize
        guard data.count <= limit else {
            let name = mode == .reliable ? "maximumReliableDataSize" : "maximumUnreliableDataSize"
            throw GKSessionError(.dataTooBigError, "\(data.count) bytes is more than one \(mode) send carries: at most \(limit) (GKSession.\(name)).")
        }
        var ids: [UInt32] = []
        for peer in peers {
            guard let id = UInt32(peer) else {
                throw GKSessionError(.invalidParameterError, "\"\(peer)\" is not a peer ID: peer IDs are decimal numbers, as peerID and peers(with:) give them.")
            }
            ids.append(id)
        }
        // The one copy the Data API forces, with room for the session's header in front (so the
        // session message is not encoded again, SessionMessage.encodedData).
        let buffer = SessionMessage.dataPayload(copying: data)
        return (buffer, ids, mode == .reliable ? .reliable : .unreliable)
    }

    // MARK: - Receiving

    /// Sets the object that receives data from peers, and the context passed back to it with
    /// every call (Game Kit's `setDataReceiveHandler:withContext:`). The handler adopts
    /// ``GKSessionDataReceiveHandler`` (Linux has no Objective-C message send to find its method
    /// otherwise). It is held strongly until replaced; pass nil to remove it. Called on
    /// ``delegateQueue``.
    open func setDataReceiveHandler(_ handler: (any GKSessionDataReceiveHandler)!, withContext context: UnsafeMutableRawPointer!) {
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

    private func deliver(_ notifications: [SessionNotification], _ context: SessionCore.DeliveryContext) {
        self.streams.yield(notifications, context)
        // Only a program that set a delegate or a data handler waits for this queue: one that
        // reads the async sequences alone is not told its queue does not run.
        let (queue, listening) = self.callbacks.withLockedValue { ($0.queue, $0.delegate != nil || $0.handler != nil || $0.closure != nil) }
        let watch = self.core.deliveryWatch
        if listening { watch.queued() }
        queue.async { [weak self] in
            if listening { watch.delivered() }
            self?.dispatch(notifications, failures: context.failures, sessionFailure: context.sessionFailure)
        }
    }

    private func dispatch(_ notifications: [SessionNotification], failures: [UInt32: GKSessionError], sessionFailure: GKSessionError?) {
        for notification in notifications {
            let callbacks = self.callbacks.withLockedValue { $0 }
            switch notification {
            case .peerChanged(let peer, let state):
                callbacks.delegate?.session(self, peer: String(peer), didChange: state)
            case .connectionRequest(let peer):
                callbacks.delegate?.session(self, didReceiveConnectionRequestFromPeer: String(peer))
            case .connectionFailed(let peer, let error):
                callbacks.delegate?.session(self, connectionWithPeerFailed: String(peer), withError: failures[peer] ?? GKSessionError(error))
            case .authenticationFailed:
                break
            case .failed(let error):
                callbacks.delegate?.session(self, didFailWithError: sessionFailure ?? GKSessionError(error))
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
