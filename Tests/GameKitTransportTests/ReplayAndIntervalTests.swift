@_spi(Machine) import GameKitMachine
import Testing

@testable import GameKitTransport

@Suite("Replay window")
struct ReplayWindowTests {
    @Test func acceptsEachNumberOnceAndRejectsTooOldOnes() {
        var window = ReplayWindow()
        #expect(window.isFresh(0))
        window.record(0)
        #expect(!window.isFresh(0))
        for number: UInt64 in [5, 3, 4, 1] {
            #expect(window.isFresh(number))
            window.record(number)
            #expect(!window.isFresh(number))
        }
        #expect(window.isFresh(2))
        window.record(10_000)
        #expect(!window.isFresh(10_000 - ReplayWindow.size))
        #expect(window.isFresh(10_000 - ReplayWindow.size + 1))
        #expect(!window.isFresh(5))
        #expect(window.isFresh(10_001))
    }

    @Test func aLargeJumpForgetsOldMarksWithoutFalseRejects() {
        var window = ReplayWindow()
        for number: UInt64 in 0..<3000 { window.record(number) }
        window.record(100_000)
        for number in (100_000 - ReplayWindow.size + 1)..<100_000 {
            #expect(window.isFresh(number))
        }
    }

    @Test func checkingDoesNotRecord() {
        var window = ReplayWindow()
        window.record(7)
        #expect(window.isFresh(8))
        #expect(window.isFresh(8))
        #expect(window.highest == 7)
    }
}

@Suite("Interval set")
struct IntervalSetTests {
    @Test func insertionsMergeOverlappingAndAdjacentRanges() {
        var set = IntervalSet()
        set.insert(10..<20)
        set.insert(30..<40)
        set.insert(20..<25)
        #expect(set.ranges == [10..<25, 30..<40])
        set.insert(5..<31)
        #expect(set.ranges == [5..<40])
        set.insert(50)
        set.insert(48)
        #expect(set.ranges == [5..<40, 48..<49, 50..<51])
        set.insert(49)
        #expect(set.ranges == [5..<40, 48..<51])
        set.insert(0..<0)
        #expect(set.count == 2)
    }

    @Test func containmentAndGaps() {
        let set = IntervalSet([10..<20, 30..<40])
        #expect(set.contains(10) && set.contains(19) && !set.contains(20) && !set.contains(9))
        #expect(set.contains(12..<18) && !set.contains(15..<35))
        #expect(set.gaps(in: 0..<50) == [0..<10, 20..<30, 40..<50])
        #expect(set.gaps(in: 12..<18).isEmpty)
        #expect(set.gaps(in: 15..<35) == [20..<30])
        #expect(set.totalLength == 20)
    }

    @Test func removalSplitsAndTrims() {
        var set = IntervalSet([0..<100])
        set.remove(40..<60)
        #expect(set.ranges == [0..<40, 60..<100])
        set.removeAll(below: 70)
        #expect(set.ranges == [70..<100])
        var popped = set.popFirst(maximumLength: 10)
        #expect(popped == 70..<80)
        popped = set.popFirst(maximumLength: 100)
        #expect(popped == 80..<100)
        #expect(set.isEmpty)
        var many = IntervalSet((0..<10).map { UInt64($0 * 10)..<UInt64($0 * 10 + 5) })
        many.keepHighest(3)
        #expect(many.ranges == [70..<75, 80..<85, 90..<95])
    }
}
