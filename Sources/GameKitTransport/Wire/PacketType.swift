/// The first byte of every datagram of the protocol.
///
/// The values sit in 4…12, inside the range RFC 7983 leaves unassigned (4…15), so a socket can
/// carry the transport beside STUN (0…3), TURN channel data (64…79) and the online layer's own
/// messages (13…15) and tell them apart by this byte alone (PROTOCOL §1.2).
///
/// The type alone tells the endpoint how to route a datagram before anything is decrypted:
/// handshake messages go to the handshake code, data packets to the link named by their
/// receiver index.
enum PacketType: UInt8 {
    case initiation = 4
    case response = 5
    case reject = 6
    case cookie = 7
    case cancel = 8
    case data = 9
    /// Liveness: "are you there?", to an endpoint's static liveness key (§3.9).
    case probe = 10
    /// Liveness: "yes", authenticated with the pair's liveness key.
    case probeReply = 11
    /// Liveness: "repeat that with this cookie", under load.
    case probeCookie = 12

    /// Every first byte of the transport's datagrams.
    static let firstByteRange: ClosedRange<UInt8> = 4...12
}

/// Protocol versions. An initiation names the version it speaks; a responder that does not speak
/// it answers with a reject carrying the version it does speak. Version 2 (OpenGameKit 0.2)
/// replaced version 1's password-sealed initiation with CPace; the two refuse each other.
enum ProtocolVersion {
    static let current: UInt8 = 2
}

/// Field sizes shared by the packet formats (see docs/PROTOCOL.md).
enum WireSize {
    static let publicKey = 32
    static let tag = 16
    static let mac = 16
    static let echo = 16
    static let cookie = 16
    static let dataHeader = 16
    /// Smallest datagram size any endpoint must accept: the IPv6 minimum MTU minus headers.
    static let minimumDatagram = 1200
}
