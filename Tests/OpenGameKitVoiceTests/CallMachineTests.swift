import GameKitTransport
import GameKitTraversal
import NIOCore
import Testing

@testable import OpenGameKitVoice

/// Every signalling path of PROTOCOL §17.2, both sides, in virtual time.
@Suite("Voice call signalling")
struct CallMachineTests {
    @Test("Invite, automatic acceptance, connection: both sides start once")
    func establish() throws {
        var h = CallHarness()
        try h.establish()
        #expect(h.events[0] == ["didStart bob"])
        #expect(h.events[1] == ["invited alice", "didStart alice"])
        #expect(h.sent[0].map(\.kind) == [.invite, .ready] && h.sent[1].map(\.kind) == [.accept, .ready])
        #expect(h.audioRuns == [1, 1])
        guard case .connect(7, let keyFromBob, let fromBob, true)? = h.connects[0].first,
            case .connect(7, let keyFromAlice, let fromAlice, false)? = h.connects[1].first
        else { Issue.record("connects \(h.connects)"); return }
        #expect(keyFromBob == [UInt8](repeating: 2, count: 32) && keyFromAlice == [UInt8](repeating: 1, count: 32))
        #expect(fromBob.first?.address == TraversalAddress("10.0.0.2", port: 4000) && fromAlice.first?.address == TraversalAddress("10.0.0.1", port: 4000))
        #expect(h.machines[0].call?.phase == .connected(.direct))
    }

    @Test("Declined: the inviter hears 32011")
    func declined() throws {
        var h = CallHarness()
        h.manualAnswers = true
        try h.start(0, callID: 7)
        h.flush()
        #expect(h.events[1] == ["invited alice"])
        h.apply(h.machines[1].deny(7), side: 1)
        h.flush()
        #expect(h.events[0] == ["didNotStart bob 32011"])
        #expect(h.machines[0].call == nil && h.machines[1].call == nil && h.tearDowns == [1, 1])
    }

    @Test("Busy: an invitation during another call is answered 32008; that call goes on")
    func busy() throws {
        var h = CallHarness()
        _ = try h.machines[1].start("carol", callID: 50, now: h.now)
        try h.start(0, callID: 7)
        h.flush()
        #expect(h.events[0] == ["didNotStart bob 32008"])
        #expect(h.machines[1].call?.participant == "carol")
    }

    @Test("Cancelled: the invitee hears 32009, the inviter's client didStop with no error")
    func cancelled() throws {
        var h = CallHarness()
        h.manualAnswers = true
        try h.start(0, callID: 7)
        h.flush()
        h.apply(h.machines[0].stop("bob"), side: 0)
        h.flush()
        #expect(h.events[0] == ["didStop bob nil"])
        #expect(h.events[1] == ["invited alice", "didNotStart alice 32009"])
        #expect(throws: GKVoiceChatServiceError(.invalidCallIDError)) { _ = try h.machines[1].accept(7, now: h.now) }
    }

    /// A call starts when both sides' audio devices are open, and not before: each side says
    /// ready once its own are, and runs its audio (the client hears didStart) when it knows the
    /// other's are too. Whichever side's devices fail, and whenever (before or after the other's
    /// are open, before or after its path is found), both hear "did not start", the failing side
    /// 32005 and the other 32002 with the cause; no audio runs on either.
    @Test("Audio that cannot start: 32005 here, 32002 with the cause there, every order; no audio runs",
          arguments: [0, 1], [false, true])
    func audioUnavailable(failing: Int, otherOpensFirst: Bool) throws {
        var h = CallHarness()
        h.holdAudio = [true, true]
        try h.start(0, callID: 7)
        h.flush()
        h.apply(h.machines[1].connected(.direct, now: h.now), side: 1)
        h.apply(h.machines[0].connected(.direct, now: h.now), side: 0)
        let other = CallHarness.other(failing)
        if otherOpensFirst {
            h.openAudio(other)
            h.flush()
        }
        h.openAudio(failing, fails: true)
        h.flush()
        if !otherOpensFirst {
            h.openAudio(other)
            h.flush()
        }
        let names = CallHarness.names
        #expect(h.events[failing].last == "didNotStart \(names[other]) 32005")
        #expect(h.events[other].last == "didNotStart \(names[failing]) 32002 (32005: no device)")
        #expect(!h.events.joined().contains { $0.hasPrefix("didStart") || $0.hasPrefix("didStop") })
        #expect(h.audioRuns == [0, 0])
        #expect(Array(h.sent[failing].map(\.kind).suffix(2)) == [.failed, .hangUp])
        #expect(!h.sent[failing].contains { $0.kind == .ready })
        #expect(h.machines[0].call == nil && h.machines[1].call == nil)
    }

