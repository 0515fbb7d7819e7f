import NIOCore
import Testing

@testable import NetworkImpairment

/// Independent and bursty loss of ``ImpairmentModel``.
@Suite("ImpairmentModel loss")
struct ImpairmentModelLossTests {
    /// Runs `count` numbered datagrams through `profile` and returns, for each number, whether
    /// it was lost.
    static func lossPattern(_ profile: ImpairmentProfile, seed: UInt64, count: Int) -> [Bool] {
        var model = ImpairmentModel<[UInt8]>(profile: profile, seed: seed)
        var lost = [Bool](repeating: true, count: count)
        for delivery in model.run((0..<count).map { numbered($0, size: 4) }, step: .microseconds(10)) {
            lost[number(of: delivery.datagram)] = false
        }
        #expect(lost.filter { $0 }.count == model.statistics.dropped)
        return lost
    }

    /// The lengths of the runs of consecutive lost datagrams.
    static func burstLengths(_ lost: [Bool]) -> [Int] {
        var lengths: [Int] = []
        var current = 0
        for isLost in lost {
            if isLost {
                current += 1
            } else if current > 0 {
                lengths.append(current)
                current = 0
            }
        }
        if current > 0 { lengths.append(current) }
        return lengths
    }

    static func mean(_ values: [Int]) -> Double {
        Double(values.reduce(0, +)) / Double(values.count)
    }

    // MARK: - Independent loss

    @Test("independent loss drops about the configured fraction of 100k datagrams", arguments: [0.01, 0.1, 0.5])
    func independentLossRateMatchesProbability(loss: Double) {
        let lost = Self.lossPattern(ImpairmentProfile(loss: loss), seed: 12_345, count: 100_000)
        let rate = Double(lost.filter { $0 }.count) / 100_000
        // Five standard deviations of a binomial proportion; the seed is fixed anyway.
        let tolerance = 5 * (loss * (1 - loss) / 100_000).squareRoot()
        #expect(abs(rate - loss) <= tolerance)
        // Independent loss is not bursty: runs are about 1 / (1 - loss) long.
        #expect(abs(Self.mean(Self.burstLengths(lost)) - 1 / (1 - loss)) < 0.1)
    }

    @Test("loss of 1 drops everything and loss of 0 nothing")
    func extremeLossProbabilities() {
        #expect(Self.lossPattern(ImpairmentProfile(loss: 1), seed: 1, count: 1_000).allSatisfy { $0 })
        #expect(Self.lossPattern(ImpairmentProfile(loss: 0), seed: 1, count: 1_000).allSatisfy { !$0 })
    }

    // MARK: - Burst loss

    @Test(
        "burst loss matches the configured average loss and mean burst length",
        arguments: [(0.05, 4.0), (0.2, 2.0), (0.01, 10.0)]
    )
    func burstLossMatchesAverageAndBurstLength(averageLoss: Double, meanBurstLength: Double) {
        let profile = ImpairmentProfile(burstLoss: BurstLoss(averageLoss: averageLoss, meanBurstLength: meanBurstLength))
        let lost = Self.lossPattern(profile, seed: 4_242, count: 400_000)
        let rate = Double(lost.filter { $0 }.count) / Double(lost.count)
        let bursts = Self.burstLengths(lost)
        #expect(abs(rate - averageLoss) <= averageLoss * 0.1)
        #expect(abs(Self.mean(bursts) - meanBurstLength) <= meanBurstLength * 0.1)
    }

    @Test("independent loss applies on top of burst loss")
    func independentLossAddsToBurstLoss() {
        let profile = ImpairmentProfile(loss: 0.1, burstLoss: BurstLoss(averageLoss: 0.1, meanBurstLength: 3))
        let lost = Self.lossPattern(profile, seed: 8, count: 200_000)
        let rate = Double(lost.filter { $0 }.count) / Double(lost.count)
        #expect(abs(rate - (1 - 0.9 * 0.9)) < 0.01)
    }
}
