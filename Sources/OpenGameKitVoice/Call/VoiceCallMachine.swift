import GameKitTransport
import GameKitTraversal
import NIOCore

/// The call state machine of a voice chat service (PROTOCOL §17.2), sans-I/O: it takes the
/// application's calls, signalling messages, the media connection's outcomes and the time, and
/// returns ``Action``s for its driver. One call at a time: an invitation while another call is
/// set up or running is answered "busy".
struct VoiceCallMachine: Sendable {
    struct Timing: Sendable, Equatable {
        /// An invitation unanswered this long fails with 32002 (and is cancelled).
        var invitationTimeout: TimeAmount = .seconds(30)
        /// Connectivity checks that have found no path this long give way to the client's
        /// real-time channel, or fail with 32002.
        var pathTimeout: TimeAmount = .milliseconds(2500)
        /// A started call with no media this long ends with 32001.
        var mediaTimeout: TimeAmount = .seconds(10)
    }

    enum Phase: Equatable, Sendable {
        /// Outgoing: gathering candidates; the invitation is not sent yet.
        case preparing
        /// Outgoing: invitation sent, waiting for the answer.
        case inviting
        /// Incoming: waiting for the application to accept or deny.
        case invited
        /// Incoming, accepted: the answer goes out once candidates are gathered.
        case answering
        /// Both key shares known: connectivity checks run.
        case connecting
        /// Checks found no path; asking whether the client's real-time channel can carry media.
        case fallingBack
        /// Media flows on `path`.
        case connected(RealTimePath)
    }

    struct Call: Sendable, Equatable {
        var participant: String
        var callID: UInt32
        var outgoing: Bool
        var phase: Phase
        var deadline: NIODeadline?
        var remoteKey: [UInt8] = []
        var remoteCandidates: [ICECandidate] = []
        /// This side's audio devices are open (its ready message went out).
        var audioReady = false
        /// The other side's are: its ready message came, or its media (a side that predates
        /// ready messages runs its audio as soon as its devices open).
        var remoteReady = false
        /// Both were: the audio runs and the client heard `didStart`.
        var started = false
        /// Whether this side's invite or accept went out (later candidates are trickled).
        var announced: Bool {
            switch self.phase {
            case .preparing, .invited, .answering: return false
            case .inviting: return true
            case .connecting, .fallingBack, .connected: return true
            }
        }
    }

    /// The other side's own account of why it could not go on (a failed message): its error
    /// code and its reason, with control characters replaced.
    struct RemoteFailure: Equatable, Sendable {
        var code: GKVoiceChatServiceError.Code
        var reason: String

        init(code: GKVoiceChatServiceError.Code, reason: String) {
            self.code = code
            self.reason = reason
        }

        init(_ message: SignalMessage) {
            self.code = GKVoiceChatServiceError.Code(rawValue: Int(message.failureCode)) ?? .internalError
            let text = String(decoding: message.reason, as: UTF8.self)
            self.reason = String(String.UnicodeScalarView(text.unicodeScalars.map {
                $0.properties.generalCategory == .control ? "\u{FFFD}" : $0
            }))
        }
    }

    enum Action: Equatable, Sendable {
        /// Prepare this side's media connection: gather candidates, make a key share, then call
        /// ``gathered(candidates:keyShare:now:)``.
        case gather
        case send(SignalMessage, to: String)
        /// Let the client decide (its invitation handler, or automatic acceptance).
        case askClient(participant: String, callID: UInt32)
        /// Start connectivity checks with the other side's key share and candidates.
        case connect(callID: UInt32, remoteKey: [UInt8], remoteCandidates: [ICECandidate], initiator: Bool)
        /// The other side trickled more candidates: add them to the running checks.
        case addRemoteCandidates([ICECandidate])
        /// Ask whether the client has a real-time channel; answer with
        /// ``clientPath(available:now:)``.
        case tryClientPath
        /// Media goes through the client's real-time channel from now on.
        case useClientPath
        /// A path was found: open the audio devices and make the engine, without running them
        /// yet, then call ``audioReady()`` (or ``setUpFailed(_:reason:)``).
        case startMedia(RealTimePath)
        /// Both sides' devices are open: run the audio (speech flows from now).
        case runAudio
        case didStart(String)
        /// The chat with the participant could not be set up, for the code's reason; `remote`
        /// when the other side said why it failed.
        case didNotStart(String, GKVoiceChatServiceError.Code?, remote: RemoteFailure? = nil)
        /// The chat ended: no code when this side stopped it.
        case didStop(String, GKVoiceChatServiceError.Code?, remote: RemoteFailure? = nil)
        /// Close the media connection and stop the audio.
        case tearDown
    }

