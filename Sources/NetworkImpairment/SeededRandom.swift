@_spi(Machine) import GameKitMachine

/// A small, fast, deterministic pseudo-random number generator.
///
/// Impairment runs must be reproducible: a failing property test or a surprising benchmark is
/// only useful if the same seed replays the same losses, delays and bit flips. The standard
/// library's `SystemRandomNumberGenerator` cannot be seeded, and the algorithms behind its
/// generic helpers (`Double.random(in:using:)`, `next(upperBound:)`) are not promised to stay
/// the same across Swift versions. This generator pins everything down: xoshiro256\*\* (Blackman
/// and Vigna) with its state expanded from a 64-bit seed by SplitMix64, and its own
/// ``nextDouble()`` and `next(below:)` derivations. The same seed yields the same
/// sequence on every platform and toolchain.
///
/// It is not cryptographically secure; do not use it for keys or nonces.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    /// The package's one seeded generator (the machines' `MachineRandom`, seeded): the same
    /// algorithm and seed expansion, so the impairments and the machines draw from one
    /// implementation.
    private var generator: MachineRandom

    // MARK: - Creating a generator

    /// Creates a generator whose whole output is determined by `seed`.
    ///
    /// Every seed, including 0, gives a valid, well-mixed state.
    public init(seed: UInt64) {
        self.generator = MachineRandom(seed: seed)
    }

    // MARK: - Drawing numbers

    /// Returns the next 64 uniformly distributed bits (xoshiro256\*\*).
    public mutating func next() -> UInt64 {
        self.generator.next()
    }

    /// Returns a uniformly distributed `Double` in `0..<1`, built from the top 53 bits of
    /// one ``next()`` draw (every value is a multiple of 2⁻⁵³).
    public mutating func nextDouble() -> Double {
        Double(self.next() >> 11) * 0x1.0p-53
    }

    /// Returns a uniformly distributed integer in `0..<bound`, without modulo bias
    /// (Lemire's multiply-and-reject method).
    ///
    /// - Precondition: `bound > 0`.
    public mutating func next(below bound: UInt64) -> UInt64 {
        precondition(bound > 0, "SeededRandom.next(below:) needs a bound greater than zero")
        var product = self.next().multipliedFullWidth(by: bound)
        if product.low < bound {
            let threshold = (0 &- bound) % bound
            while product.low < threshold {
                product = self.next().multipliedFullWidth(by: bound)
            }
        }
        return product.high
    }

    /// Returns a uniformly distributed integer in `0..<bound`; see `next(below:)`.
    ///
    /// - Precondition: `bound > 0`.
    public mutating func next(below bound: Int) -> Int {
        precondition(bound > 0, "SeededRandom.next(below:) needs a bound greater than zero")
        return Int(truncatingIfNeeded: self.next(below: UInt64(bound)))
    }

    /// Returns `true` with probability `probability` (clamped to `0...1`).
    ///
    /// Draws one number unless `probability <= 0`, so that a disabled effect does not consume
    /// randomness.
    mutating func chance(_ probability: Double) -> Bool {
        guard probability > 0 else { return false }
        return self.nextDouble() < probability
    }
}

// MARK: - Seed expansion

/// SplitMix64 (Steele, Lea and Flood): turns one 64-bit seed into a stream of well-mixed
/// 64-bit values. Used to fill the xoshiro state and to derive independent sub-seeds.
struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(self.state)
    }

    /// The SplitMix64 output function: a bijective avalanche mix of 64 bits.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
