import NIOCore
@_spi(Machine) import GameKitMachine
import NetworkImpairment

@testable import GameKitTraversal

/// A TURN server (RFC 8656, the parts a client uses) as a rewriter of the virtual network's
/// datagrams: a request to the server becomes its answer; a Send indication becomes the datagram
/// it carries, from the sender's relayed address to the peer (if the peer's IP is permitted); a
/// datagram to a relayed address becomes a Data indication to the allocation's owner. One
/// datagram in, one out: it runs as the network's interceptor. No authentication (a client takes
/// an unsigned success while it has no key).
final class VirtualTURNServer {
    let address: SocketAddress
    private var nextPort = 50_000
    /// Client transport address → relayed address, and back.
    private(set) var allocations: [SocketAddress: SocketAddress] = [:]
    private var owners: [SocketAddress: SocketAddress] = [:]
    /// Relayed address → permitted peer IPs.
    private var permissions: [SocketAddress: Set<String>] = [:]
    /// Datagrams relayed each way, and those refused for want of a permission.
    private(set) var sent = 0
    private(set) var delivered = 0
    private(set) var refused = 0

    init(address: SocketAddress) {
        self.address = address
    }

    /// The interceptor: rewrites what concerns this server, lets the rest pass.
    func rewrite(_ datagram: inout VirtualDatagram<SocketAddress, SocketAddress>) -> Bool {
        if datagram.destination == self.address {
            guard let decoded = try? STUNMessage.decode(Array(datagram.bytes.readableBytesView)) else { return false }
            return self.fromClient(decoded.message, &datagram)
        }
        guard let owner = self.owners[datagram.destination] else { return true }
        guard self.permissions[datagram.destination]?.contains(datagram.source.ipAddress ?? "") == true else {
            self.refused += 1
            return false
        }
        let id = STUNMessage.randomTransactionID(using: &Self.random)
        let indication = STUNMessage(.data, .indication, transactionID: id, attributes: [
            .xorAddress(.xorPeerAddress, TraversalAddress(datagram.source)!, transactionID: id),
            STUNAttribute(.data, Array(datagram.bytes.readableBytesView)),
        ])
        self.delivered += 1
        datagram = VirtualDatagram(source: self.address, destination: owner, bytes: ByteBuffer(bytes: indication.encoded()))
        return true
    }

    nonisolated(unsafe) private static var random = MachineRandom(seed: 77)

    private func fromClient(_ message: STUNMessage, _ datagram: inout VirtualDatagram<SocketAddress, SocketAddress>) -> Bool {
        let client = datagram.source
        let id = message.transactionID
        if message.method == .send, message.messageClass == .indication {
            guard let relayed = self.allocations[client], let peer = message.xorAddress(.xorPeerAddress),
                let data = message.attribute(.data)?.value
            else { return false }
            guard self.permissions[relayed]?.contains(peer.socketAddress.ipAddress ?? "") == true else {
                self.refused += 1
                return false
            }
            self.sent += 1
            datagram = VirtualDatagram(source: relayed, destination: peer.socketAddress, bytes: ByteBuffer(bytes: data))
            return true
        }
        guard message.messageClass == .request else { return false }
        var attributes: [STUNAttribute] = []
        switch message.method {
        case .allocate:
            let relayed = self.allocations[client] ?? (try! SocketAddress(ipAddress: self.address.ipAddress!, port: self.nextPort))
            if self.allocations[client] == nil {
                self.nextPort += 1
                self.allocations[client] = relayed
                self.owners[relayed] = client
            }
            attributes = [
                .xorAddress(.xorRelayedAddress, TraversalAddress(relayed)!, transactionID: id),
                .xorAddress(.xorMappedAddress, TraversalAddress(client)!, transactionID: id),
                .uint32(.lifetime, 600),
            ]
        case .createPermission:
            guard let relayed = self.allocations[client] else { return false }
            for attribute in message.attributes where attribute.type == STUNAttribute.Kind.xorPeerAddress.rawValue {
                if let peer = attribute.xorAddressValue(transactionID: id) { self.permissions[relayed, default: []].insert(peer.socketAddress.ipAddress ?? "") }
            }
        case .refresh:
            attributes = [.uint32(.lifetime, 600)]
        default:
            return false
        }
        let answer = STUNMessage(message.method, .success, transactionID: id, attributes: attributes)
        datagram = VirtualDatagram(source: self.address, destination: client, bytes: ByteBuffer(bytes: answer.encoded(fingerprint: true)))
        return true
    }
}
