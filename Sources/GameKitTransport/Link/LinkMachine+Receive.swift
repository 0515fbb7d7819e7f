import NIOCore

/// The application code sent in the CLOSE frame when the peer broke the protocol.
let protocolViolationCloseCode: UInt16 = 0xFFFF

extension LinkMachine {
    /// What became of a received data packet.
    enum ReceiveOutcome: Equatable {
        case accepted
        /// A replay or duplicate: dropped by the replay window before decryption.
        case duplicate
        /// Did not authenticate: dropped.
        case unauthenticated
    }

    // MARK: - Packets

    /// Authenticates, decrypts and processes one data packet from `address`.
    mutating func receive(
        datagram: ByteBuffer,
        header: DataPacketHeader,
        from address: SocketAddress,
        now: NIODeadline
    ) -> ReceiveOutcome {
        if self.state == .closed { return .unauthenticated }
        let packetNumber = header.packetNumber
        guard self.replayWindow.isFresh(packetNumber) else {
            self.statistics.duplicatePacketsDropped += 1
            return .duplicate
        }
        guard let plaintext = self.opener.open(datagram) else {
            return .unauthenticated
        }
        self.replayWindow.record(packetNumber)
        self.lastReceiveTime = now
        self.unansweredSince = nil
        self.statistics.packetsReceived += 1
        self.statistics.datagramBytesReceived += UInt64(datagram.readableBytes)
        // An authenticated packet from a new address means the peer moved (NAT rebinding).
        if address != self.remoteAddress {
            self.remoteAddress = address
        }
        switch self.state {
        case .awaitingConfirmation:
            self.state = .open
            if let sentAt = self.responseSentAt {
                // The response went out once and the initiator answered it at once: a first sample.
                self.rtt.addSample(now - sentAt, ackDelay: .zero)
            }
            self.events.append(.confirmed)
        case .draining(let until, let answerWithClose):
            self.absorbWhileDraining(plaintext, until: until, answerWithClose: answerWithClose)
            return .accepted
        case .closed:
            return .accepted
        case .open, .closing:
            break
        }
        self.processFrames(plaintext, packetNumber: packetNumber, now: now)
        return .accepted
    }

    /// A closed link answers a late packet with CLOSE, unless the packet is itself a CLOSE (so that
    /// two sides closing at once do not answer each other forever).
    private mutating func absorbWhileDraining(_ plaintext: ByteBuffer, until: NIODeadline, answerWithClose: Bool) {
        var reader = FrameReader(plaintext)
        while let frame = try? reader.next() {
            if case .close = frame {
                self.state = .draining(until: until, answerWithClose: false)
                self.pendingClose = nil
                return
            }
        }
        if answerWithClose {
            self.pendingClose = self.closeCodeForAnswers
            self.closeCopiesLeft = max(self.closeCopiesLeft, 1)
        }
    }

    private mutating func processFrames(_ plaintext: ByteBuffer, packetNumber: UInt64, now: NIODeadline) {
        var reader = FrameReader(plaintext)
        var isAckEliciting = false
        do {
            while let frame = try reader.next() {
                switch frame {
                case .ping:
                    isAckEliciting = true
                case .ack(let ack):
                    guard self.processAck(ack, now: now) else {
                        self.abort(code: protocolViolationCloseCode, reason: .protocolViolation("acknowledgement of a packet never sent"), now: now)
                        return
                    }
                case .reliable(let offset, let data):
                    isAckEliciting = true
                    try self.receiveStream.receive(offset: offset, data: data)
                    while let message = self.receiveStream.nextMessage() {
                        self.statistics.reliableMessagesReceived += 1
                        self.statistics.messageBytesReceived += UInt64(message.readableBytes)
                        self.events.append(.message(message, .reliable))
                    }
                case .unreliable(let message):
                    isAckEliciting = true
                    if message.readableBytes <= self.parameters.maxUnreliableReceiveSize {
                        self.deliverUnreliable(message)
                    } else {
                        self.oversizedUnreliableDropped += 1
                    }
                case .unreliableFragment(let fragment):
                    isAckEliciting = true
                    if let message = self.reassembler.receive(fragment, now: now) {
                        self.deliverUnreliable(message)
                    }
                case .window(let maxOffset):
                    isAckEliciting = true
                    self.peerStreamLimit = max(self.peerStreamLimit, maxOffset)
                case .close(let code):
                    self.terminate(reason: .closedByPeer(code: code), now: now)
                    return
                }
            }
        } catch let error as FrameDecodingError {
            self.abort(code: protocolViolationCloseCode, reason: .protocolViolation("malformed frame: \(error)"), now: now)
            return
        } catch let error as ReceiveStreamError {
            self.abort(code: protocolViolationCloseCode, reason: .protocolViolation("reliable stream: \(error)"), now: now)
            return
        } catch {
            preconditionFailure("unexpected error \(error)")
        }
        self.ackTracker.onPacketReceived(packetNumber, isAckEliciting: isAckEliciting, now: now, maxAckDelay: self.parameters.maxAckDelay)
        if self.receiveStream.windowUpdate() != nil {
            self.pendingWindowUpdate = true
        }
    }

