import GameKitTransport
import GameKitTraversal
import NIOCore

@testable import OpenGameKitVoice

/// Two call machines ("alice" and "bob") wired back to back in virtual time: signalling is
/// delivered (or held, or dropped), gathering completes at once, connectivity is decided by the
/// test; every client callback is recorded per side.
struct CallHarness {
    static let names = ["alice", "bob"]
    var machines: [VoiceCallMachine]
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    /// Client callbacks, e.g. "didStart bob", "didNotStart alice 32011", "invited alice".
    var events: [[String]] = [[], []]
    /// Signalling in flight, per receiving side.
    var inFlight: [[[UInt8]]] = [[], []]
    /// Every message each side sent.
    var sent: [[SignalMessage]] = [[], []]
    var connects: [[VoiceCallMachine.Action]] = [[], []]
    /// Candidates each side was told to add to its running checks.
    var trickled: [[ICECandidate]] = [[], []]
    var tearDowns = [0, 0]
    /// Times each side was told to run its audio.
    var audioRuns = [0, 0]
    var clientPathTried = [0, 0]
    var clientPathUsed = [0, 0]
    /// Invitations are answered by the test (else accepted at once, as without a handler).
    var manualAnswers = false
    var deliverSignalling = true
    var holdGathering = false
    /// The audio devices of a side fail to open.
    var audioFails = [false, false]
    /// A side's devices take their time: they open (or fail) when the test says
    /// (``openAudio(_:fails:)``).
    var holdAudio = [false, false]
    var nextCallID: UInt32 = 100

    init(timing: VoiceCallMachine.Timing = .init()) {
        self.machines = [VoiceCallMachine(timing: timing), VoiceCallMachine(timing: timing)]
    }

    static func other(_ side: Int) -> Int { 1 - side }

    mutating func apply(_ actions: [VoiceCallMachine.Action], side: Int) {
        for action in actions {
            switch action {
            case .gather:
                if !self.holdGathering { self.completeGathering(side) }
            case .send(let message, _):
                self.sent[side].append(message)
                if self.deliverSignalling { self.inFlight[Self.other(side)].append(message.encoded()) }
            case .askClient(let participant, let callID):
                self.events[side].append("invited \(participant)")
                if !self.manualAnswers { self.apply(try! self.machines[side].accept(callID, now: self.now), side: side) }
            case .connect:
                self.connects[side].append(action)
            case .addRemoteCandidates(let candidates):
                self.trickled[side] += candidates
            case .tryClientPath:
                self.clientPathTried[side] += 1
            case .useClientPath:
                self.clientPathUsed[side] += 1
            case .startMedia:
                if !self.holdAudio[side] { self.openAudio(side, fails: self.audioFails[side]) }
            case .runAudio:
                self.audioRuns[side] += 1
            case .didStart(let participant):
                self.events[side].append("didStart \(participant)")
            case .didNotStart(let participant, let error, let remote):
                self.events[side].append("didNotStart \(participant) \(Self.describe(error, remote))")
            case .didStop(let participant, let error, let remote):
                self.events[side].append("didStop \(participant) \(Self.describe(error, remote))")
            case .tearDown:
                self.tearDowns[side] += 1
            }
        }
    }

    /// "32011", "nil", or "32002 (32005: no device)" when the other side said why it failed.
    static func describe(_ error: GKVoiceChatServiceError.Code?, _ remote: VoiceCallMachine.RemoteFailure?) -> String {
        let code = error.map { String($0.rawValue) } ?? "nil"
        guard let remote else { return code }
        return "\(code) (\(remote.code.rawValue): \(remote.reason))"
    }

    mutating func completeGathering(_ side: Int) {
        let address = TraversalAddress("10.0.0.\(side + 1)", port: 4000)!
        let actions = self.machines[side].gathered(candidates: [ICECandidate(kind: .host, address: address)],
                                                   keyShare: [UInt8](repeating: UInt8(side + 1), count: 32), now: self.now)
        self.apply(actions, side: side)
    }

    /// Delivers signalling until none is in flight.
    mutating func flush() {
        var rounds = 0
        while rounds < 50, let side = self.inFlight.indices.first(where: { !self.inFlight[$0].isEmpty }) {
            rounds += 1
            let bytes = self.inFlight[side].removeFirst()
            self.inject(bytes, into: side)
        }
    }

    mutating func inject(_ bytes: [UInt8], into side: Int) {
        self.nextCallID += 1
        let actions = self.machines[side].receive(bytes, from: Self.names[Self.other(side)], localParticipant: Self.names[side],
                                                  callID: self.nextCallID, now: self.now)
        self.apply(actions, side: side)
    }

    mutating func start(_ side: Int, callID: UInt32) throws(GKVoiceChatServiceError) {
        let actions = try self.machines[side].start(Self.names[Self.other(side)], callID: callID, now: self.now)
        self.apply(actions, side: side)
    }

    /// Both sides' checks found `path`.
    mutating func connectBoth(_ path: RealTimePath = .direct) {
        for side in 0..<2 { self.apply(self.machines[side].connected(path, now: self.now), side: side) }
    }

    mutating func advance(_ amount: TimeAmount) {
        self.now = self.now + amount
        for side in 0..<2 { self.apply(self.machines[side].handleTimeout(now: self.now), side: side) }
    }

    /// Starts a call from alice and connects it.
    mutating func establish() throws {
        try self.start(0, callID: 7)
        self.flush()
        self.connectBoth()
        self.flush()
    }

    /// A side's held devices (``holdAudio``) open now, or fail to.
    mutating func openAudio(_ side: Int, fails: Bool = false) {
        if fails {
            self.apply(self.machines[side].setUpFailed(.audioUnavailableError, reason: "no device"), side: side)
        } else {
            self.apply(self.machines[side].audioReady(), side: side)
        }
    }
}
