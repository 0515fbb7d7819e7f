@_spi(Machine) import GameKitMachine
import Testing

/// The machines' random source: seeded, the published xoshiro256** sequence; otherwise the
/// system's generator, which nothing can predict.
@Suite struct MachineRandomTests {
    /// xoshiro256** with its state from SplitMix64 (the reference C implementations' output).
    @Test(arguments: [
        (UInt64(0), [0x99EC_5F36_CB75_F2B4, 0xBF6E_1F78_4956_452A, 0x1A5F_849D_4933_E6E0, 0x6AA5_94F1_262D_2D2C] as [UInt64]),
        (UInt64(42), [0x1578_0B2E_0C2E_C716, 0x6104_D986_6D11_3A7E, 0xAE17_5332_39E4_99A1, 0xECB8_AD47_03B3_60A1]),
    ])
    func aSeededGeneratorGivesTheReferenceSequence(seed: UInt64, expected: [UInt64]) {
        var random = MachineRandom(seed: seed)
        #expect(random.isSeeded)
        #expect((0..<4).map { _ in random.next() } == expected)
    }

    @Test func splittingASeededGeneratorRepeatsAndTheSystemOneIsNotSeeded() {
        var a = MachineRandom(seed: 9), b = MachineRandom(seed: 9)
        var partA = a.split(), partB = b.split()
        #expect(partA.isSeeded)
        #expect(partA.next() == partB.next())
        #expect(a.next() == b.next())
        var system = MachineRandom.system()
        #expect(!system.isSeeded)
        #expect(!system.split().isSeeded)
        // Two system draws of 128 bits agree only by a failure of the generator.
        #expect(system.bytes(16) != system.bytes(16))
    }

    @Test func bytesAndDelaysStayInRange() {
        var random = MachineRandom(seed: 3)
        #expect(random.bytes(12).count == 12)
        #expect(random.bytes(0).isEmpty)
        for _ in 0..<1_000 {
            let delay = random.milliseconds(20...120)
            #expect(delay >= .milliseconds(20) && delay <= .milliseconds(120))
            let fraction = random.fraction()
            #expect(fraction >= 0 && fraction < 1)
        }
    }
}
