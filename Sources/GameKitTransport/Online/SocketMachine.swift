@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitOnline
import NIOCore

/// Everything one UDP socket does (PROTOCOL §1.2, §18.1): the transport's endpoint and, for an
/// online session, the room client and the members' paths under it (``OnlineMachine``), as one
/// datagram machine on the package's one driver.
///
/// Without an online layer the endpoint has the socket to itself and nothing is added per
/// datagram. With one, what arrives is split by its first byte (RFC 7983): the transport's
/// datagrams go to the endpoint (a member's direct path shown as the member's address), the rest
/// to the online layer, which hands back the transport datagrams it carried (relayed, or through
/// TURN). What the endpoint sends to a member's address goes straight to the member, or to the
/// relay with the relay's header written in front of it in the same send buffer: a relayed
/// datagram is framed without a copy.
struct SocketMachine: DatagramMachine {
    typealias Event = TransportEvent

    var endpoint: EndpointMachine
    var online: OnlineMachine?

    init(endpoint: EndpointMachine, online: OnlineMachine? = nil) {
        self.endpoint = endpoint
        self.online = online
    }

    // MARK: - DatagramMachine

    mutating func handle(datagram: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        guard self.online != nil else {
            self.endpoint.handle(datagram: datagram, from: source, now: now)
            return
        }
        // A dual-stack socket reports IPv4 senders as IPv4-mapped IPv6 addresses: the online
        // layer knows the rendezvous, the relay and members by their IPv4 addresses.
        let unmapped = source.unmappingIPv4
        if let first = datagram.getInteger(at: datagram.readerIndex, as: UInt8.self), PacketType.firstByteRange.contains(first) {
            let member = self.online!.transportSource(for: unmapped)
            self.endpoint.handle(datagram: datagram, from: member == unmapped ? source : member, now: now)
        } else if let (inner, from) = self.online!.receive(datagram, from: unmapped, now: now) {
            self.endpoint.handle(datagram: inner, from: from, now: now)
        }
    }

    mutating func handleTimeout(now: NIODeadline) {
        if let deadline = self.endpoint.nextDeadline, deadline <= now { self.endpoint.handleTimeout(now: now) }
        if let deadline = self.online?.nextDeadline, deadline <= now { self.online!.handleTimeout(now: now) }
    }

    var nextDeadline: NIODeadline? {
        self.endpoint.nextDeadline.earliest(self.online?.nextDeadline)
    }

    mutating func pollEvent() -> TransportEvent? {
        self.endpoint.pollEvent()
    }

    /// The online layer's next event (room, members, paths), if any.
    mutating func pollRoomEvent() -> RoomEvent? {
        self.online?.pollEvent()
    }

    mutating func handleUnroutable(_ destination: SocketAddress, now: NIODeadline, isRoutable: (SocketAddress) -> Bool) {
        self.endpoint.handleUnroutable(destination, now: now, isRoutable: isRoutable)
    }

    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> SocketAddress? {
        guard self.online != nil else { return self.endpoint.pollTransmit(now: now, into: &buffer) }
        // The online layer's own first (registration, checks, TURN), then the endpoint's.
        if let destination = self.online!.pollTransmit(now: now, into: &buffer) { return destination }
        while true {
            let start = buffer.writerIndex
            guard let destination = self.endpoint.pollTransmit(now: now, into: &buffer, headroom: &self.online!) else { return nil }
            switch self.online!.route(destination) {
            case .asIs:
                return destination
            case .direct(let address):
                return address
            case .relay(let relay, let peer):
                self.online!.writeRelayHeader(peer: peer, at: start, in: &buffer, now: now)
                return relay
            case .carried(let peer):
                // Through TURN, or a relay not ready yet: the online layer frames (or holds) a
                // copy, and sends it from its own queue.
                var copy = ByteBuffer()
                copy.writeBytes(buffer.viewBytes(at: start, length: buffer.writerIndex - start)!)
                buffer.moveWriterIndex(to: start)
                self.online!.carry(copy, to: peer, now: now)
                if let destination = self.online!.pollTransmit(now: now, into: &buffer) { return destination }
            }
        }
    }
}

extension OnlineMachine: TransmitHeadroom {
    /// Room for the relay's header in front of a datagram the relay carries.
    mutating func reserve(for destination: SocketAddress, in output: inout ByteBuffer) {
        let bytes = self.headroom(for: destination)
        if bytes > 0 { output.writeRepeatingByte(0, count: bytes) }
    }
}
