@_spi(Machine) import GameKitMachine
import NIOCore
import Testing

@testable import GameKitTransport

/// The links' timer queue against a plain dictionary: after any sequence of filings and
/// removals, the earliest deadline is the minimum, and due links come out earliest first, ties
/// by index, each once.
@Suite("Link timer queue")
struct LinkTimerQueueTests {
    @Test(arguments: 1...20 as ClosedRange<UInt64>)
    func matchesAPlainTableUnderRandomOperations(seed: UInt64) {
        var random = MachineRandom(seed: seed)
        let queue = LinkTimerQueue()
        var table: [UInt32: NIODeadline] = [:]
        for _ in 0..<2_000 {
            let index = UInt32(random.next() % 40)
            switch random.next() % 10 {
            case 0:
                queue.update(index, to: nil)
                table[index] = nil
            case 1:
                queue.remove(index)
                table[index] = nil
            default:
                // Few distinct instants, so that ties are common.
                let deadline = NIODeadline.uptimeNanoseconds(1_000 + random.next() % 30)
                queue.update(index, to: deadline)
                table[index] = deadline
            }
            #expect(queue.earliest == table.values.min())
            #expect(queue.count == table.count)
            #expect(queue.deadline(of: index) == table[index])
        }
        let now = NIODeadline.uptimeNanoseconds(1_015)
        var popped: [UInt32] = []
        while let index = queue.popDue(now: now) { popped.append(index) }
        let expected = table.filter { $0.value <= now }.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.map(\.key)
        #expect(popped == expected)
        #expect(queue.earliest == table.filter { $0.value > now }.values.min())
    }

    @Test func marksAreFiledOnceAtTheNextRefresh() {
        let queue = LinkTimerQueue()
        var table: [UInt32: NIODeadline] = [1: .uptimeNanoseconds(50), 2: .uptimeNanoseconds(20)]
        var asked: [UInt32] = []
        queue.markChanged(1)
        queue.markChanged(2)
        #expect(queue.earliest == nil)
        queue.refresh { asked.append($0); return table[$0] }
        #expect(asked == [1, 2])
        #expect(queue.earliest == .uptimeNanoseconds(20))
        // Link 2 is gone, link 1 moved earlier: nothing changes until they are marked and refreshed.
        table[2] = nil
        table[1] = .uptimeNanoseconds(10)
        queue.refresh { asked.append($0); return table[$0] }
        #expect(asked == [1, 2])
        #expect(queue.earliest == .uptimeNanoseconds(20))
        queue.markChanged(2)
        queue.markChanged(1)
        queue.refresh { table[$0] }
        #expect(queue.earliest == .uptimeNanoseconds(10))
        #expect(queue.count == 1)
    }
}
