import ArgumentParser
@_spi(Testing) import GameKitTransport
import NIOCore
import NIOPosix

/// Sends valid handshake initiations from many source addresses, each from a socket closed right
/// after sending, so that no reply is ever read: what a spoofing attacker does. The responder must
/// keep no state for them once it is under load.
struct Flood: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send initiations from many (loopback) source addresses.")

    @Argument(help: "The responder, HOST:PORT (IPv4 loopback).")
    var address: String

    @Option(help: "Initiations to send, each from its own 127.1.x.y source address.")
    var count = 1000

    @Option(help: "Password the initiations are made with.")
    var password: String?

    func validate() throws {
        guard (1...60_000).contains(self.count) else { throw ValidationError("--count must be 1...60000") }
    }

    func run() async throws {
        let target = try parseAddress(self.address)
        let configuration = TransportConfiguration(password: self.password)
        let group = MultiThreadedEventLoopGroup.singleton
        for index in 0..<self.count {
            let source = "127.1.\(index / 250).\(index % 250 + 1)"
            let channel = try await DatagramBootstrap(group: group).bind(host: source, port: 0).get()
            let datagram = try TransportEndpoint.makeInitiation(configuration: configuration)
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: datagram))
            try await channel.close()
        }
        Output.line(["event": "summary", "sent": self.count])
    }
}
