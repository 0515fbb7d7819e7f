import GameKitMachine
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One mDNS socket: UDP port 5353 of one address family, joined to the mDNS group on one
/// interface and sending through it.
///
/// Every mDNS stack on the host binds the same port, so the socket sets SO_REUSEADDR and
/// SO_REUSEPORT (the kernel gives each of them a copy of every multicast datagram). With one
/// socket per interface, IP_MULTICAST_ALL off makes the kernel deliver to it only what arrives
/// for the group it joined on its own interface, and IP_MULTICAST_IF sends through that
/// interface; so the interface of every message is known without guessing. Outgoing multicast
/// has TTL / hop limit 255 (RFC 6762 §11) and loops back, so that other processes on the host
/// hear it. Packet info is on as well, for unicast replies that land on any of the sockets.
///
/// Its kernel buffers are ``bufferSize``: one socket per family and interface takes the mDNS
/// traffic of every session of the process, and what arrives while its event loop is busy waits
/// there. With the kernel's default (208 KB, 100–160 datagrams as the kernel counts them) the
/// in-process test pass, hundreds of sessions in one process, lost 190 IPv4 and 178 IPv6
/// datagrams to full buffers (`RcvbufErrors`) on a busy machine, and with them announcements,
/// answers and goodbyes: peers were never seen.
enum MulticastSocket {
    enum Family: Hashable, Sendable { case ipv4, ipv6 }

    /// The receive and send buffers asked for (``SocketBuffers/enlarge(_:to:)``: forced where
    /// the process may, else as large as the system allows).
    static let bufferSize = 2 << 20

    /// Linux option numbers glibc may not export.
    private static let ipMulticastAll: CInt = 49
    private static let ipv6MulticastAll: CInt = 29

    static func group(_ family: Family) -> SocketAddress {
        switch family {
        case .ipv4: try! SocketAddress(ipAddress: MulticastDNSAddress.ipv4Group, port: MulticastDNSAddress.port)
        case .ipv6: try! SocketAddress(ipAddress: MulticastDNSAddress.ipv6Group, port: MulticastDNSAddress.port)
        }
    }

    /// Opens, configures and joins; the handler receives the datagrams.
    static func open(
        family: Family,
        interface: NetworkInterface,
        port: Int = MulticastDNSAddress.port,
        eventLoop: EventLoop,
        handler: @escaping @Sendable () -> ChannelHandler
    ) async throws -> Channel {
        var bootstrap = DatagramBootstrap(group: eventLoop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(.init(rawValue: SO_REUSEPORT)), value: 1)
            .channelOption(.receivePacketInfo, value: true)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: DNSMessage.maximumSize))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler()) }
            }
        if family == .ipv6 {
            bootstrap = bootstrap.channelOption(ChannelOptions.Types.SocketOption(level: SocketOptionLevel(IPPROTO_IPV6), name: IPV6_V6ONLY), value: 1)
        }
        let bindAddress = family == .ipv4 ? "0.0.0.0" : "::"
        let channel = try await bootstrap.bind(host: bindAddress, port: port).get()
        await SocketBuffers.enlarge(channel, to: Self.bufferSize)
        do {
            let provider = channel as! SocketOptionProvider
            switch family {
            case .ipv4:
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IP), name: Self.ipMulticastAll, value: CInt(0)).get()
                var request = ip_mreqn()
                request.imr_multiaddr.s_addr = inet_addr(MulticastDNSAddress.ipv4Group)
                request.imr_ifindex = CInt(interface.index)
                // The interface's own address as well as its index: without it the kernel picks
                // no source for link-scope multicast on an interface whose only address is
                // host-scoped (127.0.0.1 on lo), and sends from 0.0.0.0.
                if let address = interface.ipv4.first {
                    withUnsafeMutableBytes(of: &request.imr_address.s_addr) { $0.copyBytes(from: address.array) }
                }
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IP), name: IP_ADD_MEMBERSHIP, value: request).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IP), name: IP_MULTICAST_IF, value: request).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IP), name: IP_MULTICAST_TTL, value: CInt(255)).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IP), name: IP_MULTICAST_LOOP, value: CInt(1)).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IP), name: IP_TTL, value: CInt(255)).get()
            case .ipv6:
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IPV6), name: Self.ipv6MulticastAll, value: CInt(0)).get()
                var request = ipv6_mreq()
                _ = inet_pton(AF_INET6, MulticastDNSAddress.ipv6Group, &request.ipv6mr_multiaddr)
                request.ipv6mr_interface = CUnsignedInt(interface.index)
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IPV6), name: IPV6_ADD_MEMBERSHIP, value: request).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IPV6), name: IPV6_MULTICAST_IF, value: CUnsignedInt(interface.index)).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IPV6), name: IPV6_MULTICAST_HOPS, value: CInt(255)).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IPV6), name: IPV6_MULTICAST_LOOP, value: CUnsignedInt(1)).get()
                try await provider.unsafeSetSocketOption(level: SocketOptionLevel(IPPROTO_IPV6), name: IPV6_UNICAST_HOPS, value: CInt(255)).get()
            }
        } catch {
            try? await channel.close()
            throw error
        }
        PortSharing.opened()
        channel.closeFuture.whenComplete { _ in PortSharing.closed() }
        return channel
    }
}
