import NIOConcurrencyHelpers
import NIOCore

/// The rendezvous's TCP streams under ``StreamAdmission``: admits or closes each new stream,
/// notes its frames, and every second closes those silent too long. All calls come from the
/// listener's event loop; the lock is for ``statistics``, read from anywhere.
final class StreamGate: Sendable {
    private struct State {
        var admission: StreamAdmission
        var channels: [UInt64: Channel] = [:]
    }

    private let state: NIOLockedValueBox<State>
    private let sweep = NIOLockedValueBox<RepeatedTask?>(nil)

    init(limits: StreamLimits) {
        self.state = NIOLockedValueBox(State(admission: StreamAdmission(limits: limits)))
    }

    /// The limits in force (the total fitted to the process's file descriptors).
    var limits: StreamLimits { self.state.withLockedValue { $0.admission.limits } }

    /// What the gate counted.
    var statistics: StreamStatistics { self.state.withLockedValue { $0.admission.statistics } }

    /// Admits `channel` from `source` (its id), closing a stream that made room for it; nil,
    /// with `channel` closed, when it is refused.
    func admit(_ channel: Channel, from source: SocketAddress) -> UInt64? {
        let (admission, evicted) = self.state.withLockedValue { state -> (StreamAdmission.Admission, Channel?) in
            let admission = state.admission.admit(source, now: .now())
            guard case .accepted(let id, let evicting) = admission else { return (admission, nil) }
            state.channels[id] = channel
            return (admission, evicting.flatMap { state.channels.removeValue(forKey: $0) })
        }
        evicted?.close(promise: nil)
        guard case .accepted(let id, _) = admission else {
            channel.close(promise: nil)
            return nil
        }
        return id
    }

    /// Stream `id` delivered a frame.
    func framed(_ id: UInt64) {
        self.state.withLockedValue { $0.admission.framed(id, now: .now()) }
    }

    /// Stream `id` closed.
    func closed(_ id: UInt64) {
        self.state.withLockedValue { state in
            state.admission.closed(id)
            state.channels[id] = nil
        }
    }

    /// Closes the streams silent too long, every second, on `eventLoop`.
    func start(on eventLoop: EventLoop) {
        let task = eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [self] _ in
            let expired = self.state.withLockedValue { state in
                state.admission.expire(now: .now()).compactMap { state.channels.removeValue(forKey: $0) }
            }
            for channel in expired { channel.close(promise: nil) }
        }
        self.sweep.withLockedValue { $0 = task }
    }

    /// Stops the sweep.
    func stop() {
        self.sweep.withLockedValue { $0?.cancel() }
    }
}
