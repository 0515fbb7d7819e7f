import NIOCore

/// A snapshot of one link's counters and estimates.
public struct LinkStatistics: Sendable, Equatable {
    /// Where the link sends now (the peer's address it last heard from, or moved to).
    public var remoteAddress: SocketAddress?
    /// Smoothed round-trip time (RFC 6298 SRTT); nil before the first sample.
    public var smoothedRTT: TimeAmount?
    /// Round-trip time variation (RFC 6298 RTTVAR).
    public var rttVariation: TimeAmount
    /// Smallest round-trip time seen.
    public var minimumRTT: TimeAmount?
    /// The current retransmission timeout, back-off included.
    public var retransmissionTimeout: TimeAmount
    /// The cipher protecting the link's data packets, chosen in the handshake.
    public var dataCipher: DataCipher = .chaCha20Poly1305
    /// Congestion window in bytes.
    public var congestionWindow: Int
    /// Bytes sent and neither acknowledged nor declared lost.
    public var bytesInFlight: Int
    /// Bytes accepted by `send` and not yet acknowledged (reliable) or sent (unreliable).
    public var bytesQueued: Int

    /// Datagrams sent on this link.
    public var packetsSent: UInt64 = 0
    /// Authenticated datagrams received on this link.
    public var packetsReceived: UInt64 = 0
    /// Packets declared lost (by acknowledgements or by the retransmission timer).
    public var packetsLost: UInt64 = 0
    /// Bytes of reliable data sent again.
    public var retransmittedBytes: UInt64 = 0
    /// Times the retransmission timer expired.
    public var retransmissionTimeouts: UInt64 = 0
    /// Times this side moved the link to another of the peer's addresses (PROTOCOL §6.7).
    public var pathMoves: UInt64 = 0
    /// Tail loss probes sent (RFC 8985): a packet sent two round trips after the last one when no
    /// acknowledgement came, so that a lost tail is found without waiting for the timeout.
    public var tailLossProbes: UInt64 = 0
    /// Packets declared lost that were acknowledged after all (reordering, not loss).
    public var spuriousLosses: UInt64 = 0
    /// Losses taken as congestion (the window shrank) and as random (it did not; PROTOCOL §8.6).
    public var congestiveLosses: UInt64 = 0
    public var randomLosses: UInt64 = 0
    /// Window reductions for congestive losses: one per recovery period (PROTOCOL §8.2).
    public var lossReductions: UInt64 = 0
    /// Window reductions undone because every loss behind them proved spurious.
    public var reductionsUndone: UInt64 = 0
    /// Whether the first slow start ended because the round-trip time rose (PROTOCOL §8.3) rather
    /// than on a loss.
    public var slowStartEndedByDelay = false
    /// Whether packets were seen arriving out of order (loss is then decided by time only).
    public var reorderingSeen = false
    /// Duplicated or replayed packets dropped by the replay window.
    public var duplicatePacketsDropped: UInt64 = 0

    /// Reliable messages accepted by `send`.
    public var reliableMessagesSent: UInt64 = 0
    /// Reliable messages delivered to the application.
    public var reliableMessagesReceived: UInt64 = 0
    /// Unreliable messages accepted by `send`.
    public var unreliableMessagesSent: UInt64 = 0
    /// Unreliable messages delivered to the application.
    public var unreliableMessagesReceived: UInt64 = 0
    /// Unreliable messages received in part and dropped whole.
    public var unreliableMessagesDropped: UInt64 = 0
    /// Application bytes (message payloads) accepted by `send`.
    public var messageBytesSent: UInt64 = 0
    /// Application bytes delivered.
    public var messageBytesReceived: UInt64 = 0
    /// Datagram bytes sent, headers included.
    public var datagramBytesSent: UInt64 = 0
    /// Datagram bytes received, headers included.
    public var datagramBytesReceived: UInt64 = 0

    /// Packets declared lost over packets sent that asked for an acknowledgement.
    public var lossRate: Double {
        self.ackElicitingPacketsSent == 0 ? 0 : Double(self.packetsLost) / Double(self.ackElicitingPacketsSent)
    }

    var ackElicitingPacketsSent: UInt64 = 0

    init() {
        self.rttVariation = .zero
        self.retransmissionTimeout = .zero
        self.congestionWindow = 0
        self.bytesInFlight = 0
        self.bytesQueued = 0
    }
}
