import CoreMetrics
import Logging
import NIOCore

/// How an endpoint and its links behave. The defaults suit a LAN or the Internet; most
/// applications change at most the password and the disconnect timeout.
public struct TransportConfiguration: Sendable {
    /// The session password. Both sides must hold the same one (or none); otherwise the handshake
    /// fails on both sides with ``TransportError/authenticationFailed``.
    public var preSharedKey: [UInt8]?
    /// Where the endpoint logs (swift-log): links opening, failing, closing and moving,
    /// refused handshakes and liveness verdicts at debug, data at trace. Its handler's level
    /// decides what is kept (swift-log's default handler keeps info and above).
    public var logger = Logger(label: "opengamekit.transport")
    /// Where the endpoint's metrics go (swift-metrics: datagrams, links, handshake failures,
    /// losses, retransmitted, queued and in-flight bytes, round-trip times, all named
    /// `ogk_transport_…`; the README's Metrics section lists them): nil for
    /// the process's bootstrapped backend (`MetricsSystem.factory`, which does nothing until the
    /// application bootstraps one).
    public var metricsFactory: (any MetricsFactory)?
    /// How often the metrics are sampled from the endpoint's counters; nil for never.
    public var metricsInterval: TimeAmount? = .seconds(1)
    /// Dimensions (labels) every metric of the endpoint carries, e.g. `[("role", "server")]`.
    public var metricsDimensions: [(String, String)] = []

    /// The largest UDP payload this endpoint sends or accepts. 1200 bytes fits every IPv6 path
    /// (minimum MTU 1280) and nearly every IPv4 one; raise it only on networks you know.
    public var maxDatagramSize: Int = 1200

    /// The largest reliable message, in bytes. At least 1 MiB by default.
    public var maxReliableMessageSize: Int = 1 << 20

    /// The largest unreliable message, in bytes (fragmented across datagrams, delivered whole or
    /// not at all). 96 KiB by default.
    public var maxUnreliableMessageSize: Int = 96 << 10

    /// Bytes a link may hold for sending (reliable bytes until acknowledged, unreliable ones until
    /// sent). A send beyond it fails with ``TransportError/bufferFull``; a message is refused only
    /// when something is already queued. Reliable bytes the peer acknowledged beyond a lost
    /// packet do not count (they wait only for its repair), so memory stays within this plus the
    /// peer's receive window plus one message.
    public var sendBufferCapacity: Int = 1 << 20

    /// Whether a loss on a path without a standing queue leaves the congestion window as it is
    /// (PROTOCOL §8.6): random loss (Wi-Fi, a noisy link) then costs retransmissions, not speed.
    /// A queue that builds, or more than 15 % loss, still shrinks the window as CUBIC does.
    /// False: every loss shrinks it, as classic CUBIC. Default true.
    public var toleratesRandomLoss = true

    /// Which cipher protects data packets (PROTOCOL §3.7). By default AES-256-GCM when both
    /// sides have hardware AES, else ChaCha20-Poly1305; both sides must allow AES-256-GCM for a
    /// link to use it. Handshake messages always use ChaCha20-Poly1305.
    public var dataCipher: DataCipherPreference = .automatic

    /// Reliable bytes the peer may send beyond what this side has delivered. Raised to at least
    /// the largest reliable message plus its length prefix.
    public var receiveWindow: Int = 4 << 20

    /// A peer silent for this long is declared gone. Game Kit's default: 20 seconds.
    public var disconnectTimeout: TimeAmount = .seconds(20)

    /// How long a link may stay idle before it sends a keepalive. Nil: a quarter of the disconnect
    /// timeout, at most 5 seconds.
    public var keepaliveInterval: TimeAmount?

    /// How long `connect` keeps trying when the caller gives no timeout, and how long an accepted
    /// link waits for its initiator's confirmation.
    public var handshakeTimeout: TimeAmount = .seconds(10)

    /// Longest delay before acknowledging a lone packet.
    public var maxAckDelay: TimeAmount = .milliseconds(5)

    /// Floor of the retransmission timeout. RFC 6298 recommends one second for TCP over the
    /// Internet; interactive applications on LANs want far less. The timeout already includes
    /// the peer's `maxAckDelay` and a 1 ms granularity, and a spurious timeout is undone when a
    /// late acknowledgement shows it (Eifel), so a low floor costs little. At 5 % loss on
    /// loopback, 5 ms delivered about 12 % more than 25 ms (`gk-bench transport --only
    /// reliable-1000-loss5`, three runs each).
    public var minimumRetransmissionTimeout: TimeAmount = .milliseconds(5)

    /// The RTT assumed before the first measurement.
    public var initialRTT: TimeAmount = .milliseconds(100)

