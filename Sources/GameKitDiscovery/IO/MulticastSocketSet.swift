@_spi(Machine) import GameKitMachine
import Logging
import NIOCore

/// Discovery's sockets as one ``DatagramSocket``: an IPv4 and an IPv6 socket per interface,
/// each joined to its family's mDNS group on that interface. A message for the group goes out on
/// every socket of its interface; a unicast reply on the socket of its family and interface (or
/// any of its family). Event loop only.
final class MulticastSocketSet: DatagramSocket {
    typealias Destination = MulticastDNSDestination

    struct Key: Hashable { var interfaceIndex: Int; var family: MulticastSocket.Family }

    let eventLoop: EventLoop
    private let port: Int
    private let logger: Logger
    private(set) var sockets: [Key: Channel] = [:]
    /// The IPv4 address each IPv4 socket was opened with (it sends from it).
    private(set) var sources: [Key: IPv4Bytes] = [:]

    init(eventLoop: EventLoop, port: Int, logger: Logger) {
        self.eventLoop = eventLoop
        self.port = port
        self.logger = logger
    }

    func add(_ channel: Channel, for key: Key, source: IPv4Bytes?) {
        self.sockets[key] = channel
        self.sources[key] = source
    }

    func remove(_ key: Key) -> Channel? {
        self.sources[key] = nil
        return self.sockets.removeValue(forKey: key)
    }

    func removeAll() -> [Channel] {
        defer {
            self.sockets.removeAll()
            self.sources.removeAll()
        }
        return Array(self.sockets.values)
    }

    // MARK: - DatagramSocket

    /// mDNS sends a handful of small messages at a time: the kernel's buffer is not a limit.
    var isWritable: Bool { true }

    var allocator: ByteBufferAllocator { ByteBufferAllocator() }

    func isRoutable(_ destination: MulticastDNSDestination) -> Bool { true }

    func write(_ batch: TransmitBatch<MulticastDNSDestination>, written: EventLoopPromise<Void>?) -> [MulticastDNSDestination] {
        var futures: [EventLoopFuture<Void>] = []
        for index in batch.datagrams.indices {
            let item = batch.datagrams[index]
            let bytes = batch.bytes(of: index)
            if self.logger.logLevel <= .trace, let message = try? DNSMessage(decoding: bytes) {
                self.logger.trace("sending", metadata: ["to": "\(item.destination.destination)", "interface": "\(item.destination.interfaceIndex)", "message": "\(message.logSummary)"])
            }
            switch item.destination.destination {
            case .multicast:
                for family in [MulticastSocket.Family.ipv4, .ipv6] {
                    guard let channel = self.sockets[Key(interfaceIndex: item.destination.interfaceIndex, family: family)] else { continue }
                    futures.append(channel.writeAndFlush(AddressedEnvelope(remoteAddress: self.group(family), data: bytes)))
                }
            case .unicast(let address):
                let family: MulticastSocket.Family = address.protocol == .inet6 ? .ipv6 : .ipv4
                let channel = self.sockets[Key(interfaceIndex: item.destination.interfaceIndex, family: family)]
                    ?? self.sockets.first(where: { $0.key.family == family })?.value
                if let channel {
                    futures.append(channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: bytes)))
                }
            }
        }
        // A failed send (an interface that just went away) loses one message, which mDNS's
        // repetitions make good; it is not an error of the endpoint.
        if let written {
            EventLoopFuture.whenAllComplete(futures, on: self.eventLoop).map { _ in }.cascade(to: written)
        }
        return []
    }

    func close() -> EventLoopFuture<Void> {
        let channels = self.removeAll()
        let closes = channels.map { $0.close().recover { _ in } }
        return EventLoopFuture.andAllComplete(closes, on: self.eventLoop)
    }

    private func group(_ family: MulticastSocket.Family) -> SocketAddress {
        var group = MulticastSocket.group(family)
        if self.port != MulticastDNSAddress.port {
            group.port = self.port
        }
        return group
    }
}
