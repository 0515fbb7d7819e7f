import NIOCore

/// The one contract every datagram protocol machine of the package speaks, in the style of
/// quinn-proto: datagrams and time in; datagrams, events and a deadline out. No sockets, no
/// clocks, no threads: ``DatagramDriver`` runs any machine over NIO sockets, and tests run any
/// machine on a virtual clock through a seeded virtual network.
///
/// The rules a machine keeps (the driver and the virtual network rely on them):
/// - Every input (``handle(datagram:from:now:)``, ``handleTimeout(now:)``, or an operation of
///   the machine's own, such as "connect") only changes state and queues output; output is taken
///   with ``pollTransmit(now:into:)`` and ``pollEvent()``.
/// - ``pollTransmit(now:into:)`` answers nil when nothing more is due now. It may stop early to
///   let the caller interleave other work; asking again after nil is harmless.
/// - After ``handleTimeout(now:)`` and draining every transmit, ``nextDeadline`` is later than
///   `now` (or nil): a deadline that stays due would make a real event loop spin.
/// - Randomness comes from a ``MachineRandom`` given to the machine, never from inside it, and
///   collections are iterated in a defined order, so that a seeded run repeats exactly.
@_spi(Machine) public protocol DatagramMachine: SendableMetatype {
    /// What the machine reports to its application.
    associatedtype Event
    /// Where a received datagram came from (a socket address for most machines; mDNS adds the
    /// interface it arrived on).
    associatedtype Source = SocketAddress
    /// Where a datagram to send goes.
    associatedtype Destination = SocketAddress

    /// A datagram received from `source` at `now`.
    mutating func handle(datagram: ByteBuffer, from source: Source, now: NIODeadline)

    /// Time has reached `now` (at or after ``nextDeadline``): run what is due.
    mutating func handleTimeout(now: NIODeadline)

    /// Writes the next datagram due into `buffer` (appending at its writer index) and returns
    /// where it goes; nil when nothing is due.
    mutating func pollTransmit(now: NIODeadline, into buffer: inout ByteBuffer) -> Destination?

    /// The next event for the application, in order; nil when there is none.
    mutating func pollEvent() -> Event?

    /// When ``handleTimeout(now:)`` is next needed; nil when no timer runs.
    var nextDeadline: NIODeadline? { get }

    /// The socket had no route to `destination`, so the datagram was not sent. A machine that
    /// can reach the same peer elsewhere moves there (`isRoutable` answers for candidates).
    /// Ignored by default.
    mutating func handleUnroutable(_ destination: Destination, now: NIODeadline, isRoutable: (Destination) -> Bool)
}

extension DatagramMachine {
    @inlinable
    public mutating func handleUnroutable(_ destination: Destination, now: NIODeadline, isRoutable: (Destination) -> Bool) {}
}

@_spi(Machine) extension Optional where Wrapped == NIODeadline {
    /// The earlier of two optional deadlines (nil when both are): how a machine combines its
    /// timers into ``DatagramMachine/nextDeadline``. A plain function, not a closure capturing a
    /// running minimum, which a debug build would box on the heap on every call.
    @inlinable
    public func earliest(_ other: NIODeadline?) -> NIODeadline? {
        guard let self else { return other }
        guard let other else { return self }
        return Swift.min(self, other)
    }
}