    let timing: Timing
    /// How long the client's real-time channel may take to answer the probe.
    static let fallbackAnswerTimeout = TimeAmount.seconds(2)
    private(set) var call: Call?
    private var gathered: (candidates: [ICECandidate], keyShare: [UInt8])?
    /// Blobs that were not signalling, or were stale or out of place.
    private(set) var ignoredMessages = 0
    private var actions: [Action] = []

    init(timing: Timing = .init()) {
        self.timing = timing
    }

    private mutating func take() -> [Action] {
        defer { self.actions.removeAll() }
        return self.actions
    }

    // MARK: - The application

    /// `startVoiceChat(withParticipantID:)`. Starting a chat with someone whose invitation is
    /// waiting accepts it.
    mutating func start(_ participant: String, callID: UInt32, now: NIODeadline) throws(GKVoiceChatServiceError) -> [Action] {
        if let call = self.call {
            guard call.participant == participant, call.phase == .invited else { throw GKVoiceChatServiceError(.methodCurrentlyInvalidError) }
            return try self.accept(call.callID, now: now)
        }
        self.call = Call(participant: participant, callID: callID, outgoing: true, phase: .preparing)
        self.gathered = nil
        self.actions.append(.gather)
        return self.take()
    }

    /// `acceptCallID(_:)`.
    mutating func accept(_ callID: UInt32, now: NIODeadline) throws(GKVoiceChatServiceError) -> [Action] {
        guard var call = self.call, call.callID == callID, !call.outgoing else { throw GKVoiceChatServiceError(.invalidCallIDError) }
        guard call.phase == .invited else { throw GKVoiceChatServiceError(.methodCurrentlyInvalidError) }
        call.phase = .answering
        call.deadline = nil
        self.call = call
        self.answerIfReady(now: now)
        return self.take()
    }

    /// `denyCallID(_:)`: nothing happens for a call ID that is not a waiting invitation.
    mutating func deny(_ callID: UInt32) -> [Action] {
        guard let call = self.call, call.callID == callID, call.phase == .invited else { return [] }
        self.actions.append(.send(.bare(.deny, callID), to: call.participant))
        self.end()
        return self.take()
    }

    /// `stopVoiceChat(withParticipantID:)`: the other side hears cancel (invitation not yet
    /// answered), deny (invitation not yet accepted here) or hang-up; this side's client hears
    /// `didStop` with no error.
    mutating func stop(_ participant: String) -> [Action] {
        guard let call = self.call, call.participant == participant else { return [] }
        switch call.phase {
        case .preparing: break
        case .inviting: self.actions.append(.send(.bare(.cancel, call.callID), to: participant))
        case .invited: self.actions.append(.send(.bare(.deny, call.callID), to: participant))
        case .answering, .connecting, .fallingBack, .connected: self.actions.append(.send(.bare(.hangUp, call.callID), to: participant))
        }
        self.actions.append(.didStop(participant, nil))
        self.end()
        return self.take()
    }

    // MARK: - The media connection

    /// This side's candidates and key share are ready.
    mutating func gathered(candidates: [ICECandidate], keyShare: [UInt8], now: NIODeadline) -> [Action] {
        self.gathered = (candidates, keyShare)
        guard var call = self.call else { return [] }
        if call.phase == .preparing {
            call.phase = .inviting
            call.deadline = now + self.timing.invitationTimeout
            self.call = call
            self.sendFirst(.invite, call, keyShare: keyShare, candidates: candidates)
        } else {
            self.answerIfReady(now: now)
        }
        return self.take()
    }

    private mutating func answerIfReady(now: NIODeadline) {
        guard var call = self.call, call.phase == .answering, let gathered = self.gathered else { return }
        call.phase = .connecting
        call.deadline = now + self.timing.pathTimeout
        self.call = call
        self.sendFirst(.accept, call, keyShare: gathered.keyShare, candidates: gathered.candidates)
        self.actions.append(.connect(callID: call.callID, remoteKey: call.remoteKey, remoteCandidates: call.remoteCandidates, initiator: false))
    }

