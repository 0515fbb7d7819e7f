@_spi(Machine) import GameKitMachine
import NIOCore

/// A host of a ``VirtualNetwork``: one datagram machine, the addresses it is reached at, and
/// whatever the test keeps beside it (the events it reported, messages waiting to be sent).
///
/// The network moves datagrams and time; the host says where its datagrams come from, which
/// datagrams are its own, and what it does with its machine's events.
package protocol VirtualHost {
    associatedtype Machine: DatagramMachine where Machine.Source: Hashable

    /// The machine.
    var machine: Machine { get set }

    /// The source a datagram this host sends to `destination` arrives from (a multi-homed host
    /// sends from its address on the destination's network).
    func source(for destination: Machine.Destination) -> Machine.Source

    /// Whether a datagram to `destination` reaches this host (its own address, one of its
    /// addresses, or a group it belongs to).
    func accepts(_ destination: Machine.Destination, from source: Machine.Source) -> Bool

    /// Called whenever the network settles at an instant, before datagrams move: the host may
    /// act on its machine (send what it queued). Returns whether it did anything.
    mutating func act(now: NIODeadline) -> Bool

    /// An event the machine reported; the host records it and may answer it.
    mutating func record(_ event: Machine.Event, now: NIODeadline)

    /// A datagram the machine sent (before the network's impairments).
    mutating func didSend(_ bytes: ByteBuffer, to destination: Machine.Destination, now: NIODeadline)
}

extension VirtualHost {
    package mutating func act(now: NIODeadline) -> Bool { false }
    package mutating func didSend(_ bytes: ByteBuffer, to destination: Machine.Destination, now: NIODeadline) {}
}

/// A datagram in flight on a ``VirtualNetwork``.
package struct VirtualDatagram<Source, Destination>: ImpairableDatagram {
    package var source: Source
    package var destination: Destination
    package var bytes: ByteBuffer

    package init(source: Source, destination: Destination, bytes: ByteBuffer) {
        self.source = source
        self.destination = destination
        self.bytes = bytes
    }

    package var impairableByteCount: Int { self.bytes.impairableByteCount }
    package mutating func flipBit(at bitIndex: Int) { self.bytes.flipBit(at: bitIndex) }
}

/// A link of limited rate with a drop-tail queue, on a host's outgoing path.
package struct VirtualBottleneck {
    package var bytesPerSecond: Double
    /// The most queueing delay the queue holds; a datagram that would wait longer is dropped.
    package var queueLimit: TimeAmount
    package var busyUntil = NIODeadline.uptimeNanoseconds(0)
    package private(set) var dropped = 0

    package init(bytesPerSecond: Double, queueLimit: TimeAmount) {
        self.bytesPerSecond = bytesPerSecond
        self.queueLimit = queueLimit
    }

    /// When a datagram of `bytes` handed over at `now` has left, or nil when it is dropped.
    package mutating func departure(of bytes: Int, now: NIODeadline) -> NIODeadline? {
        let start = max(now, self.busyUntil)
        guard start - now <= self.queueLimit else {
            self.dropped += 1
            return nil
        }
        self.busyUntil = start + .nanoseconds(Int64(Double(bytes) / self.bytesPerSecond * 1e9))
        return self.busyUntil
    }
}
