import GameKitTransport
import NIOCore
import Testing

@testable import OpenGameKitVoice

/// A side that cannot set a chat up tells the other why (PROTOCOL §17.1, kind 10), in every
/// phase, and still sends what a receiver that predates that message understands.
@Suite("Voice set-up failures reach the other side with their cause")
struct CallFailureTests {
    /// Where the chat is when alice's side fails, what alice sends, and what bob's client hears.
    struct Case: Sendable, CustomTestStringConvertible {
        var phase: String
        var sent: [SignalMessage.Kind]
        var bobHears: String
        var bobHearsWithoutFailed: String
        var testDescription: String { self.phase }
    }

    static let cases = [
        Case(phase: "inviting", sent: [.failed, .cancel], bobHears: "didNotStart alice 32002 (32013: no socket)", bobHearsWithoutFailed: "didNotStart alice 32009"),
        Case(phase: "connecting", sent: [.failed, .noPath], bobHears: "didNotStart alice 32002 (32013: no socket)", bobHearsWithoutFailed: "didNotStart alice 32002"),
        // Bob's devices are open, but the chat has not started: alice's never were.
        Case(phase: "connected", sent: [.failed, .hangUp], bobHears: "didNotStart alice 32002 (32013: no socket)", bobHearsWithoutFailed: "didNotStart alice 32003"),
    ]

    /// Brings a chat from alice to bob to `phase` (connected: bob's devices open, alice's still
    /// opening).
    static func chat(in phase: String, deliverFailed: Bool) throws -> CallHarness {
        var h = CallHarness()
        h.manualAnswers = phase == "inviting"
        try h.start(0, callID: 7)
        h.flush()
        if phase == "connected" {
            h.apply(h.machines[1].connected(.direct, now: h.now), side: 1)
            // Alice's audio is being started (its outcome is the failure below).
            _ = h.machines[0].connected(.direct, now: h.now)
        }
        h.sent[0].removeAll()
        h.apply(h.machines[0].setUpFailed(.networkConfigurationError, reason: "no socket"), side: 0)
        if !deliverFailed {
            h.inFlight[1].removeAll { (try? SignalMessage.decode($0))?.kind == .failed }
        }
        h.flush()
        return h
    }

    @Test(arguments: cases)
    func theOtherSideHearsTheCause(_ test: Case) throws {
        let h = try Self.chat(in: test.phase, deliverFailed: true)
        #expect(h.sent[0].map(\.kind) == test.sent)
        #expect(h.events[0].last == "didNotStart bob 32013")
        #expect(h.events[1].last == test.bobHears, "\(h.events[1])")
        #expect(h.machines[0].call == nil && h.machines[1].call == nil)
        // The message that follows for older receivers finds no call and changes nothing.
        #expect(h.machines[1].ignoredMessages == 1)
    }

    @Test(arguments: cases)
    func aReceiverThatPredatesFailedMessagesHearsWhatItDidBefore(_ test: Case) throws {
        let h = try Self.chat(in: test.phase, deliverFailed: false)
        #expect(h.events[1].last == test.bobHearsWithoutFailed, "\(h.events[1])")
        #expect(h.machines[1].call == nil)
    }

    @Test func anInviteeThatFailsWhileAnsweringIsNotReportedAsDeclining() throws {
        var h = CallHarness()
        h.manualAnswers = true
        h.holdGathering = true
        try h.start(0, callID: 7)
        h.completeGathering(0)
        h.flush()
        _ = try h.machines[1].accept(7, now: h.now)
        h.apply(h.machines[1].setUpFailed(.networkConfigurationError, reason: "no socket"), side: 1)
        h.flush()
        #expect(h.sent[1].map(\.kind) == [.failed, .deny])
        #expect(h.events[0] == ["didNotStart bob 32002 (32013: no socket)"])
        #expect(h.events[1].last == "didNotStart alice 32013")
    }

    @Test func aFailureWhileStillGatheringSendsNothing() throws {
        var h = CallHarness()
        h.holdGathering = true
        try h.start(0, callID: 7)
        h.apply(h.machines[0].setUpFailed(.networkConfigurationError, reason: "no socket"), side: 0)
        #expect(h.sent[0].isEmpty && h.events[0] == ["didNotStart bob 32013"])
    }

    @Test func theReasonIsCutAtACharacterAndReadSafely() throws {
        // 150 two-byte characters: 127 of them fit the 255 bytes.
        let long = SignalMessage.failed(9, code: 32005, reason: String(repeating: "é", count: 150))
        #expect(long.reason.count == 254 && long.encoded().count == SignalMessage.headerSize + 3 + 254)
        let decoded = try SignalMessage.decode(long.encoded())
        #expect(decoded == long)
        #expect(VoiceCallMachine.RemoteFailure(decoded) == .init(code: .audioUnavailableError, reason: String(repeating: "é", count: 127)))
        // A four-byte character that would cross the limit is left out whole.
        let edge = SignalMessage.failed(9, code: 32005, reason: String(repeating: "a", count: 253) + "🎙")
        #expect(edge.reason == Array(String(repeating: "a", count: 253).utf8))
        // Control characters (a terminal escape, a newline) are not passed on as such; a code
        // this version does not know reads as an internal error.
        let hostile = try SignalMessage.decode(SignalMessage.failed(9, code: 40_000, reason: "\u{1B}[2Jgone\nnow").encoded())
        #expect(VoiceCallMachine.RemoteFailure(hostile) == .init(code: .internalError, reason: "\u{FFFD}[2Jgone\u{FFFD}now"))
    }

    @Test func badFailedMessagesAreMalformed() throws {
        let good = SignalMessage.failed(5, code: 32005, reason: "abc").encoded()
        #expect(throws: SignalDecodingError.malformed(callID: 5)) { try SignalMessage.decode(Array(good.dropLast())) }
        #expect(throws: SignalDecodingError.malformed(callID: 5)) { try SignalMessage.decode(good + [0x61]) }
        #expect(throws: SignalDecodingError.malformed(callID: 5)) { try SignalMessage.decode(Array(good.prefix(SignalMessage.headerSize + 2))) }
        var invalidUTF8 = good
        invalidUTF8[invalidUTF8.count - 1] = 0xC3
        #expect(throws: SignalDecodingError.malformed(callID: 5)) { try SignalMessage.decode(invalidUTF8) }
    }
}
