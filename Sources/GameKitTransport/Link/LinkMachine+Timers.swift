@_spi(Machine) import GameKitMachine
import NIOCore

extension LinkMachine {
    /// The earliest time `handleTimeout` has something to do, or nil.
    var nextDeadline: NIODeadline? {
        var deadline: NIODeadline?
        switch self.state {
        case .closed:
            return nil
        case .draining(let until, _):
            return until
        case .awaitingConfirmation(let confirmBy):
            return confirmBy
        case .closing(_, let flushBy):
            deadline = deadline.earliest(flushBy)
        case .open:
            if self.needsKeepalive {
                deadline = deadline.earliest(self.lastSendTime + self.parameters.keepaliveInterval)
            }
        }
        deadline = deadline.earliest(self.lastReceiveTime + self.parameters.disconnectTimeout)
        deadline = deadline.earliest(self.failoverDeadline)
        deadline = deadline.earliest(self.retransmissionDeadline)
        deadline = deadline.earliest(self.probeDeadline)
        deadline = deadline.earliest(self.lossDeadline)
        deadline = deadline.earliest(self.pacingDeadline)
        deadline = deadline.earliest(self.ackTracker.deadline)
        deadline = deadline.earliest(self.reassembler.nextExpiry)
        return deadline
    }

    /// A keepalive is due only on an idle link: with packets in flight the loss probes and the
    /// retransmission timer already make the peer answer, and a PING already queued is waiting for
    /// the window (its deadline must not stay in the past, or the timer would fire without end).
    var needsKeepalive: Bool {
        !self.pendingPing && !self.hasOutstandingAckElicitingPackets
    }

    /// Runs every timer that is due at `now`.
    mutating func handleTimeout(now: NIODeadline) {
        switch self.state {
        case .closed:
            return
        case .draining(let until, _):
            if now >= until { self.state = .closed }
            return
        case .awaitingConfirmation(let confirmBy):
            if now >= confirmBy {
                self.terminate(reason: .handshakeNotConfirmed, now: now)
            }
            return
        case .closing(let code, let flushBy):
            if now >= flushBy {
                self.finishClosing(code: code, reason: .closedLocally(code: code), now: now)
                return
            }
        case .open:
            break
        }
        if now >= self.lastReceiveTime + self.parameters.disconnectTimeout {
            // Tell the peer too, in case only its direction broke.
            self.finishClosing(code: timeoutCloseCode, reason: .timedOut, now: now)
            return
        }
        if let deadline = self.failoverDeadline, now >= deadline {
            self.failOver(now: now)
        }
        if let deadline = self.lossDeadline, now >= deadline {
            self.detectLosses(now: now)
            self.pruneSentLog(now: now)
        }
        if let deadline = self.retransmissionDeadline, now >= deadline {
            self.probeDeadline = nil
            self.onRetransmissionTimeout(now: now)
        } else if let deadline = self.probeDeadline, now >= deadline {
            self.onTailLossProbeTimeout()
        }
        if let deadline = self.pacingDeadline, now >= deadline {
            self.pacingDeadline = nil
        }
        if self.state == .open, self.needsKeepalive, now >= self.lastSendTime + self.parameters.keepaliveInterval {
            self.pendingPing = true
        }
        self.reassembler.expire(now: now)
    }

    /// RFC 8985 §7.3: send one probe past the congestion window: new data when there is some,
    /// else the last outstanding reliable chunk again (or a PING). Nothing is declared lost and
    /// the window is untouched; the probe's acknowledgement lets ordinary loss detection decide.
    private mutating func onTailLossProbeTimeout() {
        self.probeDeadline = nil
        guard self.hasOutstandingAckElicitingPackets else { return }
        self.tailProbeOutstanding = true
        self.probePending = true
        self.statistics.tailLossProbes += 1
        let hasNewData = self.sendStream.hasUnsentData && self.sendStream.sendOffset < self.peerStreamLimit
        if !hasNewData, self.unreliableQueue.isEmpty {
            if let range = self.sentLog.newestOutstandingStreamRange {
                self.sendStream.declareLost(range)
            } else {
                self.pendingPing = true
            }
        }
    }

    /// RFC 6298 (5.4–5.7): send the earliest unacknowledged data again (or a PING when only
    /// unreliable data or probes are out), double the timeout, and restart from the minimum window
    /// (RFC 5681). Only that one packet is presumed lost; the acknowledgements that follow the probe
    /// decide about the others, so a timeout caused by a slow peer rather than loss costs one packet
    /// (and the window is given back, see ``CubicCongestionController/onAcknowledgementAfterTimeout(originalTransmissionAcknowledged:)``).
    private mutating func onRetransmissionTimeout(now: NIODeadline) {
        self.retransmissionDeadline = nil
        guard self.hasOutstandingAckElicitingPackets else { return }
        self.statistics.retransmissionTimeouts += 1
        self.retransmissionBackoff += 1
        if !self.congestion.isRecoveringFromTimeout {
            self.timeoutEpisodeStart = now
        }
        self.congestion.onRetransmissionTimeout(now: now)
        if let index = self.sentLog.indexOfOldestOutstandingReliablePacket {
            self.declareLost(at: index, now: now, byTimer: true)
        } else {
            self.pendingPing = true
        }
        self.probePending = true
        self.pruneSentLog(now: now)
    }
}
