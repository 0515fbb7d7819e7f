import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Large kernel buffers for a datagram socket, so that a burst waits in the kernel rather than
/// being dropped there while its event loop is busy (the transport's sockets, the rendezvous's).
package enum SocketBuffers {
    /// Asks for `size` bytes of receive and send buffer: forced beyond the system maximum where
    /// permitted (CAP_NET_ADMIN), else as large as the system allows.
    package static func enlarge(_ channel: Channel, to size: Int) async {
        let value = SocketOptionValue(clamping: size)
        for (forced, plain) in [(SO_RCVBUFFORCE, SO_RCVBUF), (SO_SNDBUFFORCE, SO_SNDBUF)] {
            do {
                try await channel.setOption(Self.option(forced), value: value).get()
            } catch {
                try? await channel.setOption(Self.option(plain), value: value).get()
            }
        }
    }

    private static func option(_ name: CInt) -> ChannelOptions.Types.SocketOption {
        ChannelOptions.Types.SocketOption(level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET), name: NIOBSDSocket.Option(rawValue: name))
    }
}