    /// How long a partly received unreliable message waits for its other fragments.
    public var unreliableReassemblyTimeout: TimeAmount = .seconds(2)

    /// From this many handshakes holding state (requests awaiting an answer, accepted links
    /// awaiting confirmation) on, or while failed authentications use up the reply budget, new
    /// initiations must first prove their source address with a cookie (no state is kept and no
    /// key derived for unproven sources). 0 requires cookies always.
    public var cookieThreshold: Int = 16

    /// Handshakes holding state are never more than this; further initiations are dropped until
    /// some complete.
    public var maximumPendingRequests: Int = 1024

    /// Send UDP segmentation offload batches (Linux GSO) when the kernel supports it, and ask for
    /// receive offload (GRO). Batches cut system calls many times over on fast paths.
    public var segmentationOffload: Bool = true

    /// Kernel socket buffer sizes requested for the endpoint's socket.
    public var socketBufferSize: Int = 4 << 20
    /// The endpoint's static liveness key (32 raw X25519 private-key bytes): others probe it to
    /// learn that this endpoint is alive (PROTOCOL §3.9). Nil: a new key for each endpoint.
    public var livenessPrivateKey: [UInt8]?

    /// The defaults, with an optional pre-shared key (raw bytes).
    public init(preSharedKey: [UInt8]? = nil) {
        self.preSharedKey = preSharedKey
    }

    /// A configuration whose pre-shared key is the UTF-8 bytes of `password`.
    public init(password: String?) {
        self.preSharedKey = password.map { Array($0.utf8) }
    }

    /// One pre-shared key made of several secrets (an online room's secret and a session
    /// password, say), each with its length in front (CPace's `lv_cat`), so that no other list
    /// of parts gives the same key.
    public static func combinedKey(_ parts: [[UInt8]]) -> [UInt8] {
        CPace.lengthValueConcatenation(parts)
    }

    var effectiveKeepaliveInterval: TimeAmount {
        if let keepaliveInterval { return keepaliveInterval }
        return min(self.disconnectTimeout / 4, .seconds(5))
    }

    /// The parameters this endpoint announces in its handshake messages.
    var localParameters: TransportParameters {
        TransportParameters(
            receiveWindow: UInt32(clamping: max(self.receiveWindow, self.maxReliableMessageSize + 16)),
            maxReliableMessageSize: UInt32(clamping: self.maxReliableMessageSize),
            maxUnreliableMessageSize: UInt32(clamping: self.maxUnreliableMessageSize),
            maxAckDelayMicroseconds: UInt32(clamping: self.maxAckDelay.nanoseconds / 1000),
            maxDatagramSize: UInt16(clamping: self.maxDatagramSize),
            dataCiphers: DataCipher.offer(preference: self.dataCipher)
        )
    }

    /// Checks the values; every endpoint does this before binding.
    func validate() throws(TransportError) {
        func check(_ condition: Bool, _ message: String) throws(TransportError) {
            if !condition { throw .invalidConfiguration(message) }
        }
        try check((WireSize.minimumDatagram...65_507).contains(self.maxDatagramSize), "maxDatagramSize must be 1200...65507")
        try check(self.maxReliableMessageSize >= 1 && self.maxReliableMessageSize <= Int(UInt32.max) - 64, "maxReliableMessageSize must be positive and below 4 GiB")
        try check(self.maxUnreliableMessageSize >= 1 && self.maxUnreliableMessageSize <= 16 << 20, "maxUnreliableMessageSize must be 1...16 MiB")
        try check(self.sendBufferCapacity >= 1, "sendBufferCapacity must be positive")
        try check(self.receiveWindow >= 1 && self.receiveWindow <= Int(UInt32.max), "receiveWindow must be positive and below 4 GiB")
        try check(self.disconnectTimeout > .zero, "disconnectTimeout must be positive")
        try check(self.handshakeTimeout > .zero, "handshakeTimeout must be positive")
        try check(self.effectiveKeepaliveInterval > .zero, "keepaliveInterval must be positive")
        try check(self.maxAckDelay >= .zero && self.maxAckDelay <= .seconds(1), "maxAckDelay must be 0...1 s")
        try check(self.minimumRetransmissionTimeout > .zero, "minimumRetransmissionTimeout must be positive")
        try check(self.initialRTT > .zero, "initialRTT must be positive")
        try check(self.unreliableReassemblyTimeout > .zero, "unreliableReassemblyTimeout must be positive")
        try check(self.cookieThreshold >= 0, "cookieThreshold must not be negative")
        try check(self.maximumPendingRequests >= 1, "maximumPendingRequests must be positive")
    }
}
