import DequeModule
@_spi(Machine) import GameKitMachine
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// The transport's tests run endpoint machines on the package's one virtual network.
typealias VirtualNetwork = NetworkImpairment.VirtualNetwork<SimulatedNode>

/// A datagram in flight in the virtual network.
typealias SimulatedDatagram = VirtualDatagram<SocketAddress, SocketAddress>

/// One endpoint machine in the virtual network, with what it reported.
struct SimulatedNode: VirtualHost {
    var machine: EndpointMachine
    var address: SocketAddress
    /// More addresses of the node, each on a network of its own (``VirtualNetwork/address(_:network:port:)``):
    /// datagrams to them reach the node, and the node sends from the one on the destination's
    /// network, as a multi-homed host does.
    var aliases: [SocketAddress] = []
    var events: [TransportEvent] = []
    /// Messages to hand to `send` as room allows (the sender of bulk tests).
    var outgoing = Deque<(LinkID, ByteBuffer, SendMode)>()
    /// Endless reliable streams of numbered messages, one per link, each fed as its own link takes
    /// them (so that one full send buffer holds up no other link, as separate processes would not).
    var streams: [LinkID: BulkStream] = [:]

    struct BulkStream {
        var next = 0
        var size: Int
    }
    /// How connection requests are answered: nil leaves them pending.
    var answer: Answer? = .accept(ByteBuffer())
    /// Every datagram this node sent, with its size (to check reply sizes).
    var sent: [(destination: SocketAddress, bytes: ByteBuffer)] = []
    var recordSent = false

    enum Answer {
        case accept(ByteBuffer)
        case deny(UInt16)
    }

    // MARK: - VirtualHost

    /// The address this node sends from to `destination`: the one on its network, else the main one.
    func source(for destination: SocketAddress) -> SocketAddress {
        self.aliases.first { VirtualNetwork.network(of: $0) == VirtualNetwork.network(of: destination) } ?? self.address
    }

    func accepts(_ destination: SocketAddress, from source: SocketAddress) -> Bool {
        self.address == destination || self.aliases.contains(destination)
    }

    /// Hands `send` the queued messages while the link takes them.
    mutating func act(now: NIODeadline) -> Bool {
        var sent = false
        while let (link, message, mode) = self.outgoing.first {
            do {
                try self.machine.send(message, on: link, mode: mode)
                self.outgoing.removeFirst()
                sent = true
            } catch {
                break
            }
        }
        for link in self.streams.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            while let stream = self.streams[link], (try? self.machine.send(.numbered(stream.next, size: stream.size), on: link, mode: .reliable)) != nil {
                self.streams[link]!.next += 1
                sent = true
            }
        }
        return sent
    }

    mutating func record(_ event: TransportEvent, now: NIODeadline) {
        self.events.append(event)
        if case .connectionRequest(let request) = event, let answer = self.answer {
            switch answer {
            case .accept(let payload): _ = try? self.machine.accept(request.id, payload: payload, now: now)
            case .deny(let code): try? self.machine.deny(request.id, code: code, now: now)
            }
        }
    }

    mutating func didSend(_ bytes: ByteBuffer, to destination: SocketAddress, now: NIODeadline) {
        if self.recordSent { self.sent.append((destination, bytes)) }
    }

    // MARK: - What it reported

    var openedLinks: [LinkID] {
        self.events.compactMap { if case .linkOpened(let link, _, _) = $0 { return link } else { return nil } }
    }

    func received(on link: LinkID, mode: SendMode) -> [ByteBuffer] {
        self.events.compactMap {
            if case .received(let message, let l, let m) = $0, l == link, m == mode { return message } else { return nil }
        }
    }

    var closeReasons: [LinkCloseReason] {
        self.events.compactMap { if case .linkClosed(_, let reason) = $0 { return reason } else { return nil } }
    }

    var connectFailures: [TransportError] {
        self.events.compactMap { if case .connectFailed(_, let error) = $0 { return error } else { return nil } }
    }
}

extension NetworkImpairment.VirtualNetwork where Host == SimulatedNode {
    typealias Bottleneck = VirtualBottleneck

    /// The endpoint machines (the network's hosts).
    var nodes: [SimulatedNode] {
        get { self.hosts }
        _modify { yield &self.hosts }
    }

    static func address(_ host: Int, port: Int = 4000) -> SocketAddress {
        try! SocketAddress(ipAddress: "10.0.0.\(host)", port: port)
    }

    /// Host `host`'s address on network `network` (10.0.`network`.`host`); network 0 is the
    /// nodes' main one.
    static func address(_ host: Int, network: Int, port: Int = 4000) -> SocketAddress {
        try! SocketAddress(ipAddress: "10.0.\(network).\(host)", port: port)
    }

    /// The third byte of an IPv4 address (its network here), or -1.
    static func network(of address: SocketAddress) -> Int {
        guard case .v4(let v4) = address else { return -1 }
        return Int((UInt32(bigEndian: v4.address.sin_addr.s_addr) >> 8) & 0xFF)
    }

    /// Adds an endpoint machine at 10.0.0.(n+1), its random source seeded from `seed`; returns
    /// its index.
    @discardableResult
    mutating func addNode(
        configuration: TransportConfiguration = TransportConfiguration(),
        profile: ImpairmentProfile = .perfect,
        seed: UInt64 = 1
    ) -> Int {
        self.onSpin = { Issue.record(Comment(rawValue: $0)) }
        let index = self.hosts.count
        let machine = try! EndpointMachine(configuration: configuration, now: self.now, random: MachineRandom(seed: seed &+ UInt64(index) &* 104_729))
        return self.add(SimulatedNode(machine: machine, address: Self.address(index + 1)), profile: profile, seed: seed)
    }

    // MARK: - Conveniences

    /// Connects node `from` to node `to` and runs until the link is open on both sides.
    mutating func openLink(from: Int, to: Int, payload: ByteBuffer = ByteBuffer(), limit: TimeAmount = .seconds(30)) -> (LinkID, LinkID)? {
        let initiatorLink = try! self.nodes[from].machine.connect(to: self.nodes[to].address, payload: payload, timeout: nil, now: self.now)
        let before = self.nodes[to].openedLinks.count
        let opened = self.run(for: limit) { network in
            network.nodes[from].openedLinks.contains(initiatorLink) && network.nodes[to].openedLinks.count > before
        }
        guard opened else { return nil }
        return (initiatorLink, self.nodes[to].openedLinks.last!)
    }
}

extension ByteBuffer {
    /// A message whose first 8 bytes are `sequence`, padded to `size` bytes.
    /// Messages shorter than 8 bytes carry the low bytes of the sequence only.
    static func numbered(_ sequence: Int, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt64(sequence))
        if size > 8 {
            buffer.writeRepeatingByte(UInt8(truncatingIfNeeded: sequence), count: size - 8)
        } else {
            buffer.moveReaderIndex(forwardBy: 8 - size)
        }
        return buffer
    }

    var sequenceNumber: Int? {
        self.readableBytes >= 8 ? self.getInteger(at: self.readerIndex, as: UInt64.self).map(Int.init) : nil
    }
}
