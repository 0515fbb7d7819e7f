import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore

/// One established link, without I/O: datagrams and the current time go in; datagrams, events and
/// the next deadline come out.
///
/// It owns everything that happens after the handshake: packet protection and the replay window,
/// the reliable stream with selective acknowledgements, loss detection (packet and time
/// thresholds, RFC 6298 retransmission timer with back-off), CUBIC congestion control and pacing,
/// flow control, unreliable messages and their fragments, keepalives and closing. Being free of
/// I/O and of the wall clock, it is driven in tests by a virtual clock and in production by the
/// endpoint's event loop. The receive path, transmit path and timers live in extensions.
struct LinkMachine {
    enum Role: Sendable {
        case initiator
        case responder
    }

    enum State: Equatable {
        /// The responder accepted; nothing is sent until the initiator is heard from.
        case awaitingConfirmation(deadline: NIODeadline)
        case open
        /// Closing: queued reliable data is delivered first, then a CLOSE frame goes out.
        case closing(code: UInt16, deadline: NIODeadline)
        /// Closed; kept briefly so that the peer's late packets are answered with CLOSE (when this
        /// side closed) or silently absorbed (when the peer did).
        case draining(until: NIODeadline, answerWithClose: Bool)
        case closed
    }

    let localIndex: UInt32
    let remoteIndex: UInt32
    let role: Role
    var parameters: LinkParameters
    var remoteAddress: SocketAddress
    var state: State

    /// Data-packet protection, one per direction (PROTOCOL §2.2).
    let sealer: PacketCipher
    let opener: PacketCipher

    // MARK: Send side
    var nextPacketNumber: UInt64 = 0
    var sendStream = SendStream()
    var unreliableQueue = UnreliableSendQueue()
    var sentLog = SentPacketLog()
    var congestion: CubicCongestionController
    var pacer: Pacer
    var rtt: RTTEstimator
    var peerStreamLimit: UInt64
    var largestAcknowledged: UInt64?
    var pendingWindowUpdate = false
    var pendingPing = false
    var pendingClose: UInt16?
    /// How many more packets carry `pendingClose` (each with its own packet number).
    var closeCopiesLeft = 0
    /// The code this side closed with, repeated to late packets while draining.
    var closeCodeForAnswers: UInt16 = 0
    /// Set when `send` refused a message for lack of room; cleared when room is reported.
    var refusedForSpace = false
    /// Scratch buffers reused for every packet, so building one allocates nothing.
    var plaintext = ByteBuffer()
    var headerScratch = ByteBuffer()

    // MARK: Receive side
    var replayWindow = ReplayWindow()
    var ackTracker = AckTracker()
    var receiveStream: ReceiveStream
    var reassembler: FragmentReassembler

    // MARK: Timers
    var lastReceiveTime: NIODeadline
    var lastSendTime: NIODeadline
    var retransmissionDeadline: NIODeadline?
    var retransmissionBackoff = 0
    var lossDeadline: NIODeadline?
    /// Whether the peer's acknowledgements showed packets arriving out of order: from then on a
    /// packet is declared lost by time only (RACK, RFC 8985 §6.2), never by count.
    var reorderingSeen = false
    /// The reordering window in quarters of the minimum RTT (RFC 8985 §6.2.4): raised by one,
    /// at most once per round trip, whenever a packet declared lost arrives after all.
    var reorderWindowQuarters = 1
    var reorderWindowRaised: NIODeadline?
    /// Tells congestive losses from random ones.
    var lossEvidence = LossEvidence()
    var pacingDeadline: NIODeadline?
    /// When the first retransmission timeout of the current episode (timeouts with no new data
    /// acknowledged in between) expired: only packets sent before it are originals for the undo.
    var timeoutEpisodeStart: NIODeadline?
    /// A probe (after a tail-loss-probe or retransmission timeout) may go out regardless of the
    /// congestion window.
    var probePending = false
    /// Tail loss probe timer (RFC 8985 §7); nil when not armed.
    var probeDeadline: NIODeadline?
    /// A tail loss probe went out and no acknowledgement of new data followed yet.
    var tailProbeOutstanding = false

    /// When the responder sent its response, while an unambiguous RTT sample can still be taken
    /// from it (nil once the response had to be repeated).
    var responseSentAt: NIODeadline?

