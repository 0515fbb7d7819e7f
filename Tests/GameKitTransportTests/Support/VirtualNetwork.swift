import DequeModule
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitTransport

/// A datagram in flight in the virtual network.
struct SimulatedDatagram: ImpairableDatagram {
    var source: SocketAddress
    var destination: SocketAddress
    var bytes: ByteBuffer

    var impairableByteCount: Int { self.bytes.impairableByteCount }
    mutating func flipBit(at bitIndex: Int) { self.bytes.flipBit(at: bitIndex) }
}

/// One endpoint machine in the virtual network, with what it reported.
struct SimulatedNode {
    var machine: EndpointMachine
    var address: SocketAddress
    /// More addresses of the node, each on a network of its own (``VirtualNetwork/address(_:network:port:)``):
    /// datagrams to them reach the node, and the node sends from the one on the destination's
    /// network, as a multi-homed host does.
    var aliases: [SocketAddress] = []

    /// The address this node sends from to `destination`: the one on its network, else the main one.
    func source(for destination: SocketAddress) -> SocketAddress {
        self.aliases.first { VirtualNetwork.network(of: $0) == VirtualNetwork.network(of: destination) } ?? self.address
    }
    var events: [TransportEvent] = []
    /// Messages to hand to `send` as room allows (the sender of bulk tests).
    var outgoing = Deque<(LinkID, ByteBuffer, SendMode)>()
    /// How connection requests are answered: nil leaves them pending.
    var answer: Answer? = .accept(ByteBuffer())
    /// Every datagram this node sent, with its size (to check reply sizes).
    var sent: [(destination: SocketAddress, bytes: ByteBuffer)] = []
    var recordSent = false

    enum Answer {
        case accept(ByteBuffer)
        case deny(UInt16)
    }

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

/// Endpoint machines exchanging datagrams through seeded impairment models, on a virtual clock
/// that jumps to the next deadline or delivery whenever nothing is left to do now.
struct VirtualNetwork {
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    var nodes: [SimulatedNode] = []
    /// One impairment model per sending node.
    var paths: [ImpairmentModel<SimulatedDatagram>] = []
    /// Datagrams injected by the test, delivered as if sent by `source`.
    var injected = Deque<SimulatedDatagram>()
    /// Called for every datagram as it is delivered (to capture, drop, or rewrite).
    var interceptor: ((inout SimulatedDatagram) -> Bool)?
    /// When a datagram from each source address last reached a node (past the interceptor).
    var lastDelivered: [SocketAddress: NIODeadline] = [:]
    /// Bottlenecks on nodes' outgoing paths, by node: datagrams leave one after another at the
    /// bottleneck's rate, before the path's impairments, and a full queue drops them.
    var bottlenecks: [Int: Bottleneck] = [:]

    /// A link of limited rate with a drop-tail queue.
    struct Bottleneck {
        var bytesPerSecond: Double
        /// The most queueing delay the queue holds; a datagram that would wait longer is dropped.
        var queueLimit: TimeAmount
        var busyUntil = NIODeadline.uptimeNanoseconds(0)
        var dropped = 0

        init(bytesPerSecond: Double, queueLimit: TimeAmount) {
            self.bytesPerSecond = bytesPerSecond
            self.queueLimit = queueLimit
        }

        /// When a datagram of `bytes` handed over at `now` has left, or nil when it is dropped.
        mutating func departure(of bytes: Int, now: NIODeadline) -> NIODeadline? {
            let start = max(now, self.busyUntil)
            guard start - now <= self.queueLimit else {
                self.dropped += 1
                return nil
            }
            self.busyUntil = start + .nanoseconds(Int64(Double(bytes) / self.bytesPerSecond * 1e9))
            return self.busyUntil
        }
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

    /// Adds a node; returns its index.
    @discardableResult
    mutating func addNode(
        configuration: TransportConfiguration = TransportConfiguration(),
        profile: ImpairmentProfile = .perfect,
        seed: UInt64 = 1
    ) -> Int {
        let index = self.nodes.count
        let machine = try! EndpointMachine(configuration: configuration, now: self.now)
        self.nodes.append(SimulatedNode(machine: machine, address: Self.address(index + 1)))
        self.paths.append(ImpairmentModel(profile: profile, seed: seed &+ UInt64(index) &* 7919))
        return index
    }

    // MARK: - Running

