import Foundation
import GameKitVoiceEngine
import NIOConcurrencyHelpers
import Testing

/// A microphone that blocks in `read` until it is closed (a device with nothing to give), or
/// gives silence; it counts its closes, and its `close` can be held up to stand for a device
/// whose close blocks.
private final class BlockingMicrophone: AudioCaptureDevice, @unchecked Sendable {
    let name = "blocking"
    let blocks: Bool
    private let closed = DispatchSemaphore(value: 0)
    private let state = NIOLockedValueBox((closes: 0, reads: 0))
    let closeMayReturn = DispatchSemaphore(value: 0)
    let holdsClose: Bool

    init(blocks: Bool, holdsClose: Bool = false) {
        self.blocks = blocks
        self.holdsClose = holdsClose
    }

    var closes: Int { state.withLockedValue { $0.closes } }
    var reads: Int { state.withLockedValue { $0.reads } }

    func read(count: Int) throws(VoiceEngineError) -> [Int16]? {
        state.withLockedValue { $0.reads += 1 }
        if blocks {
            closed.wait()
            closed.signal()
            return nil
        }
        Thread.sleep(forTimeInterval: 0.002)
        return [Int16](repeating: 0, count: count)
    }

    func close() {
        state.withLockedValue { $0.closes += 1 }
        closed.signal()
        if holdsClose { closeMayReturn.wait() }
    }
}

/// A loudspeaker that counts its closes and refuses writes after one.
private final class CountingSpeaker: AudioPlaybackDevice, @unchecked Sendable {
    let name = "counting"
    private let state = NIOLockedValueBox((closes: 0, writes: 0, writesAfterClose: 0))
    var closes: Int { state.withLockedValue { $0.closes } }
    var writes: Int { state.withLockedValue { $0.writes } }
    var writesAfterClose: Int { state.withLockedValue { $0.writesAfterClose } }

    func write(_ samples: [Int16]) throws(VoiceEngineError) {
        state.withLockedValue { state in
            state.writes += 1
            if state.closes > 0 { state.writesAfterClose += 1 }
        }
    }

    func close() { state.withLockedValue { $0.closes += 1 } }
}

/// How an `AudioLoop` ends and lets go of its devices: `start(onEnd:)` hears the end on the
/// loop's thread, and `shutDown()` closes both devices without blocking its caller, exactly
/// once each, the loudspeaker only after the last frame was written to it. (Both replaced
/// Dispatch workers parked in `wait()` for a whole call, four at a time in a group call.)
@Suite("Audio loop: its end and its shutdown")
struct AudioLoopTests {
    /// Waits, bounded, for a semaphore signalled by another thread (an event, not a timing).
    private static func arrives(_ semaphore: DispatchSemaphore) -> Bool {
        semaphore.wait(timeout: .now() + 20) == .success
    }

    /// Waits, bounded, until `condition` holds (another thread makes it so).
    private static func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<20_000 where !condition() { Thread.sleep(forTimeInterval: 0.001) }
        return condition()
    }

    @Test("onEnd hears a loop that ended by itself, on the loop's thread, with its failure or none")
    func onEndHearsTheEnd() throws {
        let engine = try VoiceEngine { _ in }
        let ended = DispatchSemaphore(value: 0)
        let heard = NIOLockedValueBox<(VoiceEngineError?, Bool)?>(nil)
        let caller = ObjectIdentifier(Thread.current)
        let microphone = MemoryCaptureDevice(samples: [Int16](repeating: 0, count: 3200))
        let loop = AudioLoop(engine: engine, capture: microphone, playback: MemoryPlaybackDevice(), clock: VirtualVoiceClock())
        loop.start { failure in
            heard.withLockedValue { $0 = (failure, ObjectIdentifier(Thread.current) != caller) }
            ended.signal()
        }
        #expect(Self.arrives(ended))
        #expect(heard.withLockedValue { $0?.0 } == nil && heard.withLockedValue { $0?.1 } == true)
        #expect(loop.framesProcessed == 10)

        // A loudspeaker that fails: onEnd has its error.
        let closed = MemoryPlaybackDevice()
        closed.close()
        let failing = AudioLoop(engine: engine, capture: MemoryCaptureDevice(samples: [Int16](repeating: 0, count: 640)), playback: closed)
        let failed = DispatchSemaphore(value: 0)
        let failure = NIOLockedValueBox<VoiceEngineError?>(nil)
        failing.start { error in
            failure.withLockedValue { $0 = error }
            failed.signal()
        }
        #expect(Self.arrives(failed))
        #expect(failure.withLockedValue { $0 } == .device("memory is closed"))
    }

    @Test("shutDown wakes a read blocked in the microphone, then closes each device once, the speaker after its last frame")
    func shutDownEndsABlockedLoop() throws {
        let engine = try VoiceEngine { _ in }
        let microphone = BlockingMicrophone(blocks: true)
        let speaker = CountingSpeaker()
        let loop = AudioLoop(engine: engine, capture: microphone, playback: speaker)
        let ended = DispatchSemaphore(value: 0)
        loop.start { _ in ended.signal() }
        #expect(Self.eventually { microphone.reads > 0 })
        loop.shutDown()
        loop.shutDown()
        #expect(Self.arrives(ended))
        #expect(loop.wait() == nil)
        // The loop's thread closes the speaker after it ended, before onEnd: both are closed now.
        #expect(microphone.closes == 1 && speaker.closes == 1)
        #expect(speaker.writesAfterClose == 0)
    }

    @Test("shutDown returns while a device's close still blocks")
    func shutDownDoesNotWaitForAClose() throws {
        let engine = try VoiceEngine { _ in }
        let microphone = BlockingMicrophone(blocks: false, holdsClose: true)
        let speaker = CountingSpeaker()
        let loop = AudioLoop(engine: engine, capture: microphone, playback: speaker)
        let ended = DispatchSemaphore(value: 0)
        loop.start { _ in ended.signal() }
        #expect(Self.eventually { speaker.writes >= 3 })
        // The microphone's close blocks until the test lets it return: shutDown returns anyway.
        let returned = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            loop.shutDown()
            returned.signal()
        }
        #expect(Self.arrives(returned))
        #expect(Self.arrives(ended))
        #expect(speaker.closes == 1 && speaker.writesAfterClose == 0)
        #expect(Self.eventually { microphone.closes == 1 })
        microphone.closeMayReturn.signal()
    }

    @Test("A loop shut down before it started closes both devices, never runs, and waits for nothing")
    func shutDownBeforeStart() throws {
        let engine = try VoiceEngine { _ in }
        let microphone = BlockingMicrophone(blocks: false)
        let speaker = CountingSpeaker()
        let loop = AudioLoop(engine: engine, capture: microphone, playback: speaker)
        loop.shutDown()
        let ended = DispatchSemaphore(value: 0)
        loop.start { _ in ended.signal() }
        #expect(loop.wait() == nil)
        // The closes run on a thread of their own.
        #expect(Self.eventually { microphone.closes == 1 && speaker.closes == 1 })
        #expect(microphone.reads == 0 && loop.framesProcessed == 0)
        #expect(ended.wait(timeout: .now()) == .timedOut, "a loop that never ran has no end to hear")
    }
}