    // MARK: Paths
    /// The peer's other addresses, to move to when the current one stops working
    /// (``LinkMachine/failOver(now:isUsable:)``).
    var alternateAddresses: [SocketAddress] = []
    /// When the first ack-eliciting packet went out since the last authenticated packet came in;
    /// nil when everything sent since then has been answered (or nothing was sent).
    var unansweredSince: NIODeadline?

    var statistics = LinkStatistics()
    /// The code both ends of this link show for comparison (PROTOCOL §4.9).
    let verificationCode: [UInt8]
    /// Whole unreliable messages larger than this side accepts (a peer breaking the limit).
    var oversizedUnreliableDropped = 0
    var events: [LinkEvent] = []

    init(
        localIndex: UInt32,
        remoteIndex: UInt32,
        role: Role,
        remoteAddress: SocketAddress,
        keys: LinkKeys,
        cipher: DataCipher,
        parameters: LinkParameters,
        now: NIODeadline
    ) {
        self.localIndex = localIndex
        self.remoteIndex = remoteIndex
        self.role = role
        self.remoteAddress = remoteAddress
        self.parameters = parameters
        self.verificationCode = keys.verification
        switch role {
        case .initiator:
            self.sealer = PacketCipher(cipher, key: keys.initiatorToResponder)
            self.opener = PacketCipher(cipher, key: keys.responderToInitiator)
            self.state = .open
            // Confirms the handshake to the responder at once.
            self.pendingPing = true
        case .responder:
            self.sealer = PacketCipher(cipher, key: keys.responderToInitiator)
            self.opener = PacketCipher(cipher, key: keys.initiatorToResponder)
            self.state = .awaitingConfirmation(deadline: now + parameters.handshakeTimeout)
            self.responseSentAt = now
        }
        self.congestion = CubicCongestionController(maxDatagramSize: parameters.maxDatagramSize)
        self.pacer = Pacer(maxDatagramSize: parameters.maxDatagramSize)
        self.rtt = RTTEstimator(initialRTT: parameters.initialRTT)
        self.peerStreamLimit = parameters.peerReceiveWindow
        self.receiveStream = ReceiveStream(window: parameters.receiveWindow, maxMessageSize: parameters.maxReliableReceiveSize)
        self.reassembler = FragmentReassembler(
            maxMessageSize: parameters.maxUnreliableReceiveSize,
            timeout: parameters.reassemblyTimeout,
            maximumBufferedBytes: 2 * parameters.maxUnreliableReceiveSize
        )
        self.lastReceiveTime = now
        self.lastSendTime = now
        self.plaintext.reserveCapacity(parameters.packetCapacity)
    }

    // MARK: - Application operations

    /// Whether the application may still queue messages.
    var acceptsMessages: Bool {
        switch self.state {
        case .open, .awaitingConfirmation: true
        default: false
        }
    }

    var isClosed: Bool { self.state == .closed }

    /// Bytes counted against the send buffer capacity.
    var bytesQueued: Int { self.sendStream.unacknowledgedBytes + self.unreliableQueue.queuedBytes }

    /// Throws what `send` would throw for a message of `size` bytes queued after `planned` more
    /// bytes, queuing nothing. A refusal for space is remembered, so that the link reports when
    /// room comes back.
    mutating func checkSend(size: Int, mode: SendMode, planned: Int = 0) throws(TransportError) {
        guard self.acceptsMessages else { throw .linkNotOpen }
        let limit = mode == .reliable ? self.parameters.maxReliableSendSize : self.parameters.maxUnreliableSendSize
        guard size <= limit else { throw .dataTooBig(size: size, limit: limit) }
        let queued = self.bytesQueued + planned
        guard queued == 0 || queued + size <= self.parameters.sendBufferCapacity else {
            self.refusedForSpace = true
            throw .bufferFull
        }
    }

