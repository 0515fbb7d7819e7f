import NIOCore

/// The random delays of mDNS (probe start, response delay, query jitter), from a generator that
/// tests seed and production seeds from the system.
///
/// xoshiro256** — small, fast, and good enough for timing jitter; nothing here needs
/// cryptographic randomness.
struct DiscoveryRandom: Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    /// A generator seeded by splitmix64 from `seed`.
    init(seed: UInt64) {
        var x = seed
        func splitmix() -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        self.state = (splitmix(), splitmix(), splitmix(), splitmix())
    }

    /// A generator seeded from the system's random source.
    static func system() -> DiscoveryRandom {
        var system = SystemRandomNumberGenerator()
        return DiscoveryRandom(seed: system.next())
    }

    mutating func next() -> UInt64 {
        let result = ((self.state.1 &* 5) << 7 | (self.state.1 &* 5) >> 57) &* 9
        let t = self.state.1 << 17
        self.state.2 ^= self.state.0
        self.state.3 ^= self.state.1
        self.state.1 ^= self.state.2
        self.state.0 ^= self.state.3
        self.state.2 ^= t
        self.state.3 = self.state.3 << 45 | self.state.3 >> 19
        return result
    }

    /// A uniformly distributed duration in `range` (milliseconds, inclusive), at microsecond
    /// resolution.
    mutating func milliseconds(_ range: ClosedRange<Int64>) -> TimeAmount {
        let span = UInt64((range.upperBound - range.lowerBound) * 1000 + 1)
        return .microseconds(range.lowerBound * 1000 + Int64(self.next() % span))
    }

    /// A uniformly distributed fraction in 0..<1.
    mutating func fraction() -> Double {
        Double(self.next() >> 11) / Double(1 << 53)
    }
}