    /// The media connection learnt more local candidates: trickled to the other side once this
    /// side's invite or accept is out, else kept for it.
    mutating func moreCandidates(_ candidates: [ICECandidate]) -> [Action] {
        guard let call = self.call, !candidates.isEmpty else { return [] }
        // Kept in any case: a glare loser answers the winner's invite with everything it has.
        self.gathered?.candidates += candidates
        if call.announced { self.trickle(candidates, call) }
        return self.take()
    }

    /// Candidates messages for `candidates`, 16 at a time.
    private mutating func trickle(_ candidates: [ICECandidate], _ call: Call) {
        for start in stride(from: 0, to: candidates.count, by: SignalMessage.maximumCandidates) {
            let chunk = Array(candidates[start..<min(candidates.count, start + SignalMessage.maximumCandidates)])
            self.actions.append(.send(.candidates(call.callID, chunk), to: call.participant))
        }
    }

    /// An invite or accept carries the best 16 candidates; the rest follow in candidates messages.
    private mutating func sendFirst(_ kind: SignalMessage.Kind, _ call: Call, keyShare: [UInt8], candidates: [ICECandidate]) {
        let sorted = candidates.sorted { $0.priority > $1.priority }
        let first = Array(sorted.prefix(SignalMessage.maximumCandidates))
        let message = kind == .invite
            ? SignalMessage.invite(call.callID, keyShare: keyShare, candidates: first)
            : SignalMessage.accept(call.callID, keyShare: keyShare, candidates: first)
        self.actions.append(.send(message, to: call.participant))
        self.trickle(Array(sorted.dropFirst(SignalMessage.maximumCandidates)), call)
    }

    /// A path was chosen: by the checks (direct or relayed, only while connecting), or the
    /// client's channel (while connecting or falling back).
    mutating func connected(_ path: RealTimePath, now: NIODeadline) -> [Action] {
        guard var call = self.call,
            call.phase == .connecting || (path == .client && call.phase == .fallingBack)
        else { return [] }
        call.phase = .connected(path)
        call.deadline = now + self.timing.mediaTimeout
        self.call = call
        if path == .client { self.actions.append(.useClientPath) }
        self.actions.append(.startMedia(path))
        return self.take()
    }

    /// This side's audio devices are open: the other side hears it (a ready message), and the
    /// audio runs once the other side's are open too.
    mutating func audioReady() -> [Action] {
        guard var call = self.call, case .connected = call.phase, !call.audioReady else { return [] }
        call.audioReady = true
        self.actions.append(.send(.bare(.ready, call.callID), to: call.participant))
        self.runIfBothReady(&call)
        self.call = call
        return self.take()
    }

    /// Both sides' devices are open: the audio runs on both within a signalling message's trip
    /// of each other, and the client hears `didStart`. A device failure on either side before
    /// this is "did not start" on both (the failing side never says ready).
    private mutating func runIfBothReady(_ call: inout Call) {
        guard case .connected = call.phase, call.audioReady, call.remoteReady, !call.started else { return }
        call.started = true
        self.actions += [.runAudio, .didStart(call.participant)]
    }

    /// Every candidate pair failed before the path timeout.
    mutating func pathFailed(now: NIODeadline) -> [Action] {
        guard var call = self.call, call.phase == .connecting else { return [] }
        call.phase = .fallingBack
        // The client's answer comes through the delegate queue; should it never come (no client
        // any more, a blocked queue), the call ends as if there were no channel.
        call.deadline = now + Self.fallbackAnswerTimeout
        self.call = call
        self.actions.append(.tryClientPath)
        return self.take()
    }

    /// Whether the client's real-time channel carries media.
    mutating func clientPath(available: Bool, now: NIODeadline) -> [Action] {
        guard let call = self.call, call.phase == .fallingBack else { return [] }
        if available { return self.connected(.client, now: now) }
        self.actions += [.send(.bare(.noPath, call.callID), to: call.participant), .didNotStart(call.participant, .unableToConnectError)]
        self.end()
        return self.take()
    }