    /// Queues a message. Fails at once when the link is closing, the message is larger than the
    /// peer accepts, or the send buffer is full (memory stays within the capacity plus one
    /// message: a message is refused only when something is already queued).
    mutating func send(_ message: ByteBuffer, mode: SendMode) throws(TransportError) {
        try self.checkSend(size: message.readableBytes, mode: mode)
        let size = message.readableBytes
        switch mode {
        case .reliable:
            self.sendStream.append(message)
            self.statistics.reliableMessagesSent += 1
        case .unreliable:
            self.unreliableQueue.append(message)
            self.statistics.unreliableMessagesSent += 1
        }
        self.statistics.messageBytesSent += UInt64(size)
    }

    /// Closes the link: what is queued reliably is delivered first (for at most the disconnect
    /// timeout), then the peer is told with `code`.
    mutating func close(code: UInt16, now: NIODeadline) {
        switch self.state {
        case .open:
            self.state = .closing(code: code, deadline: now + self.parameters.disconnectTimeout)
        case .awaitingConfirmation:
            // The initiator is not known to be there yet: nothing to flush.
            self.finishClosing(code: code, reason: .closedLocally(code: code), now: now)
        case .closing, .draining, .closed:
            break
        }
    }

    /// Closes at once, dropping queued data, telling the peer with a CLOSE frame in `copies`
    /// packets (more than one when no late packet of the peer's could draw another: shutdown).
    mutating func abort(code: UInt16, reason: LinkCloseReason, copies: Int = 1, now: NIODeadline) {
        switch self.state {
        case .open, .awaitingConfirmation, .closing:
            self.finishClosing(code: code, reason: reason, copies: copies, now: now)
        case .draining, .closed:
            break
        }
    }

    /// Ends the link locally: queues a CLOSE frame for the peer, reports `reason`, drains.
    mutating func finishClosing(code: UInt16, reason: LinkCloseReason, copies: Int = 1, now: NIODeadline) {
        self.pendingClose = code
        self.closeCopiesLeft = max(copies, 1)
        self.closeCodeForAnswers = code
        self.state = .draining(until: now + self.drainPeriod, answerWithClose: true)
        self.events.append(.closed(reason))
    }

    /// The peer is gone or the link broke: report `reason` and drain silently.
    mutating func terminate(reason: LinkCloseReason, now: NIODeadline) {
        switch self.state {
        case .draining, .closed:
            return
        default:
            self.pendingClose = nil
            self.state = .draining(until: now + self.drainPeriod, answerWithClose: false)
            self.events.append(.closed(reason))
        }
    }

    /// How long a closed link lingers to absorb late packets: three retransmission timeouts.
    var drainPeriod: TimeAmount { self.currentRetransmissionTimeout * 3 }

    var currentRetransmissionTimeout: TimeAmount {
        let base = self.rtt.retransmissionTimeout(
            peerMaxAckDelay: self.parameters.peerMaxAckDelay,
            bounds: self.parameters.retransmissionTimeoutBounds
        )
        let backedOff = base * Int64(1 << min(self.retransmissionBackoff, 8))
        return min(backedOff, self.parameters.retransmissionTimeoutBounds.upperBound)
    }

    /// A snapshot of the link's counters and estimates.
    var statisticsSnapshot: LinkStatistics {
        var snapshot = self.statistics
        snapshot.smoothedRTT = self.rtt.smoothed
        snapshot.rttVariation = self.rtt.variation
        snapshot.minimumRTT = self.rtt.minimum
        snapshot.retransmissionTimeout = self.currentRetransmissionTimeout
        snapshot.congestionWindow = self.congestion.congestionWindow
        snapshot.dataCipher = self.sealer.cipher
        snapshot.bytesInFlight = self.congestion.bytesInFlight
        snapshot.bytesQueued = self.bytesQueued
        snapshot.congestiveLosses = UInt64(self.congestion.congestiveLosses)
        snapshot.randomLosses = UInt64(self.congestion.randomLosses)
        snapshot.reductionsUndone = UInt64(self.congestion.reductionsUndone)
        snapshot.lossReductions = UInt64(self.congestion.lossReductions)
        snapshot.reorderingSeen = self.reorderingSeen
        snapshot.slowStartEndedByDelay = self.congestion.hyStart.exitedOnRTT
        snapshot.unreliableMessagesDropped = UInt64(self.reassembler.droppedMessages + self.oversizedUnreliableDropped)
        return snapshot
    }

    /// Reports freed send-buffer space to the endpoint.
    mutating func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        self.events.append(.released(bytes))
    }
}