    private mutating func deliverUnreliable(_ message: ByteBuffer) {
        self.statistics.unreliableMessagesReceived += 1
        self.statistics.messageBytesReceived += UInt64(message.readableBytes)
        self.events.append(.message(message, .unreliable))
    }

    // MARK: - Acknowledgements

    /// Applies an ACK frame: RTT sample, acknowledged data, congestion window growth, loss
    /// detection. Returns false when it acknowledges a packet never sent.
    private mutating func processAck(_ ack: AckFrame, now: NIODeadline) -> Bool {
        let largest = ack.largest
        guard largest < self.nextPacketNumber else { return false }

        if let index = self.sentLog.index(of: largest) {
            let packet = self.sentLog[index]
            if packet.state == .outstanding {
                let delay = TimeAmount.microseconds(Int64(min(ack.ackDelayMicroseconds, 1_000_000)))
                self.rtt.addSample(now - packet.timeSent, ackDelay: min(delay, self.parameters.peerMaxAckDelay))
                self.lossEvidence.onRTTSample(self.rtt.latestAdjusted, now: now, smoothedRTT: self.rtt.smoothedOrInitial)
                self.congestion.onRTTSample(self.rtt.latestAdjusted, timeSent: packet.timeSent, now: now)
            }
        }

        var released = 0
        var newlyAcknowledged = false
        var acknowledgedOriginal = false
        var acknowledgedCount = 0
        let previousLargest = self.largestAcknowledged
        let smoothedRTT = self.rtt.smoothedOrInitial
        for range in ack.ranges {
            var index = self.sentLog.firstIndex(notBelow: range.lowerBound)
            while index < self.sentLog.count, self.sentLog[index].packetNumber <= range.upperBound {
                defer { index += 1 }
                var packet = self.sentLog[index]
                switch packet.state {
                case .acknowledged:
                    continue
                case .lost:
                    // Declared lost too early (reordering): its data may still be queued for
                    // sending again; a reduction it caused may be undone; the reordering window
                    // widens.
                    packet.state = .acknowledged
                    acknowledgedOriginal = acknowledgedOriginal || self.isOriginalOfTimeoutEpisode(packet)
                    self.onSpuriousLoss(packet, now: now)
                case .outstanding:
                    packet.state = .acknowledged
                    acknowledgedOriginal = acknowledgedOriginal || self.isOriginalOfTimeoutEpisode(packet)
                    newlyAcknowledged = true
                    acknowledgedCount += 1
                    if let previousLargest, packet.packetNumber < previousLargest { self.reorderingSeen = true }
                    self.congestion.onPacketAcknowledged(bytes: packet.size, timeSent: packet.timeSent, now: now, smoothedRTT: smoothedRTT)
                }
                self.sentLog[index] = packet
                if let streamRange = packet.streamRange {
                    released += self.sendStream.acknowledge(streamRange)
                }
            }
        }
        self.largestAcknowledged = max(self.largestAcknowledged ?? 0, largest)
        if acknowledgedCount > 0 { self.lossEvidence.onAcknowledged(packets: acknowledgedCount, now: now, smoothedRTT: smoothedRTT) }
        if self.congestion.isRecoveringFromTimeout, newlyAcknowledged || acknowledgedOriginal {
            // Eifel detection (RFC 3522): the first acknowledgement after a timeout covers a
            // packet sent before it, so the timeout was spurious.
            self.congestion.onAcknowledgementAfterTimeout(originalTransmissionAcknowledged: acknowledgedOriginal)
            self.timeoutEpisodeStart = nil
        }
        self.detectLosses(now: now)
        self.congestion.onAcknowledgementsProcessed()
        self.pruneSentLog(now: now)
        if newlyAcknowledged {
            // RFC 6298 (5.3): new data acknowledged restarts the timer, and the back-off ends.
            self.retransmissionBackoff = 0
            self.retransmissionDeadline = self.hasOutstandingAckElicitingPackets ? now + self.currentRetransmissionTimeout : nil
            self.tailProbeOutstanding = false
            self.armTailLossProbe(now: now)
        }
        self.release(released)
        return true
    }

    var hasOutstandingAckElicitingPackets: Bool { self.congestion.bytesInFlight > 0 }

