import Foundation
import GameKitTransport
import NIOCore

extension GKSession {
    /// A peer's new state.
    public struct PeerChange: Sendable, Equatable {
        /// The peer.
        public var peerID: String
        /// Its display name, when known.
        public var displayName: String?
        /// The state it changed to.
        public var state: GKPeerConnectionState
    }

    /// A peer asking to connect: answer with `acceptConnection(fromPeer:)` or
    /// `denyConnection(fromPeer:)`.
    public struct ConnectionRequest: Sendable, Equatable {
        public var peerID: String
        public var displayName: String?
    }

    /// A connection attempt that failed, on either side.
    public struct ConnectionFailure: Sendable, Equatable {
        public var peerID: String
        public var error: GKSessionError
    }

    /// Data from a peer.
    public struct Message: Sendable, Equatable {
        public var data: Data
        public var peerID: String
        public var mode: GKSendDataMode
    }

    /// Peer state changes from now on, as an `AsyncSequence` (a Swift-only addition). Each
    /// access makes a new sequence; it ends when the session closes. Events wait in the sequence
    /// until read.
    public var peerChanges: AsyncStream<PeerChange> {
        self.streams.peerChanges.makeStream()
    }

    /// Connection requests from now on (a Swift-only addition).
    public var connectionRequests: AsyncStream<ConnectionRequest> {
        self.streams.connectionRequests.makeStream()
    }

    /// Failed connection attempts from now on (a Swift-only addition).
    public var connectionFailures: AsyncStream<ConnectionFailure> {
        self.streams.connectionFailures.makeStream()
    }

    /// Data received from now on (a Swift-only addition). Every message waits in the sequence
    /// until read, so read it steadily.
    public var messages: AsyncStream<Message> {
        self.streams.messages.makeStream()
    }

    /// Connects to an available peer and returns once it is connected (a Swift-only addition;
    /// Game Kit's ``connect(toPeer:withTimeout:)`` answers through the delegate, which hears this
    /// attempt too). Returns at once if the peer is already connected, and joins an attempt of
    /// ours already under way.
    ///
    /// - Parameters:
    ///   - peerID: an available peer, as `peers(with: .stateAvailable)` lists it.
    ///   - timeout: seconds to wait for the peer's answer; nil (or 0, as in Game Kit) waits as
    ///     long as the peer is there.
    /// - Throws: the attempt's ``GKSessionError``: declined, timed out, peer not found, or in
    ///   progress (the peer asked first: answer its request instead);
    ///   ``GKSessionError/Code/connectionFailedError`` when it ended otherwise;
    ///   `CancellationError` when the task is cancelled (the attempt is withdrawn, and the peer
    ///   hears it was cancelled); ``GKSessionError/Code/notConnectedError`` when the session
    ///   closes first.
    public func connect(to peerID: String, timeout: TimeInterval? = nil) async throws {
        guard let id = UInt32(peerID) else { throw GKSessionError(.peerNotFoundError) }
        let seconds = timeout.flatMap { $0 > 0 && $0.isFinite ? min($0, 86_400) : nil }
        let limit: TimeAmount = seconds.map { .nanoseconds(Int64($0 * 1e9)) } ?? .hours(24 * 365)
        do {
            // Start the attempt once, then wait for it. A failure at once (an unknown peer) is
            // the peer's last failure when the wait looks.
            let core = self.core
            try await core.waitFor { machine throws(GKSessionError) in
                if machine.state(of: id) != .stateConnected, machine.opening([id]).isEmpty {
                    core.lastFailures[id] = nil
                    machine.connect(to: id, timeout: limit)
                }
                return .done
            }
            try await core.waitFor { machine throws(GKSessionError) in try Self.connectionStep(machine, id, core) }
        } catch is CancellationError {
            self.cancelConnect(toPeer: peerID)
            throw CancellationError()
        }
    }

    /// Accepts a peer's connection request and returns once the peer is connected (a Swift-only
    /// addition; ``acceptConnection(fromPeer:)`` returns at once).
    ///
    /// - Throws: ``GKSessionError/Code/peerNotFoundError`` when no request from that peer awaits
    ///   an answer; ``GKSessionError/Code/connectionFailedError`` when the link does not open;
    ///   `CancellationError` when the task is cancelled: the waiting ends, the acceptance
    ///   stands (the peer may still connect); ``GKSessionError/Code/notConnectedError`` when the
    ///   session closes first.
    public func accept(fromPeer peerID: String) async throws {
        guard let id = UInt32(peerID) else { throw GKSessionError(.peerNotFoundError) }
        let core = self.core
        try core.perform { _ throws(GKSessionError) in core.lastFailures[id] = nil }
        try self.acceptConnection(fromPeer: peerID)
        try await core.waitFor { machine throws(GKSessionError) in try Self.connectionStep(machine, id, core) }
    }

    /// Connected: done; being opened: wait; neither: the attempt ended without a connection,
    /// for the reason its failure gave if one was heard. Runs under the core's lock.
    private static func connectionStep(_ machine: SessionMachine, _ id: UInt32, _ core: SessionCore) throws(GKSessionError) -> SessionCore.StepResult {
        if machine.state(of: id) == .stateConnected { return .done }
        if !machine.opening([id]).isEmpty { return .waitForConnection([id]) }
        throw core.lastFailures[id] ?? .connectionFailure(.connectionFailedError, peer: id, name: machine.displayName(of: id))
    }
}

/// The readers of the session's async sequences (``StreamSubscribers``: yielded to with no lock
/// a reader's termination takes; the session's core lock, under which deliveries run, keeps them
/// in order).
struct SessionStreams: Sendable {
    let peerChanges = StreamSubscribers<GKSession.PeerChange>()
    let connectionRequests = StreamSubscribers<GKSession.ConnectionRequest>()
    let connectionFailures = StreamSubscribers<GKSession.ConnectionFailure>()
    let messages = StreamSubscribers<GKSession.Message>()

    func yield(_ notifications: [SessionNotification], _ context: SessionCore.DeliveryContext) {
        let names = context.names
        for notification in notifications {
            switch notification {
            case .peerChanged(let peer, let state) where !self.peerChanges.isEmpty:
                self.peerChanges.yield([GKSession.PeerChange(peerID: String(peer), displayName: names[peer], state: state)])
            case .connectionRequest(let peer) where !self.connectionRequests.isEmpty:
                self.connectionRequests.yield([GKSession.ConnectionRequest(peerID: String(peer), displayName: names[peer])])
            case .connectionFailed(let peer, let error) where !self.connectionFailures.isEmpty:
                let failure = context.failures[peer] ?? GKSessionError(error)
                self.connectionFailures.yield([.init(peerID: String(peer), error: failure)])
            case .received(let buffer, let peer, let mode) where !self.messages.isEmpty:
                let message = GKSession.Message(data: Data(buffer.readableBytesView), peerID: String(peer), mode: mode == .reliable ? .reliable : .unreliable)
                self.messages.yield([message])
            default:
                break
            }
        }
    }

    /// Ends every sequence (the session closed), and every later one.
    func finish() {
        self.peerChanges.finish()
        self.connectionRequests.finish()
        self.connectionFailures.finish()
        self.messages.finish()
    }
}
