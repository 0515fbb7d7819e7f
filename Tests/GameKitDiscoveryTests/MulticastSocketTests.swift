import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NetworkImpairment
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import GameKitDiscovery

/// The mDNS sockets keep what arrives while their event loop is busy: one socket takes the mDNS
/// traffic of every session of a process (hundreds in the in-process test pass, which lost
/// announcements and goodbyes to full kernel buffers on a busy machine).
@Suite("mDNS sockets")
struct MulticastSocketTests {
    /// Counts the datagrams that reach the pipeline.
    final class Counter: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let count = NIOLockedValueBox(0)
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { self.count.withLockedValue { $0 += 1 } }
    }

    @Test(arguments: [MulticastSocket.Family.ipv4, .ipv6])
    func aBurstThatArrivesWhileTheLoopIsBusyIsKept(family: MulticastSocket.Family) async throws {
        try NetworkSandbox.requireIsolation()
        let loopback = try #require(InterfaceEnumerator.all().map(\.interface).first { $0.name == "lo" })
        // A loop of its own: holding it stalls nothing of the other tests of this process.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let counter = Counter()
        // An ephemeral port: the other tests' sockets on 5353 keep their unicast.
        let channel = try await MulticastSocket.open(family: family, interface: loopback, port: 0, eventLoop: loop) { counter }
        let provider = try #require(channel as? SocketOptionProvider)
        let receive: CInt = try await provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SO_RCVBUF).get()
        #expect(receive >= CInt(MulticastSocket.bufferSize), "SO_RCVBUF \(receive)")
        let port = try #require(channel.localAddress?.port)
        let target = try SocketAddress(ipAddress: family == .ipv4 ? "127.0.0.1" : "::1", port: port)
        // The socket's loop is held for half a second while 600 datagrams of 300 bytes arrive,
        // sent from a plain blocking socket (the kernel's default buffer holds 100 to 160 of them).
        let count = 600
        let held = loop.submit { usleep(500_000) }
        let sender = socket(family == .ipv4 ? AF_INET : AF_INET6, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(sender) }
        var payload = [UInt8](repeating: 0x55, count: 300)
        var sent = 0
        for index in 0..<count {
            payload[0] = UInt8(index >> 8)
            payload[1] = UInt8(index & 0xFF)
            let result = target.withSockAddr { address, length in
                payload.withUnsafeBytes { sendto(sender, $0.baseAddress, $0.count, 0, address, socklen_t(length)) }
            }
            if result == payload.count { sent += 1 }
        }
        #expect(sent == count)
        _ = try await held.get()
        #expect(
            await waitUntil(seconds: 10, every: .milliseconds(10)) { counter.count.withLockedValue { $0 } == count },
            "\(counter.count.withLockedValue { $0 }) of \(count) datagrams arrived")
        try await channel.close()
        try await group.shutdownGracefully()
    }
}
