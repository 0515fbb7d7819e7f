import NIOCore

extension TransportEndpoint {
    /// A valid initiation datagram (a CPace share), as an endpoint with `configuration` would send
    /// it, without an endpoint: for tools that test a responder's defences (e.g. a flood from
    /// many sources). The payload is checked against the request's limit, not sent.
    @_spi(Testing)
    public static func makeInitiation(configuration: TransportConfiguration = TransportConfiguration(), payload: ByteBuffer = ByteBuffer()) throws -> ByteBuffer {
        let handshake = try InitiatorHandshake(
            localIndex: UInt32.random(in: 1...UInt32.max),
            remoteAddress: try SocketAddress(ipAddress: "127.0.0.1", port: 9),
            secret: HandshakeSecret(password: configuration.preSharedKey),
            parameters: configuration.localParameters,
            payload: payload,
            maxDatagramSize: configuration.maxDatagramSize,
            now: .now(),
            timeout: .seconds(1)
        )
        return handshake.datagram()
    }
}
