import GameKitTransport
import NIOCore

/// The async face's waits: for room in a send buffer, and for a connection being opened. A call
/// tries its step under the lock; when the step cannot succeed yet, it parks a continuation that
/// the event it waits for (room on a link, a peer's state change or failure, the session's end,
/// the task's cancellation) resumes, and tries again.
extension SessionCore {
    /// A parked call.
    struct Waiter {
        /// Links whose room it waits for.
        var links: [LinkID]
        /// Peers whose connection it waits for.
        var peers: Set<UInt32>
        var continuation: CheckedContinuation<WaitOutcome, Never>
    }

    /// What a call on a closed session, or one waiting when it closes, fails with.
    static var closedError: GKSessionError {
        GKSessionError(.notConnectedError, "The session is closed: make a new one to connect again.")
    }

    enum WaitOutcome: Sendable {
        case done
        case failed(GKSessionError)
        case cancelled
        case retry
    }

    /// What a step found.
    enum StepResult {
        /// Finished.
        case done
        /// Not yet: wait for room on these links.
        case waitForRoom([LinkID])
        /// Not yet: wait for these peers' connections to open or fail.
        case waitForConnection(Set<UInt32>)
    }

    /// Runs `step` under the lock until it is done, parking in between; throws what the step
    /// throws, `GKSessionError(.notConnectedError)` when the session closes while it waits, and
    /// `CancellationError` as soon as the calling task is cancelled.
    func waitFor(_ step: @escaping (inout SessionMachine) throws(GKSessionError) -> StepResult) async throws {
        while true {
            let id = self.lock.withLock { () -> UInt64 in
                self.nextWaiter += 1
                return self.nextWaiter
            }
            let outcome: WaitOutcome = await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    // Resumed with the lock released, as every continuation here: the task's
                    // cancellation handler (below) takes the lock while Swift holds the task's
                    // status lock, and a resume waits for that status lock.
                    let immediate = self.lock.withLock { () -> WaitOutcome? in
                        if Task.isCancelled { return .cancelled }
                        guard self.phase != .closed else { return .failed(SessionCore.closedError) }
                        do throws(GKSessionError) {
                            let result = try step(&self.machine)
                            self.flushLocked()
                            switch result {
                            case .done:
                                return .done
                            case _ where self.phase == .closed:
                                return .failed(SessionCore.closedError)
                            case .waitForRoom(let links):
                                self.waiters[id] = Waiter(links: links, peers: [], continuation: continuation)
                                return nil
                            case .waitForConnection(let peers):
                                self.waiters[id] = Waiter(links: [], peers: peers, continuation: continuation)
                                return nil
                            }
                        } catch {
                            // What the step did before it threw is passed on now, not at the next cycle.
                            self.flushLocked()
                            return .failed(error)
                        }
                    }
                    self.resumeWokenWaiters()
                    if let immediate { continuation.resume(returning: immediate) }
                }
            } onCancel: {
                let waiter = self.lock.withLock { self.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(returning: .cancelled)
            }
            switch outcome {
            case .done: return
            case .failed(let error): throw error
            case .cancelled: throw CancellationError()
            case .retry: continue
            }
        }
    }

    /// The calls waiting for room on `link` (it has room, or it closed), taken out.
    func takeRoomWaitersLocked(for link: LinkID) -> [CheckedContinuation<WaitOutcome, Never>] {
        let keys = self.waiters.filter { $0.value.links.contains(link) }.map(\.key)
        return keys.compactMap { self.waiters.removeValue(forKey: $0)?.continuation }
    }

    /// Wakes (for ``resumeWokenWaiters()``, after the lock) the calls waiting for a connection
    /// that these notifications settle: a failed
    /// attempt fails them with its error (wherever in the batch the failure is: the peer's
    /// state change may come first); any other change of the peer's state makes them look again.
    func resumeConnectionWaitersLocked(after notifications: [SessionNotification], failures: [UInt32: GKSessionError]) {
        guard self.waiters.values.contains(where: { !$0.peers.isEmpty }) else { return }
        var changed: Set<UInt32> = []
        for case .peerChanged(let peer, _) in notifications { changed.insert(peer) }
        for (key, waiter) in self.waiters where !waiter.peers.isEmpty {
            if let failure = waiter.peers.lazy.compactMap({ failures[$0] }).first {
                self.waiters[key] = nil
                self.wokenWaiters.append((waiter.continuation, .failed(failure)))
            } else if !waiter.peers.isDisjoint(with: changed) {
                self.waiters[key] = nil
                self.wokenWaiters.append((waiter.continuation, .retry))
            }
        }
    }

    /// Resumes the waiters a flush woke, with the lock released (call it after unlocking): a
    /// waiting task's cancellation handler takes the lock while Swift holds that task's status
    /// lock, which a resume waits for, so a resume under the lock could wait for ever.
    func resumeWokenWaiters() {
        let woken = self.lock.withLock { () -> [(CheckedContinuation<WaitOutcome, Never>, WaitOutcome)] in
            defer { self.wokenWaiters = [] }
            return self.wokenWaiters
        }
        for (continuation, outcome) in woken { continuation.resume(returning: outcome) }
    }
}
