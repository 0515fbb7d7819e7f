import Foundation
import NIOCore
import OpenGameKit

extension GKVoiceChatService {
    /// What happened to a chat, as ``events`` gives it (a Swift-only addition). The client hears
    /// the same things through its methods.
    public enum Event: Sendable, Equatable {
        /// The participant invites the local user: answer with ``accept(callID:)``,
        /// ``acceptCallID(_:)`` or ``denyCallID(_:)``. The client's invitation method is called
        /// too; its default implementation accepts.
        case invitation(participantID: String, callID: Int)
        /// The chat with the participant started: audio flows.
        case started(participantID: String)
        /// The chat with the participant could not be set up, and why.
        case notStarted(participantID: String, error: GKVoiceChatServiceError)
        /// The chat with the participant ended; no error when the local side stopped it.
        case stopped(participantID: String, error: GKVoiceChatServiceError?)
    }

    /// Every chat's invitations, starts and ends from now on, as an `AsyncSequence` (a
    /// Swift-only addition), in the order the service decided them. Each access makes a new
    /// sequence; events wait in it until read. Iterating ends when the reading task is cancelled.
    public var events: AsyncStream<Event> {
        self.eventSubscribers.makeStream()
    }

    /// Invites `participantID` and returns once the chat has started: connected, with the audio
    /// running (a Swift-only addition; ``startVoiceChat(withParticipantID:)`` returns at once and
    /// the client hears the outcome, as it does for this call too). Inviting someone whose
    /// invitation is waiting accepts it.
    ///
    /// - Throws: what ``startVoiceChat(withParticipantID:)`` throws; the ``GKVoiceChatServiceError``
    ///   the chat failed with (declined, busy, no path, audio devices, or the other side's
    ///   own failure, in words); `CancellationError` when the task is cancelled (the chat is
    ///   stopped, and the other side hears it was cancelled) or when
    ///   ``stopVoiceChat(withParticipantID:)`` ends the chat before it starts.
    public func startVoiceChat(with participantID: String) async throws {
        let participantID = try self.checkedParticipant(participantID)
        let callID = UInt32.random(in: 1...UInt32.max)
        try await self.waitForStart(participantID) { machine, now throws(GKVoiceChatServiceError) in
            try machine.start(participantID, callID: callID, now: now)
        }
    }

    /// Accepts the invitation `callID` and returns once the chat has started (a Swift-only
    /// addition; ``acceptCallID(_:)`` returns at once).
    ///
    /// - Throws: what ``acceptCallID(_:)`` throws; the ``GKVoiceChatServiceError`` the chat
    ///   failed with; `CancellationError` when the task is cancelled (the chat is stopped, and
    ///   the other side hears a hang-up) or when ``stopVoiceChat(withParticipantID:)`` ends
    ///   the chat before it starts.
    public func accept(callID: Int) async throws {
        guard let id = UInt32(exactly: callID) else { throw GKVoiceChatServiceError(.invalidCallIDError, "No invitation has call ID \(callID).") }
        let participant = self.currentParticipantID ?? ""
        try await self.waitForStart(participant) { machine, now throws(GKVoiceChatServiceError) in
            try machine.accept(id, now: now)
        }
    }

    /// Runs `step` (which begins or accepts a chat) and waits for that chat's outcome.
    private func waitForStart(
        _ participant: String, _ step: @escaping (inout VoiceCallMachine, NIODeadline) throws(GKVoiceChatServiceError) -> [VoiceCallMachine.Action]
    ) async throws {
        try Task.checkCancellation()
        let token = self.lock.withLock { self.state.waiting.newToken() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // The waiter is parked in the same locked step that begins the chat, so it hears
                // that chat's outcome and no other's.
                var parked = true
                var generation = 0
                do {
                    try self.perform(step) { state in
                        generation = state.generation
                        parked = state.waiting.park(token, generation: generation, continuation)
                    }
                } catch {
                    self.lock.withLock { self.state.waiting.discard(token) }
                    continuation.resume(throwing: error)
                    return
                }
                if !parked {
                    // Cancelled while the chat began: it is stopped at once.
                    continuation.resume(throwing: CancellationError())
                    self.stopChat(ofGeneration: generation, participant: participant)
                }
            }
        } onCancel: {
            let waiter = self.lock.withLock { self.state.waiting.cancel(token) }
            guard let waiter else { return }
            waiter.continuation.resume(throwing: CancellationError())
            self.stopChat(ofGeneration: waiter.generation, participant: participant)
        }
    }

    /// Stops the chat of `generation` if it is still the current one.
    private func stopChat(ofGeneration generation: Int, participant: String) {
        self.perform(ifCurrent: generation) { machine, _ in machine.stop(machine.call?.participant ?? participant) }
    }
}

/// The async face's state, kept under the service's lock: event subscribers, and calls waiting
/// for a chat to start.
struct AsyncWaiting {
    struct Waiter {
        var generation: Int
        var continuation: CheckedContinuation<Void, any Error>
    }

    private var waiters: [UInt64: Waiter] = [:]
    /// Tokens of calls that have not parked yet, and whether their task was cancelled.
    private var unparked: [UInt64: Bool] = [:]
    private var nextToken: UInt64 = 0

    /// A token for a call that will park.
    mutating func newToken() -> UInt64 {
        self.nextToken += 1
        self.unparked[self.nextToken] = false
        return self.nextToken
    }

    /// Forgets a call that did not park (its step threw).
    mutating func discard(_ token: UInt64) {
        self.unparked[token] = nil
    }

    /// Parks a waiting call; false if its task was cancelled already.
    mutating func park(_ token: UInt64, generation: Int, _ continuation: CheckedContinuation<Void, any Error>) -> Bool {
        guard self.unparked.removeValue(forKey: token) == false else { return false }
        self.waiters[token] = Waiter(generation: generation, continuation: continuation)
        return true
    }

    /// The waiter of a cancelled task, if it was parked and not yet resumed; a call not yet
    /// parked is marked, and finds out when it parks.
    mutating func cancel(_ token: UInt64) -> Waiter? {
        if self.unparked[token] != nil {
            self.unparked[token] = true
            return nil
        }
        return self.waiters.removeValue(forKey: token)
    }

    /// Publishes an outcome of the chat of `generation` to `subscribers` (under the service's
    /// lock, which keeps the machine's order; a reader's termination takes the subscribers' own)
    /// and hands back the resumptions of the calls waiting for it (run them outside the lock).
    mutating func publishLocked(
        _ action: VoiceCallMachine.Action, error: GKVoiceChatServiceError?, generation: Int, to subscribers: StreamSubscribers<GKVoiceChatService.Event>
    ) -> [() -> Void] {
        let event: GKVoiceChatService.Event
        let outcome: Result<Void, any Error>?
        switch action {
        case .askClient(let participant, let callID):
            event = .invitation(participantID: participant, callID: Int(callID))
            outcome = nil
        case .didStart(let participant):
            event = .started(participantID: participant)
            outcome = .success(())
        case .didNotStart(let participant, _, _):
            let failure = error ?? GKVoiceChatServiceError(.internalError)
            event = .notStarted(participantID: participant, error: failure)
            outcome = .failure(failure)
        case .didStop(let participant, _, _):
            event = .stopped(participantID: participant, error: error)
            outcome = .failure(error ?? CancellationError())
        default:
            return []
        }
        subscribers.yield([event])
        guard let outcome else { return [] }
        let resumed = self.waiters.filter { $0.value.generation == generation }
        for token in resumed.keys { self.waiters[token] = nil }
        return resumed.values.map { waiter in { waiter.continuation.resume(with: outcome) } }
    }
}
