import NIOCore

/// Everything one link needs to know about limits and timers: this endpoint's configuration
/// combined with what the peer announced in its handshake message.
struct LinkParameters: Sendable {
    /// Largest datagram either side may send (the smaller of the two sides' limits).
    var maxDatagramSize: Int
    /// Largest messages this side may send (the peer's receive limits).
    var maxReliableSendSize: Int
    var maxUnreliableSendSize: Int
    /// Largest messages this side accepts.
    var maxReliableReceiveSize: Int
    var maxUnreliableReceiveSize: Int
    var sendBufferCapacity: Int
    var receiveWindow: Int
    /// The peer's initial receive window.
    var peerReceiveWindow: UInt64
    var maxAckDelay: TimeAmount
    var peerMaxAckDelay: TimeAmount
    var disconnectTimeout: TimeAmount
    var handshakeTimeout: TimeAmount
    var keepaliveInterval: TimeAmount
    var initialRTT: TimeAmount
    var retransmissionTimeoutBounds: ClosedRange<TimeAmount>
    var reassemblyTimeout: TimeAmount
    /// Losses without a standing queue leave the window (``TransportConfiguration/toleratesRandomLoss``).
    var toleratesRandomLoss: Bool

    /// Bytes of frames an empty packet can hold.
    var packetCapacity: Int { self.maxDatagramSize - DataPacketHeader.size - WireSize.tag }

    init(configuration: TransportConfiguration, local: TransportParameters, peer: TransportParameters) {
        self.maxDatagramSize = Int(min(local.maxDatagramSize, peer.maxDatagramSize))
        self.maxReliableSendSize = Int(min(local.maxReliableMessageSize, peer.maxReliableMessageSize))
        self.maxUnreliableSendSize = Int(min(local.maxUnreliableMessageSize, peer.maxUnreliableMessageSize))
        self.maxReliableReceiveSize = Int(local.maxReliableMessageSize)
        self.maxUnreliableReceiveSize = Int(local.maxUnreliableMessageSize)
        self.sendBufferCapacity = configuration.sendBufferCapacity
        self.receiveWindow = Int(local.receiveWindow)
        self.peerReceiveWindow = UInt64(peer.receiveWindow)
        self.maxAckDelay = .microseconds(Int64(local.maxAckDelayMicroseconds))
        self.peerMaxAckDelay = .microseconds(Int64(peer.maxAckDelayMicroseconds))
        self.disconnectTimeout = configuration.disconnectTimeout
        self.handshakeTimeout = configuration.handshakeTimeout
        self.keepaliveInterval = configuration.effectiveKeepaliveInterval
        self.initialRTT = configuration.initialRTT
        self.retransmissionTimeoutBounds = configuration.minimumRetransmissionTimeout...max(configuration.minimumRetransmissionTimeout, .seconds(10))
        self.reassemblyTimeout = configuration.unreliableReassemblyTimeout
        self.toleratesRandomLoss = configuration.toleratesRandomLoss
    }
}