    /// Whether acknowledging `packet` proves the current timeout episode spurious: it left before
    /// the first timeout. (Only ack-eliciting packets are logged; acknowledgements of
    /// acknowledgement-only packets would say nothing about the data path.)
    private func isOriginalOfTimeoutEpisode(_ packet: SentPacket) -> Bool {
        guard let start = self.timeoutEpisodeStart else { return false }
        return packet.timeSent < start
    }

    /// Forgets packets no longer of interest; a lost packet is kept for four smoothed RTTs
    /// after it was sent, so that a late acknowledgement can still prove its loss spurious.
    mutating func pruneSentLog(now: NIODeadline) {
        let keep = max(self.rtt.smoothedOrInitial, self.rtt.latest) * 4
        self.sentLog.pruneFront(lostBefore: now - keep)
    }

    /// A packet declared lost was acknowledged after all.
    private mutating func onSpuriousLoss(_ packet: SentPacket, now: NIODeadline) {
        self.statistics.spuriousLosses += 1
        if packet.lostToCongestion { self.congestion.onSpuriousLoss(timeSent: packet.timeSent) }
        // A timeout's late acknowledgement means a slow path (its undo is §8.4's), not reordering.
        guard !packet.lostByTimer else { return }
        self.reorderingSeen = true
        let smoothed = self.rtt.smoothedOrInitial
        if self.reorderWindowRaised.map({ now >= $0 + smoothed }) ?? true {
            self.reorderWindowQuarters = min(self.reorderWindowQuarters + 1, 64)
            self.reorderWindowRaised = now
        }
    }

    /// How long after a later-sent packet's acknowledgement an earlier one is declared lost.
    /// Until reordering is seen: 9/8 of the larger of the latest and smoothed RTT, with the
    /// packet threshold of 3 beside it (RFC 9002 §6.1). Once it is seen: the latest RTT plus the
    /// reordering window, a number of quarters of the minimum RTT at most the smoothed RTT (RACK,
    /// RFC 8985 §6.2), and no packet threshold.
    var lossDelay: TimeAmount {
        guard self.reorderingSeen else {
            let reference = max(self.rtt.latest, self.rtt.smoothedOrInitial)
            return max(reference + reference / 8, RTTEstimator.granularity)
        }
        let minimum = self.rtt.minimum ?? self.rtt.smoothedOrInitial
        let window = min(minimum / 4 * Int64(self.reorderWindowQuarters), self.rtt.smoothedOrInitial)
        return max(self.rtt.latest + window, RTTEstimator.granularity)
    }

    /// Declares lost every outstanding packet sent ``lossDelay`` or longer before now and before
    /// the largest acknowledged one, or (until reordering is seen) three packets before it
    /// (RFC 9002 §6.1, RFC 8985 §6.2), and arms the loss timer for the first one that may still
    /// arrive.
    mutating func detectLosses(now: NIODeadline) {
        guard let largestAcknowledged = self.largestAcknowledged else { return }
        self.lossDeadline = nil
        let lossDelay = self.lossDelay
        let packetThreshold: UInt64 = self.reorderingSeen ? .max / 2 : 3
        var index = 0
        while index < self.sentLog.count {
            let packet = self.sentLog[index]
            if packet.packetNumber > largestAcknowledged { break }
            if packet.state == .outstanding {
                if packet.timeSent + lossDelay <= now || largestAcknowledged >= packet.packetNumber + packetThreshold {
                    self.declareLost(at: index, now: now, byTimer: false)
                } else {
                    let deadline = packet.timeSent + lossDelay
                    self.lossDeadline = min(self.lossDeadline ?? deadline, deadline)
                }
            }
            index += 1
        }
    }

    /// Marks a packet lost: its reliable data and window update will be sent again.
    mutating func declareLost(at index: Int, now: NIODeadline, byTimer: Bool) {
        var packet = self.sentLog[index]
        packet.state = .lost
        self.statistics.packetsLost += 1
        if byTimer {
            packet.lostByTimer = true
            self.congestion.onPacketDiscarded(bytes: packet.size)
        } else {
            self.lossEvidence.onLost(now: now, smoothedRTT: self.rtt.smoothedOrInitial)
            packet.lostToCongestion = !self.parameters.toleratesRandomLoss || self.lossEvidence.isCongestive(pathMinimumRTT: self.rtt.minimum)
            self.congestion.onPacketLost(bytes: packet.size, timeSent: packet.timeSent, now: now, congestive: packet.lostToCongestion)
        }
        self.sentLog[index] = packet
        if let streamRange = packet.streamRange {
            self.sendStream.declareLost(streamRange)
        }
        if packet.carriesWindowUpdate {
            self.pendingWindowUpdate = true
        }
    }
}