    /// Media arrived (any path): the call is alive. Media through the client's channel while
    /// still checking means the other side fell back first: follow it.
    mutating func mediaArrived(viaClient: Bool, now: NIODeadline) -> [Action] {
        guard var call = self.call else { return [] }
        if viaClient, call.phase == .connecting || call.phase == .fallingBack {
            let actions = self.connected(.client, now: now)
            // It came from the other side's running audio: its devices are open.
            self.call?.remoteReady = true
            return actions
        }
        guard case .connected(let path) = call.phase else { return [] }
        if viaClient, path != .client {
            // The other side gave up on UDP (it stopped answering checks): follow it.
            call.phase = .connected(.client)
            self.actions.append(.useClientPath)
        }
        call.deadline = now + self.timing.mediaTimeout
        // Its audio runs, so its devices are open (what its ready message says; a side that
        // predates ready messages sends none).
        call.remoteReady = true
        self.runIfBothReady(&call)
        self.call = call
        return self.take()
    }

    /// This side could not set the chat up (no socket, an invalid key share, no audio device):
    /// the other side hears why (a failed message with `reason`), then, for a receiver that
    /// predates failed messages, what it would have heard before: cancel, deny, no path or hang-up.
    mutating func setUpFailed(_ error: GKVoiceChatServiceError.Code, reason: String) -> [Action] {
        guard let call = self.call else { return [] }
        if call.phase != .preparing {
            self.actions.append(.send(.failed(call.callID, code: error.rawValue, reason: reason), to: call.participant))
        }
        switch call.phase {
        case .preparing: break
        case .inviting: self.actions.append(.send(.bare(.cancel, call.callID), to: call.participant))
        case .invited, .answering: self.actions.append(.send(.bare(.deny, call.callID), to: call.participant))
        case .connecting, .fallingBack: self.actions.append(.send(.bare(.noPath, call.callID), to: call.participant))
        case .connected: self.actions.append(.send(.bare(.hangUp, call.callID), to: call.participant))
        }
        self.actions.append(call.started ? .didStop(call.participant, error) : .didNotStart(call.participant, error))
        self.end()
        return self.take()
    }

    /// The chosen path stopped answering consent checks.
    mutating func mediaLost() -> [Action] {
        guard let call = self.call, case .connected = call.phase else { return [] }
        self.actions += [
            .send(.bare(.noPath, call.callID), to: call.participant),
            call.started ? .didStop(call.participant, .noRemotePacketsError) : .didNotStart(call.participant, .noRemotePacketsError),
        ]
        self.end()
        return self.take()
    }

    // MARK: - Time

    var nextDeadline: NIODeadline? { self.call?.deadline }

    mutating func handleTimeout(now: NIODeadline) -> [Action] {
        guard let call = self.call, let deadline = call.deadline, now >= deadline else { return [] }
        switch call.phase {
        case .inviting:
            self.actions += [.send(.bare(.cancel, call.callID), to: call.participant), .didNotStart(call.participant, .unableToConnectError)]
            self.end()
        case .invited:
            self.actions.append(.didNotStart(call.participant, .unableToConnectError))
            self.end()
        case .connecting:
            return self.pathFailed(now: now)
        case .connected:
            return self.mediaLost()
        case .fallingBack:
            return self.clientPath(available: false, now: now)
        case .preparing, .answering:
            break
        }
        return self.take()
    }

    // MARK: - Signalling

    /// A blob from `participant`'s `receivedData`; `localParticipant` breaks invitation ties.
    mutating func receive(_ bytes: [UInt8], from participant: String, localParticipant: String, callID newCallID: UInt32, now: NIODeadline) -> [Action] {
        let message: SignalMessage
        do {
            message = try SignalMessage.decode(bytes)
        } catch .unsupportedVersion(_, let callID, let kind) {
            if kind != SignalMessage.Kind.unsupportedVersion.rawValue {
                self.actions.append(.send(SignalMessage(kind: .unsupportedVersion, callID: max(callID, 1)), to: participant))
            }
            self.failInvitation(from: participant, callID: callID, .unsupportedRemoteVersionError)
            return self.take()
        } catch .malformed(let callID) {
            self.failInvitation(from: participant, callID: callID, .remoteParticipantResponseInvalidError)
            return self.take()
        } catch {
            self.failInvitation(from: participant, callID: nil, .remoteParticipantResponseInvalidError)
            return self.take()
        }
        self.handle(message, from: participant, localParticipant: localParticipant, now: now)
        return self.take()
    }

