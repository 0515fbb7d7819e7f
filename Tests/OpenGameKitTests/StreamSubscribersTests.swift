import Foundation
import NIOConcurrencyHelpers
import NetworkImpairment
import Testing

@testable import OpenGameKit

/// Readers of an object's async sequences: every reader gets every element in order, a
/// finished set hands out finished sequences, and a reader whose task is cancelled while
/// elements are yielded to it never deadlocks the yielding thread (the hang a voice test pass
/// showed: gdb found a group chat's stop and a session's event loop waiting for each other).
@Suite("Stream subscribers")
struct StreamSubscribersTests {
    @Test("Every reader gets every element, in order; after finish, sequences end at once")
    func readersGetEverything() async {
        let subscribers = StreamSubscribers<Int>()
        #expect(subscribers.isEmpty)
        let first = subscribers.makeStream()
        let second = subscribers.makeStream()
        #expect(!subscribers.isEmpty)
        subscribers.yield([1, 2])
        subscribers.yield([3])
        subscribers.finish()
        var heard: [[Int]] = []
        for stream in [first, second] {
            var elements: [Int] = []
            for await element in stream { elements.append(element) }
            heard.append(elements)
        }
        #expect(heard == [[1, 2, 3], [1, 2, 3]])
        #expect(subscribers.isEmpty)
        var late: [Int] = []
        for await element in subscribers.makeStream() { late.append(element) }
        #expect(late.isEmpty)
    }

    @Test("A reader that ends leaves the set")
    func endedReadersLeave() async {
        let subscribers = StreamSubscribers<Int>()
        let reader = Task { for await _ in subscribers.makeStream() {} }
        #expect(await waitUntil(seconds: 10) { !subscribers.isEmpty })
        reader.cancel()
        #expect(await waitUntil(seconds: 10) { subscribers.isEmpty })
    }

    /// Two threads of their own: one yields every few microseconds, the other starts a reader task and
    /// cancels it, over and over, so that a cancellation (which runs the reader's termination
    /// with the task's status lock held) keeps meeting a yield that resumes the same task. With
    /// the yield made under the lock the termination takes, this stopped for good within the
    /// rounds (checked by moving the yield under the lock).
    @Test("A cancellation that meets a yield to the same reader never deadlocks")
    func cancellationMeetsYield() async {
        let subscribers = StreamSubscribers<Int>()
        let stop = NIOLockedValueBox(false)
        let rounds = NIOLockedValueBox(0)
        Thread.detachNewThread {
            var value = 0
            while !stop.withLockedValue({ $0 }) {
                subscribers.yield([value])
                value &+= 1
                // A breath between yields: not a busy loop beside the other tests of the pass.
                usleep(20)
            }
        }
        Thread.detachNewThread {
            for _ in 0..<3000 {
                let stream = subscribers.makeStream(bufferingPolicy: .bufferingNewest(1))
                let reading = NIOLockedValueBox(0)
                let reader = Task { for await _ in stream { reading.withLockedValue { $0 += 1 } } }
                // Cancelled once it has read a few: it is waiting for the next element, or
                // about to, while the yields go on.
                for _ in 0..<20_000 where reading.withLockedValue({ $0 }) < 3 { Thread.sleep(forTimeInterval: 0.00005) }
                reader.cancel()
                rounds.withLockedValue { $0 += 1 }
            }
            stop.withLockedValue { $0 = true }
        }
        let finished = await waitUntil(seconds: 240) { rounds.withLockedValue { $0 } == 3000 }
        stop.withLockedValue { $0 = true }
        #expect(finished, "stopped after \(rounds.withLockedValue { $0 }) rounds of 3000")
    }
}