    /// Devices that open at different times: neither side starts before both are open, and
    /// both start on the message that completes it (a signalling trip apart at most).
    @Test("Neither side starts before both sides' devices are open", arguments: [0, 1])
    func startsWhenBothAreReady(late: Int) throws {
        var h = CallHarness()
        h.holdAudio = [true, true]
        try h.start(0, callID: 7)
        h.flush()
        h.connectBoth()
        let early = CallHarness.other(late)
        h.openAudio(early)
        h.flush()
        h.advance(.seconds(3))
        #expect(h.audioRuns == [0, 0])
        #expect(!h.events.joined().contains { $0.hasPrefix("didStart") })
        h.openAudio(late)
        // The late side knows the early one is ready: it starts at once; the early side on its
        // ready message.
        #expect(h.audioRuns[late] == 1 && h.audioRuns[early] == 0)
        h.flush()
        #expect(h.audioRuns == [1, 1])
        #expect(h.events[0] == ["didStart bob"] && h.events[1] == ["invited alice", "didStart alice"])
    }

    /// A ready message may come before this side's own checks found the path (the other side's
    /// did first): it is kept, and this side starts as soon as its own devices are open.
    @Test("A ready message that comes while this side still checks is kept")
    func readyBeforeThisSidesPath() throws {
        var h = CallHarness()
        try h.start(0, callID: 7)
        h.flush()
        h.apply(h.machines[1].connected(.direct, now: h.now), side: 1)
        h.flush()
        #expect(h.sent[1].last?.kind == .ready && h.audioRuns == [0, 0])
        h.apply(h.machines[0].connected(.direct, now: h.now), side: 0)
        #expect(h.audioRuns[0] == 1)
        h.flush()
        #expect(h.audioRuns == [1, 1])
    }

    /// A side that predates ready messages (0.1.x) runs its audio as soon as its devices open
    /// and never says ready: its first media counts instead.
    @Test("Media from a side that never says ready counts as its ready")
    func mediaCountsAsReady() throws {
        var h = CallHarness()
        try h.start(0, callID: 7)
        h.flush()
        h.deliverSignalling = false
        h.connectBoth()
        #expect(h.audioRuns == [0, 0])
        h.apply(h.machines[0].mediaArrived(viaClient: false, now: h.now), side: 0)
        #expect(h.audioRuns == [1, 0])
        #expect(h.events[0] == ["didStart bob"])
    }

    @Test("Hang-up: the other side hears 32003")
    func hangUp() throws {
        var h = CallHarness()
        try h.establish()
        h.apply(h.machines[1].stop("alice"), side: 1)
        h.flush()
        #expect(h.events[0].last == "didStop bob 32003")
        #expect(h.events[1].last == "didStop alice nil")
        #expect(h.machines[0].call == nil && h.machines[1].call == nil)
    }

    @Test("Unsupported version: an answer of version 9, or an invite of version 9, ends in 32014")
    func unsupportedVersion() throws {
        var h = CallHarness()
        h.manualAnswers = true
        try h.start(0, callID: 7)
        h.flush()
        var future = SignalMessage.bare(.deny, 7).encoded()
        future[2] = 9
        h.inject(future, into: 0)
        #expect(h.events[0] == ["didNotStart bob 32014"])
        #expect(h.sent[0].map(\.kind) == [.invite, .unsupportedVersion, .cancel])

        // The other direction: bob sees an invitation of version 9 and says so; alice (a
        // version-9 speaker in this story, inviting) gets 32014 from that answer.
        var g = CallHarness()
        g.deliverSignalling = false
        try g.start(0, callID: 8)
        var invite = g.sent[0][0].encoded()
        invite[2] = 9
        g.inject(invite, into: 1)
        #expect(g.sent[1].map(\.kind) == [.unsupportedVersion] && g.sent[1][0].callID == 8)
        #expect(g.machines[1].call == nil && g.events[1].isEmpty)
        g.inject(g.sent[1][0].encoded(), into: 0)
        #expect(g.events[0] == ["didNotStart bob 32014"])
    }