    /// Runs until `done` holds, nothing is left to happen, or `limit` of virtual time passes.
    /// Returns whether `done` held.
    @discardableResult
    mutating func run(for limit: TimeAmount, until done: (VirtualNetwork) -> Bool = { _ in false }) -> Bool {
        let end = self.now + limit
        var iterations = 0
        while iterations < 5_000_000 {
            iterations += 1
            self.settle()
            if done(self) { return true }
            guard let next = self.nextEventTime(), next <= end else {
                if self.nextEventTime() != nil { self.now = end }
                return done(self)
            }
            if next > self.now { self.now = next }
            var serviced: [Int] = []
            for index in self.nodes.indices {
                if let deadline = self.nodes[index].machine.nextDeadline, deadline <= self.now {
                    self.nodes[index].machine.handleTimeout(now: self.now)
                    serviced.append(index)
                }
            }
            self.settle()
            // A deadline still due after its timers ran and everything settled would make a real
            // event loop fire its timer again and again: a busy loop.
            for index in serviced {
                if let deadline = self.nodes[index].machine.nextDeadline, deadline <= self.now {
                    Issue.record("node \(index): deadline stays due after handleTimeouts at \(self.now.uptimeNanoseconds) ns")
                    return false
                }
            }
        }
        preconditionFailure("simulation did not settle")
    }

    /// Moves everything that can happen at the current instant.
    private mutating func settle() {
        var progressed = true
        while progressed {
            progressed = false
            for index in self.nodes.indices {
                progressed = self.pumpSends(index) || progressed
                progressed = self.transmit(index) || progressed
            }
            while let datagram = self.injected.popFirst() {
                self.deliver(datagram)
                progressed = true
            }
            for index in self.paths.indices {
                while let datagram = self.paths[index].popDue(at: self.now) {
                    self.deliver(datagram)
                    progressed = true
                }
            }
            for index in self.nodes.indices {
                progressed = self.collectEvents(index) || progressed
            }
        }
    }

    private mutating func pumpSends(_ index: Int) -> Bool {
        var sent = false
        while let (link, message, mode) = self.nodes[index].outgoing.first {
            do {
                try self.nodes[index].machine.send(message, on: link, mode: mode)
                self.nodes[index].outgoing.removeFirst()
                sent = true
            } catch {
                break
            }
        }
        return sent
    }

    private mutating func transmit(_ index: Int) -> Bool {
        var any = false
        while true {
            var buffer = ByteBuffer()
            guard let destination = self.nodes[index].machine.pollTransmit(now: self.now, into: &buffer) else { break }
            any = true
            if self.nodes[index].recordSent {
                self.nodes[index].sent.append((destination, buffer))
            }
            let source = self.nodes[index].source(for: destination)
            var departure = self.now
            if self.bottlenecks[index] != nil {
                guard let leaves = self.bottlenecks[index]!.departure(of: buffer.readableBytes, now: self.now) else { continue }
                departure = leaves
            }
            self.paths[index].submit(SimulatedDatagram(source: source, destination: destination, bytes: buffer), at: departure)
        }
        return any
    }

    private mutating func deliver(_ datagram: SimulatedDatagram) {
        var datagram = datagram
        if let interceptor = self.interceptor, !interceptor(&datagram) { return }
        guard let target = self.nodes.firstIndex(where: { $0.address == datagram.destination || $0.aliases.contains(datagram.destination) }) else { return }
        self.lastDelivered[datagram.source] = self.now
        self.nodes[target].machine.handle(datagram: datagram.bytes, from: datagram.source, now: self.now)
    }

    private mutating func collectEvents(_ index: Int) -> Bool {
        var any = false
        while let event = self.nodes[index].machine.pollEvent() {
            any = true
            self.nodes[index].events.append(event)
            if case .connectionRequest(let request) = event, let answer = self.nodes[index].answer {
                switch answer {
                case .accept(let payload): _ = try? self.nodes[index].machine.accept(request.id, payload: payload, now: self.now)
                case .deny(let code): try? self.nodes[index].machine.deny(request.id, code: code, now: self.now)
                }
            }
        }
        return any
    }

    private func nextEventTime() -> NIODeadline? {
        var next: NIODeadline?
        for node in self.nodes {
            if let deadline = node.machine.nextDeadline { next = min(next ?? deadline, deadline) }
        }
        for path in self.paths {
            if let time = path.nextDeliveryTime { next = min(next ?? time, time) }
        }
        return next
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
