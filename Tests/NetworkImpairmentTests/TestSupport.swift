import NIOCore

@testable import NetworkImpairment

// MARK: - Virtual clock

/// An arbitrary start of virtual time for sans-I/O model tests.
let origin = NIODeadline.uptimeNanoseconds(1_000_000_000)

/// The virtual time `count` steps of `step` after ``origin``.
func virtualTime(_ count: Int, step: TimeAmount) -> NIODeadline {
    origin + .nanoseconds(Int64(count) * step.nanoseconds)
}

// MARK: - Numbered datagrams

/// A datagram whose first four bytes carry `number` (big-endian), padded to `size` bytes
/// with a pattern, so that tests can tell which datagram came out.
func numbered(_ number: Int, size: Int = 16) -> [UInt8] {
    precondition(size >= 4)
    let header = withUnsafeBytes(of: UInt32(number).bigEndian) { Array($0) }
    return header + (4..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ number) }
}

/// The number carried by a datagram made by ``numbered(_:size:)``.
func number(of datagram: [UInt8]) -> Int {
    datagram.prefix(4).reduce(0) { $0 << 8 | Int($1) }
}

// MARK: - Driving a model

/// One datagram leaving a model, and when.
struct Delivery<Element> {
    var time: NIODeadline
    var datagram: Element
}

extension Delivery: Equatable where Element: Equatable {}

extension ImpairmentModel {
    /// Submits `datagrams[i]` at virtual time `i * step`, then takes everything out in
    /// delivery order, each at its own delivery time.
    mutating func run(_ datagrams: [Element], step: TimeAmount) -> [Delivery<Element>] {
        for (index, datagram) in datagrams.enumerated() {
            self.submit(datagram, at: virtualTime(index, step: step))
        }
        return self.drain()
    }

    /// Takes every pending datagram out, advancing virtual time to each delivery time.
    mutating func drain() -> [Delivery<Element>] {
        var deliveries: [Delivery<Element>] = []
        while let time = self.nextDeliveryTime {
            guard let datagram = self.popDue(at: time) else { break }
            deliveries.append(Delivery(time: time, datagram: datagram))
        }
        return deliveries
    }
}

/// Whether some datagram in `numbers` comes after a higher-numbered one.
func hasInversion(_ numbers: [Int]) -> Bool {
    zip(numbers, numbers.dropFirst()).contains { $0 > $1 }
}

/// The number of differing bits between two equally long byte sequences.
func bitDistance(_ lhs: [UInt8], _ rhs: [UInt8]) -> Int {
    precondition(lhs.count == rhs.count)
    return zip(lhs, rhs).reduce(0) { $0 + ($1.0 ^ $1.1).nonzeroBitCount }
}