    @Test("Invalid response: garbage or a truncated accept ends the invitation with 32010")
    func invalidResponse() throws {
        for blob in [[UInt8](repeating: 0xAB, count: 40), Array(SignalMessage.accept(7, keyShare: [UInt8](repeating: 3, count: 32), candidates: []).encoded().dropLast(5))] {
            var h = CallHarness()
            h.manualAnswers = true
            try h.start(0, callID: 7)
            h.flush()
            h.inject(blob, into: 0)
            #expect(h.events[0] == ["didNotStart bob 32010"])
            h.flush()
            #expect(h.events[1] == ["invited alice", "didNotStart alice 32009"])
        }
    }

    @Test("Garbage while idle or in a call is ignored and counted")
    func garbageIgnored() throws {
        var h = CallHarness()
        h.inject([1, 2, 3], into: 1)
        h.inject(SignalMessage.bare(.hangUp, 99).encoded(), into: 1)
        #expect(h.machines[1].call == nil && h.machines[1].ignoredMessages == 2 && h.sent[1].isEmpty)
        try h.establish()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            var blob = (0..<Int.random(in: 0...600, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if blob.count > 8, Bool.random(using: &generator) { blob.replaceSubrange(0..<3, with: [0x47, 0x4B, 1]) }
            h.inject(blob, into: 1)
        }
        #expect(h.machines[1].call?.phase == .connected(.direct) && h.events[1] == ["invited alice", "didStart alice"])
    }

    @Test("Call IDs: unknown is 32004, accepting twice is 32012, starting during a call is 32012")
    func invalidCalls() throws {
        var h = CallHarness()
        h.manualAnswers = true
        #expect(throws: GKVoiceChatServiceError(.invalidCallIDError)) { _ = try h.machines[1].accept(999, now: h.now) }
        try h.start(0, callID: 7)
        h.flush()
        _ = try h.machines[1].accept(7, now: h.now)
        #expect(throws: GKVoiceChatServiceError(.methodCurrentlyInvalidError)) { _ = try h.machines[1].accept(7, now: h.now) }
        #expect(throws: GKVoiceChatServiceError(.methodCurrentlyInvalidError)) { try h.start(0, callID: 9) }
        #expect(throws: GKVoiceChatServiceError(.methodCurrentlyInvalidError)) { _ = try h.machines[1].start("carol", callID: 9, now: h.now) }
        #expect(h.machines[1].deny(12345).isEmpty)
    }

    @Test("Starting a chat with someone whose invitation waits accepts it")
    func startAccepts() throws {
        var h = CallHarness()
        h.manualAnswers = true
        try h.start(0, callID: 7)
        h.flush()
        try h.start(1, callID: 55)
        h.flush()
        h.connectBoth()
        h.flush()
        #expect(h.events[0] == ["didStart bob"] && h.events[1] == ["invited alice", "didStart alice"])
    }

    @Test("An unanswered invitation fails with 32002 after the timeout, and is cancelled")
    func unanswered() throws {
        var h = CallHarness()
        h.deliverSignalling = false
        try h.start(0, callID: 7)
        h.advance(.seconds(29))
        #expect(h.events[0].isEmpty)
        h.advance(.seconds(1))
        #expect(h.events[0] == ["didNotStart bob 32002"] && h.sent[0].map(\.kind) == [.invite, .cancel])

        // An invitation the invitee's application never answers ends there too.
        var g = CallHarness()
        g.manualAnswers = true
        try g.start(0, callID: 7)
        g.flush()
        g.advance(.seconds(30))
        #expect(g.events[1] == ["invited alice", "didNotStart alice 32002"])
    }

    @Test("No path and no client channel: 32002 on both sides")
    func noPath() throws {
        var h = CallHarness()
        try h.start(0, callID: 7)
        h.flush()
        h.advance(.seconds(3))
        #expect(h.clientPathTried == [1, 1])
        h.apply(h.machines[0].clientPath(available: false, now: h.now), side: 0)
        h.flush()
        #expect(h.events[0] == ["didNotStart bob 32002"])
        #expect(h.events[1] == ["invited alice", "didNotStart alice 32002"])
    }

    @Test("Fallback: the client's channel carries the call; the other side follows the first media")
    func fallback() throws {
        var h = CallHarness()
        try h.start(0, callID: 7)
        h.flush()
        h.apply(h.machines[1].pathFailed(now: h.now), side: 1)
        h.apply(h.machines[1].clientPath(available: true, now: h.now), side: 1)
        #expect(h.machines[1].call?.phase == .connected(.client))
        // Alice's checks are still running when bob's first media arrives through the client.
        h.apply(h.machines[0].mediaArrived(viaClient: true, now: h.now), side: 0)
        #expect(h.machines[0].call?.phase == .connected(.client))
        // Alice starts at once (bob's media says his devices are open); bob on her ready.
        #expect(h.events[0] == ["didStart bob"] && h.events[1] == ["invited alice"])
        h.flush()
        #expect(h.events[1] == ["invited alice", "didStart alice"])
        #expect(h.clientPathUsed == [1, 1])
        // A late check result no longer changes the path.
        h.apply(h.machines[0].connected(.direct, now: h.now), side: 0)
        #expect(h.machines[0].call?.phase == .connected(.client))
    }

    @Test("A side on a UDP path follows the other onto the client's channel; an unanswered probe ends the call")
    func followAndProbeTimeout() throws {
        var h = CallHarness()
        try h.establish()
        h.apply(h.machines[1].mediaArrived(viaClient: true, now: h.now), side: 1)
        #expect(h.machines[1].call?.phase == .connected(.client) && h.clientPathUsed == [0, 1])
        #expect(h.events[1] == ["invited alice", "didStart alice"])

        var g = CallHarness()
        try g.start(0, callID: 7)
        g.flush()
        g.advance(.milliseconds(2500))
        #expect(g.clientPathTried == [1, 1])
        g.advance(.seconds(2))
        g.flush()
        #expect(g.events[0] == ["didNotStart bob 32002"])
    }

    @Test("Media stopping ends a running chat with 32001 on both sides; media keeps it alive")
    func mediaStopped() throws {
        var h = CallHarness()
        try h.establish()
        for _ in 0..<5 {
            h.advance(.seconds(9))
            for side in 0..<2 { h.apply(h.machines[side].mediaArrived(viaClient: false, now: h.now), side: side) }
        }
        #expect(h.machines[0].call != nil)
        h.advance(.seconds(10))
        h.flush()
        #expect(h.events[0].last == "didStop bob 32001" && h.events[1].last == "didStop alice 32001")
    }

    @Test("Glare: both invite at once and exactly one call results, whichever ID is larger")
    func glare() throws {
        for (aliceID, bobID) in [(7, 9), (9, 7), (5, 5)] as [(UInt32, UInt32)] {
            var h = CallHarness()
            h.deliverSignalling = true
            try h.start(0, callID: aliceID)
            try h.start(1, callID: bobID)
            h.flush()
            #expect(h.connects[0].count == 1 && h.connects[1].count == 1, "\(aliceID)/\(bobID)")
            guard case .connect(let idA, _, _, let initiatorA)? = h.connects[0].first,
                case .connect(let idB, _, _, let initiatorB)? = h.connects[1].first
            else { continue }
            #expect(idA == idB && initiatorA != initiatorB)
            h.connectBoth()
            h.flush()
            #expect(h.events[0].filter { $0.hasPrefix("didStart") } == ["didStart bob"])
            #expect(h.events[1].filter { $0.hasPrefix("didStart") } == ["didStart alice"])
            #expect(!h.events.joined().contains { $0.hasPrefix("didNotStart") || $0.hasPrefix("invited") })
        }
    }

    @Test("Glare while one side is still gathering also ends in one call")
    func glareWhileGathering() throws {
        var h = CallHarness()
        h.holdGathering = true
        try h.start(0, callID: 3)
        try h.start(1, callID: 4)
        h.completeGathering(1)   // bob's invite (ID 4, the winner) goes out first
        h.flush()
        h.completeGathering(0)   // alice answers it with what she gathered
        h.flush()
        #expect(h.connects[0].count == 1 && h.connects[1].count == 1)
        h.connectBoth()
        h.flush()
        #expect(h.events[0] == ["didStart bob"] && h.events[1] == ["didStart alice"])
    }

    @Test("Trickle: candidates learnt later reach the other side's checks, or its first message")
    func trickle() throws {
        var h = CallHarness()
        h.manualAnswers = true
        try h.start(0, callID: 7)
        h.flush()
        let srflxA = ICECandidate(kind: .serverReflexive, address: TraversalAddress("203.0.113.1", port: 9)!)
        let relayB = ICECandidate(kind: .relayed, address: TraversalAddress("203.0.113.2", port: 10)!)
        // Alice's invite is out: her new candidate is trickled; bob keeps it for his checks.
        h.apply(h.machines[0].moreCandidates([srflxA]), side: 0)
        // Bob has not accepted yet: his new candidate goes into his accept.
        h.apply(h.machines[1].moreCandidates([relayB]), side: 1)
        h.flush()
        #expect(h.sent[0].map(\.kind) == [.invite, .candidates] && h.sent[1].isEmpty)
        h.apply(try h.machines[1].accept(7, now: h.now), side: 1)
        h.flush()
        guard case .connect(_, _, let aliceSees, true)? = h.connects[0].first,
            case .connect(_, _, let bobSees, false)? = h.connects[1].first
        else { Issue.record("connects \(h.connects)"); return }
        #expect(aliceSees.contains(relayB) && bobSees.contains(srflxA))
        // Once connecting, a trickled candidate goes straight to the running checks.
        let late = ICECandidate(kind: .serverReflexive, address: TraversalAddress("203.0.113.3", port: 11)!)
        h.apply(h.machines[1].moreCandidates([late]), side: 1)
        h.flush()
        #expect(h.trickled[0] == [late])
    }

    @Test("A glare loser answers with every candidate it has, the trickled ones and past 16 too")
    func glareLoserKeepsCandidates() throws {
        var h = CallHarness()
        h.deliverSignalling = false
        try h.start(0, callID: 3)   // alice loses to bob's 9
        try h.start(1, callID: 9)
        let late = (0..<20).map { ICECandidate(kind: .serverReflexive, address: TraversalAddress("198.51.100.\($0 + 1)", port: 7)!) }
        h.apply(h.machines[0].moreCandidates(late), side: 0)
        h.inject(h.sent[1][0].encoded(), into: 0)
        let answer = h.sent[0].filter { $0.callID == 9 }
        #expect(answer.first?.kind == .accept && answer.first?.candidates.count == SignalMessage.maximumCandidates)
        let carried = answer.flatMap(\.candidates).map(\.address)
        #expect(late.allSatisfy { carried.contains($0.address) } && answer.dropFirst().allSatisfy { $0.kind == .candidates })
    }

    @Test("Messages: round trips, at most 512 bytes with many candidates, junk refused")
    func codec() throws {
        let many = (0..<40).map { ICECandidate(kind: .relayed, address: TraversalAddress("2001:db8::\($0 + 1)", port: 1000)!, priority: UInt32($0)) }
        let invite = SignalMessage.invite(77, keyShare: [UInt8](repeating: 9, count: 32), candidates: many)
        let bytes = invite.encoded()
        #expect(bytes.count <= SignalMessage.maximumSize)
        let decoded = try SignalMessage.decode(bytes)
        #expect(decoded.candidates.count == SignalMessage.maximumCandidates && decoded.candidates.first?.priority == 39)
        let trickle = SignalMessage.candidates(77, many)
        #expect(try SignalMessage.decode(trickle.encoded()).candidates.count == SignalMessage.maximumCandidates)
        #expect(trickle.encoded().count <= SignalMessage.maximumSize)
        for kind in SignalMessage.Kind.allCases where kind != .invite && kind != .accept && kind != .candidates {
            #expect(try SignalMessage.decode(SignalMessage.bare(kind, 5).encoded()) == .bare(kind, 5))
        }
        #expect(throws: SignalDecodingError.notSignalling) { try SignalMessage.decode([0x47]) }
        #expect(throws: SignalDecodingError.notSignalling) { try SignalMessage.decode([UInt8](repeating: 0x47, count: 600)) }
        #expect(throws: SignalDecodingError.malformed(callID: 0)) { try SignalMessage.decode(SignalMessage.bare(.deny, 0).encoded()) }
        #expect(throws: SignalDecodingError.malformed(callID: 5)) { try SignalMessage.decode(SignalMessage.bare(.deny, 5).encoded() + [0]) }
        var unknownKind = SignalMessage.bare(.deny, 5).encoded()
        unknownKind[3] = 99
        #expect(throws: SignalDecodingError.malformed(callID: 5)) { try SignalMessage.decode(unknownKind) }
    }
}
