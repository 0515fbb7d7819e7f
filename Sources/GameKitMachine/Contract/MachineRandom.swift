/// The random source a machine is given: the system's cryptographically secure generator in
/// production, or a seeded generator that makes a test repeat exactly.
///
/// Machines draw everything random from the one they are given (link indexes, STUN transaction
/// IDs, probe nonces, mDNS delays, timer jitter), never from a global source, in the way
/// quinn-proto seeds its endpoint from its configuration. The seeded generator (xoshiro256**,
/// seeded by splitmix64) is predictable by design: it is for tests and simulations only, and
/// ``system()`` is what every real endpoint uses, since STUN transaction IDs and link indexes
/// must not be guessable by an off-path attacker.
package struct MachineRandom: RandomNumberGenerator, Sendable {
    private enum Source: Sendable {
        case system
        case seeded(UInt64, UInt64, UInt64, UInt64)
    }

    private var source: Source

    /// The system's cryptographically secure generator (`getrandom` on Linux).
    package static func system() -> MachineRandom {
        MachineRandom(source: .system)
    }

    private init(source: Source) {
        self.source = source
    }

    /// A generator that repeats the same sequence for the same seed (tests only).
    package init(seed: UInt64) {
        var x = seed
        func splitmix() -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        self.source = .seeded(splitmix(), splitmix(), splitmix(), splitmix())
    }

    /// Whether this generator is seeded (and so predictable).
    package var isSeeded: Bool {
        if case .seeded = self.source { return true }
        return false
    }

    package mutating func next() -> UInt64 {
        switch self.source {
        case .system:
            var system = SystemRandomNumberGenerator()
            return system.next()
        case .seeded(var s0, var s1, var s2, var s3):
            let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
            let t = s1 << 17
            s2 ^= s0
            s3 ^= s1
            s1 ^= s2
            s0 ^= s3
            s2 ^= t
            s3 = s3 << 45 | s3 >> 19
            self.source = .seeded(s0, s1, s2, s3)
            return result
        }
    }

    /// A new generator for a part of a machine: seeded from this one when this one is seeded
    /// (so the whole repeats), the system's otherwise.
    package mutating func split() -> MachineRandom {
        self.isSeeded ? MachineRandom(seed: self.next()) : .system()
    }

    /// `count` random bytes.
    package mutating func bytes(_ count: Int) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count {
            var word = self.next()
            for _ in 0..<min(8, count - result.count) {
                result.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return result
    }
}
