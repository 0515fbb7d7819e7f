import NIOCore
import Testing

@testable import NetworkImpairment

/// Pass-through, determinism, delay, jitter and ordering of ``ImpairmentModel``.
@Suite("ImpairmentModel timing and determinism")
struct ImpairmentModelTimingTests {
    /// A profile that uses every effect, for determinism tests.
    static let everything = ImpairmentProfile(
        loss: 0.05,
        burstLoss: BurstLoss(averageLoss: 0.05, meanBurstLength: 3),
        delay: .milliseconds(20),
        jitter: .milliseconds(10),
        reorderProbability: 0.1,
        reorderDelay: .milliseconds(30),
        duplicateProbability: 0.1,
        corruptProbability: 0.1
    )

    // MARK: - Pass-through

    @Test("a perfect profile delivers every datagram at once, unchanged and in order")
    func perfectProfileIsPassThrough() {
        var model = ImpairmentModel<[UInt8]>(profile: .perfect, seed: 1)
        for index in 0..<1_000 {
            let datagram = numbered(index, size: 4 + index % 50)
            let now = virtualTime(index, step: .microseconds(100))
            model.submit(datagram, at: now)
            #expect(model.nextDeliveryTime == now)
            #expect(model.popDue(at: now) == datagram)
            #expect(model.popDue(at: now) == nil)
        }
        model.submit([], at: origin)
        #expect(model.popDue(at: origin) == [])
        #expect(model.statistics.submitted == 1_001 && model.statistics.delivered == 1_001)
        #expect(model.statistics.dropped == 0 && model.statistics.corrupted == 0)
    }

    @Test("datagrams due at the same time leave in submission order")
    func simultaneousDatagramsLeaveInSubmissionOrder() {
        var model = ImpairmentModel<[UInt8]>(profile: ImpairmentProfile(delay: .milliseconds(5)), seed: 1)
        for index in 0..<500 {
            model.submit(numbered(index), at: origin)
        }
        let deliveries = model.drain()
        #expect(deliveries.map { number(of: $0.datagram) } == Array(0..<500))
        #expect(deliveries.allSatisfy { $0.time == origin + .milliseconds(5) })
    }

    // MARK: - Determinism

    @Test("the same seed and submissions give identical outputs")
    func sameSeedGivesIdenticalOutputs() {
        let datagrams = (0..<3_000).map { numbered($0, size: 4 + $0 % 40) }
        var first = ImpairmentModel<[UInt8]>(profile: Self.everything, seed: 77)
        var second = ImpairmentModel<[UInt8]>(profile: Self.everything, seed: 77)
        let a = first.run(datagrams, step: .milliseconds(1))
        let b = second.run(datagrams, step: .milliseconds(1))
        #expect(a == b)
        #expect(first.statistics == second.statistics)
        // Every effect actually happened, so the comparison covered all of them.
        let statistics = first.statistics
        #expect(statistics.dropped > 0 && statistics.duplicated > 0)
        #expect(statistics.corrupted > 0 && statistics.reordered > 0)
    }

    @Test("different seeds give different outputs")
    func differentSeedsGiveDifferentOutputs() {
        let datagrams = (0..<3_000).map { numbered($0) }
        var first = ImpairmentModel<[UInt8]>(profile: Self.everything, seed: 77)
        var second = ImpairmentModel<[UInt8]>(profile: Self.everything, seed: 78)
        #expect(first.run(datagrams, step: .milliseconds(1)) != second.run(datagrams, step: .milliseconds(1)))
    }

    @Test("datagrams are conserved: delivered plus pending equals submitted minus dropped plus duplicated")
    func datagramsAreConserved() {
        var model = ImpairmentModel<[UInt8]>(profile: Self.everything, seed: 5)
        for index in 0..<2_000 {
            let now = virtualTime(index, step: .milliseconds(1))
            model.submit(numbered(index), at: now)
            while model.popDue(at: now) != nil {}
            let s = model.statistics
            #expect(s.delivered + model.pendingCount == s.submitted - s.dropped + s.duplicated)
        }
        _ = model.drain()
        #expect(model.pendingCount == 0 && model.nextDeliveryTime == nil)
    }

    // MARK: - Delay and jitter

    @Test("a fixed delay without jitter delays every datagram exactly and keeps order")
    func fixedDelayIsExact() {
        let delay = TimeAmount.milliseconds(25)
        var model = ImpairmentModel<[UInt8]>(profile: ImpairmentProfile(delay: delay), seed: 3)
        for index in 0..<1_000 {
            model.submit(numbered(index), at: virtualTime(index, step: .milliseconds(1)))
        }
        #expect(model.popDue(at: origin + delay - .nanoseconds(1)) == nil)
        let deliveries = model.drain()
        #expect(deliveries.map { number(of: $0.datagram) } == Array(0..<1_000))
        for delivery in deliveries {
            #expect(delivery.time == virtualTime(number(of: delivery.datagram), step: .milliseconds(1)) + delay)
        }
    }

    @Test("jitter keeps every delay within delay...delay+jitter, spans it, and reorders datagrams")
    func jitterStaysInBoundsAndReorders() {
        let profile = ImpairmentProfile(delay: .milliseconds(10), jitter: .milliseconds(5))
        var model = ImpairmentModel<[UInt8]>(profile: profile, seed: 11)
        let deliveries = model.run((0..<5_000).map { numbered($0) }, step: .milliseconds(1))
        #expect(deliveries.count == 5_000)
        let latencies = deliveries.map { delivery in
            (delivery.time - virtualTime(number(of: delivery.datagram), step: .milliseconds(1))).nanoseconds
        }
        #expect(latencies.allSatisfy { (10_000_000...15_000_000).contains($0) })
        #expect(latencies.min()! < 10_100_000 && latencies.max()! > 14_900_000)
        #expect(hasInversion(deliveries.map { number(of: $0.datagram) }))
        #expect(Set(deliveries.map { number(of: $0.datagram) }).count == 5_000)
    }

    @Test("loss decisions do not depend on the other effects of the profile")
    func lossDecisionsAreIndependentOfOtherEffects() {
        let datagrams = (0..<5_000).map { numbered($0) }
        var lossOnly = ImpairmentModel<[UInt8]>(profile: ImpairmentProfile(loss: 0.2), seed: 9)
        var withOtherEffects = ImpairmentModel<[UInt8]>(
            profile: ImpairmentProfile(
                loss: 0.2,
                jitter: .milliseconds(50),
                reorderProbability: 0.3,
                reorderDelay: .milliseconds(20),
                duplicateProbability: 0.3
            ),
            seed: 9
        )
        let survivors = lossOnly.run(datagrams, step: .milliseconds(1)).map { number(of: $0.datagram) }
        let others = withOtherEffects.run(datagrams, step: .milliseconds(1)).map { number(of: $0.datagram) }
        #expect(Set(survivors) == Set(others))
        #expect(lossOnly.statistics.dropped == withOtherEffects.statistics.dropped)
    }
}
