import ArgumentParser
import GameKitTransport
import NIOCore

/// `gk-link`: the transport on the command line. An example of the API beside the library, and
/// the peer the multi-process tests and the benchmark drive.
@main
struct GKLink: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-link",
        abstract: "Open encrypted links with the OpenGameKit transport.",
        discussion: """
            listen   accept links and count (or echo) what arrives
            connect  open a link, send numbered messages, close it
            flood    send handshake initiations from many source addresses (defence testing)
            """,
        subcommands: [Listen.self, Connect.self, Flood.self]
    )
}

/// Options every subcommand shares: the transport's configuration.
struct TransportOptions: ParsableArguments {
    @Option(help: "Session password (both sides must use the same one).")
    var password: String?

    @Option(help: "Seconds of silence after which a peer is declared gone.")
    var disconnectTimeout: Double = 20

    @Option(help: "Bytes a link may queue for sending before sends fail with 'buffer full'.")
    var sendBuffer: Int?

    @Option(help: "Pending handshakes above which initiations must carry a cookie (0: always).")
    var cookieThreshold: Int?

    @Flag(help: "Do not use UDP segmentation/receive offload.")
    var noOffload = false

    @Option(help: "Data-packet cipher: automatic (AES-256-GCM when both sides have hardware AES), chacha20-poly1305 or aes-256-gcm.")
    var cipher: DataCipherPreference = .automatic

    var configuration: TransportConfiguration {
        var configuration = TransportConfiguration(password: self.password)
        configuration.disconnectTimeout = .nanoseconds(Int64(self.disconnectTimeout * 1e9))
        if let sendBuffer { configuration.sendBufferCapacity = sendBuffer }
        if let cookieThreshold { configuration.cookieThreshold = cookieThreshold }
        configuration.segmentationOffload = !self.noOffload
        configuration.dataCipher = self.cipher
        return configuration
    }
}

extension DataCipherPreference: ExpressibleByArgument {
    /// "automatic", "chacha20-poly1305" or "aes-256-gcm".
    public init?(argument: String) {
        switch argument {
        case "automatic": self = .automatic
        case "chacha20-poly1305": self = .chaCha20Poly1305
        case "aes-256-gcm": self = .aes256GCM
        default: return nil
        }
    }
}

extension SendMode: ExpressibleByArgument {
    /// "reliable" or "unreliable".
    public init?(argument: String) {
        switch argument {
        case "reliable": self = .reliable
        case "unreliable": self = .unreliable
        default: return nil
        }
    }
}

/// Parses "host:port", "[v6]:port".
func parseAddress(_ text: String) throws -> SocketAddress {
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
        throw ValidationError("expected HOST:PORT, got '\(text)'")
    }
    var host = String(text[..<colon])
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    do {
        return try SocketAddress(ipAddress: host, port: port)
    } catch {
        throw ValidationError("'\(host)' is not an IP address")
    }
}

extension ByteBuffer {
    /// A message whose first 8 bytes are `sequence` (big-endian), padded to `size` bytes.
    static func numbered(_ sequence: Int, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(max(size, 8))
        buffer.writeInteger(UInt64(sequence))
        if size > 8 { buffer.writeRepeatingByte(0x5A, count: size - 8) }
        return buffer
    }
}