    /// An answer that cannot be understood ends this side's invitation to `participant`
    /// (matching `callID` when known); anything else is ignored.
    private mutating func failInvitation(from participant: String, callID: UInt32?, _ error: GKVoiceChatServiceError.Code) {
        guard let call = self.call, call.participant == participant, call.phase == .inviting,
            callID == nil || callID == call.callID
        else {
            self.ignoredMessages += 1
            return
        }
        self.actions += [.send(.bare(.cancel, call.callID), to: participant), .didNotStart(participant, error)]
        self.end()
    }

    private mutating func handle(_ message: SignalMessage, from participant: String, localParticipant: String, now: NIODeadline) {
        if message.kind == .invite {
            return self.invited(message, from: participant, localParticipant: localParticipant, now: now)
        }
        guard var call = self.call, call.participant == participant, call.callID == message.callID else {
            self.ignoredMessages += 1
            return
        }
        switch (message.kind, call.phase) {
        case (.accept, .inviting):
            call.phase = .connecting
            call.deadline = now + self.timing.pathTimeout
            self.call = call
            self.actions.append(.connect(callID: call.callID, remoteKey: message.keyShare, remoteCandidates: message.candidates, initiator: true))
        case (.candidates, .invited), (.candidates, .answering):
            call.remoteCandidates += message.candidates
            self.call = call
        case (.candidates, .connecting), (.candidates, .fallingBack), (.candidates, .connected):
            self.actions.append(.addRemoteCandidates(message.candidates))
        case (.ready, .connecting), (.ready, .fallingBack), (.ready, .connected):
            // Its checks may have found the path before this side's did.
            call.remoteReady = true
            self.runIfBothReady(&call)
            self.call = call
        case (.deny, .inviting): self.fail(.remoteParticipantDeclinedInviteError)
        case (.busy, .inviting): self.fail(.remoteParticipantBusyError)
        case (.unsupportedVersion, .inviting): self.fail(.unsupportedRemoteVersionError)
        case (.failed, _):
            let remote = RemoteFailure(message)
            if call.started {
                self.actions.append(.didStop(call.participant, .remoteParticipantHangupError, remote: remote))
            } else {
                self.actions.append(.didNotStart(call.participant, .unableToConnectError, remote: remote))
            }
            self.end()
        case (.cancel, _), (.hangUp, _), (.noPath, _):
            let error: GKVoiceChatServiceError.Code
            switch message.kind {
            case .cancel: error = call.started ? .remoteParticipantHangupError : .remoteParticipantCancelledError
            case .hangUp: error = .remoteParticipantHangupError
            default: error = call.started ? .noRemotePacketsError : .unableToConnectError
            }
            self.fail(error)
        default:
            self.ignoredMessages += 1
        }
    }

    private mutating func fail(_ error: GKVoiceChatServiceError.Code) {
        guard let call = self.call else { return }
        self.actions.append(call.started ? .didStop(call.participant, error) : .didNotStart(call.participant, error))
        self.end()
    }

    private mutating func invited(_ message: SignalMessage, from participant: String, localParticipant: String, now: NIODeadline) {
        guard let call = self.call else {
            self.call = Call(participant: participant, callID: message.callID, outgoing: false, phase: .invited,
                             deadline: now + self.timing.invitationTimeout, remoteKey: message.keyShare, remoteCandidates: message.candidates)
            self.gathered = nil
            self.actions += [.gather, .askClient(participant: participant, callID: message.callID)]
            return
        }
        guard call.participant == participant else {
            self.actions.append(.send(.bare(.busy, message.callID), to: participant))
            return
        }
        if !call.outgoing && call.callID == message.callID {
            // The same invitation again.
            self.ignoredMessages += 1
            return
        }
        guard call.outgoing, call.phase == .preparing || call.phase == .inviting else {
            self.actions.append(.send(.bare(.busy, message.callID), to: participant))
            return
        }
        // Both invited each other: the larger (call ID, participant ID) wins on both sides.
        let mineWins = (call.callID, localParticipant) > (message.callID, participant)
        if mineWins {
            self.ignoredMessages += 1
            return
        }
        // Theirs wins: answer it as if accepted (this side wanted the call anyway), reusing the
        // media connection already being prepared.
        self.call = Call(participant: participant, callID: message.callID, outgoing: false, phase: .answering,
                         remoteKey: message.keyShare, remoteCandidates: message.candidates)
        self.answerIfReady(now: now)
    }

    private mutating func end() {
        self.actions.append(.tearDown)
        self.call = nil
        self.gathered = nil
    }
}
