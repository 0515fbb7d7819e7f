import NIOCore

extension MachineRandom {
    /// A uniformly distributed duration in `range` (milliseconds, inclusive), at microsecond
    /// resolution: the random delays of mDNS (probe start, response delay, query jitter).
    package mutating func milliseconds(_ range: ClosedRange<Int64>) -> TimeAmount {
        let span = UInt64((range.upperBound - range.lowerBound) * 1000 + 1)
        return .microseconds(range.lowerBound * 1000 + Int64(self.next() % span))
    }

    /// A uniformly distributed fraction in 0..<1.
    package mutating func fraction() -> Double {
        Double(self.next() >> 11) / Double(1 << 53)
    }
}
