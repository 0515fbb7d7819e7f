import NIOCore

/// The application code of the CLOSE frame sent when a peer is declared gone.
let timeoutCloseCode: UInt16 = 0xFFFE

extension LinkMachine {
    /// Appends the next datagram for the peer to `output` and returns true, or returns false when
    /// nothing may be sent now (nothing queued, or held back by the congestion window, pacing or
    /// the peer's receive window).
    ///
    /// Packet assembly order: ACK (whenever something new arrived), then window update and PING,
    /// then one reliable chunk to send again, then unreliable messages, then new reliable data if
    /// no chunk was sent again. Unreliable data goes before new reliable data because it is the
    /// latency-sensitive kind (positions, voice), while reliable data is already ordered behind
    /// itself.
    mutating func pollTransmit(now: NIODeadline, into output: inout ByteBuffer) -> Bool {
        switch self.state {
        case .closed, .awaitingConfirmation:
            return false
        case .draining:
            guard let code = self.pendingClose else { return false }
            self.closeCopiesLeft -= 1
            if self.closeCopiesLeft <= 0 { self.pendingClose = nil }
            self.plaintext.clear()
            FrameWriter.writeClose(code: code, into: &self.plaintext)
            self.seal(SentPacket(packetNumber: self.nextPacketNumber, timeSent: now, size: 0, isAckEliciting: false), now: now, into: &output)
            return true
        case .closing(let code, _):
            if self.sendStream.isFullyAcknowledged, self.unreliableQueue.isEmpty {
                self.finishClosing(code: code, reason: .closedLocally(code: code), now: now)
                return self.pollTransmit(now: now, into: &output)
            }
        case .open:
            break
        }
        guard self.nextPacketNumber < VarInt.maximum else {
            self.finishClosing(code: protocolViolationCloseCode, reason: .protocolViolation("packet numbers exhausted"), now: now)
            return false
        }

        let mayCarryData = self.mayCarryData(now: now)
        guard mayCarryData || self.ackTracker.isAckDue(now: now) else { return false }

        let capacity = self.parameters.packetCapacity
        self.plaintext.clear()
        var packet = SentPacket(packetNumber: self.nextPacketNumber, timeSent: now, size: 0, isAckEliciting: false)

        if self.ackTracker.hasNewInformation {
            FrameWriter.writeAck(
                received: self.ackTracker.received,
                ackDelayMicroseconds: self.ackTracker.ackDelayMicroseconds(now: now),
                maximumRanges: AckTracker.reportedRanges,
                space: capacity,
                into: &self.plaintext
            )
            self.ackTracker.onAckSent()
        }
        if mayCarryData {
            self.writeData(into: &packet, capacity: capacity)
        }
        guard self.plaintext.readableBytes > 0 else { return false }
        self.seal(packet, now: now, into: &output)
        return true
    }

    /// Whether ack-eliciting data is waiting and the congestion window and pacer let it go now.
    private mutating func mayCarryData(now: NIODeadline) -> Bool {
        let wantsToSend =
            self.pendingPing || self.pendingWindowUpdate || self.sendStream.hasLostData
            || (self.sendStream.hasUnsentData && self.sendStream.sendOffset < self.peerStreamLimit)
            || !self.unreliableQueue.isEmpty
        guard wantsToSend else { return false }
        if self.probePending {
            return true
        }
        let size = self.parameters.maxDatagramSize
        guard self.congestion.canSend(bytes: size) else {
            self.congestion.onBlockedByWindow()
            return false
        }
        let earliest = self.pacer.earliestSendTime(
            bytes: size,
            now: now,
            congestionWindow: self.congestion.congestionWindow,
            smoothedRTT: self.rtt.smoothed,
            inSlowStart: self.congestion.isInSlowStart
        )
        guard earliest <= now else {
            self.pacingDeadline = earliest
            return false
        }
        self.pacingDeadline = nil
        return true
    }

    private mutating func writeData(into packet: inout SentPacket, capacity: Int) {
        if self.pendingWindowUpdate {
            let limit = self.receiveStream.advertisedLimit
            if self.plaintext.readableBytes + FrameWriter.windowSize(maxOffset: limit) <= capacity {
                FrameWriter.writeWindow(maxOffset: limit, into: &self.plaintext)
                packet.carriesWindowUpdate = true
                packet.isAckEliciting = true
                self.pendingWindowUpdate = false
            }
        }
        if self.pendingPing {
            FrameWriter.writePing(into: &self.plaintext)
            packet.isAckEliciting = true
            self.pendingPing = false
        }
        // One reliable chunk sent again.
        if let range = self.sendStream.popLostRange(maximumLength: self.reliableChunkSpace(capacity: capacity)) {
            self.writeReliable(range, into: &packet)
            self.statistics.retransmittedBytes += UInt64(range.count)
        }
        // Unreliable messages.
        if !self.unreliableQueue.isEmpty {
            let before = self.plaintext.readableBytes
            let (released, _) = self.unreliableQueue.fill(
                into: &self.plaintext,
                space: capacity - before,
                packetCapacity: capacity
            )
            if self.plaintext.readableBytes > before {
                packet.isAckEliciting = true
            }
            self.release(released)
        }
        // New reliable data, unless a chunk went out again in this packet.
        if packet.streamLength == 0,
            let range = self.sendStream.takeUnsentRange(
                maximumLength: self.reliableChunkSpace(capacity: capacity),
                limit: self.peerStreamLimit
            )
        {
            self.writeReliable(range, into: &packet)
        }
    }

    /// Data bytes a reliable frame may carry in the rest of the packet (0 if not worth one).
    private func reliableChunkSpace(capacity: Int) -> Int {
        let space = capacity - self.plaintext.readableBytes
        let header = 1 + VarInt.encodedLength(self.sendStream.writeOffset) + VarInt.encodedLength(UInt64(max(space, 0)))
        return space - header >= 16 ? space - header : 0
    }

    private mutating func writeReliable(_ range: Range<UInt64>, into packet: inout SentPacket) {
        FrameWriter.writeReliableHeader(offset: range.lowerBound, length: range.count, into: &self.plaintext)
        self.sendStream.write(range, into: &self.plaintext)
        packet.streamStart = range.lowerBound
        packet.streamLength = range.count
        packet.isAckEliciting = true
    }

    /// RFC 8985 §7.2: a probe two smoothed round trips after the last transmission, plus the
    /// peer's acknowledgement delay when a lone packet is out (it may be waiting for a second).
    /// Not armed while a probe is out, before the first RTT sample, or when the timeout comes first.
    mutating func armTailLossProbe(now: NIODeadline) {
        guard !self.tailProbeOutstanding, let srtt = self.rtt.smoothed, self.hasOutstandingAckElicitingPackets else {
            self.probeDeadline = nil
            return
        }
        var timeout = max(srtt * 2, RTTEstimator.granularity)
        if self.congestion.bytesInFlight <= self.parameters.maxDatagramSize {
            timeout = timeout + self.parameters.peerMaxAckDelay
        }
        let deadline = now + timeout
        if let retransmission = self.retransmissionDeadline, deadline >= retransmission {
            self.probeDeadline = nil
        } else {
            self.probeDeadline = deadline
        }
    }

    /// Encrypts the plaintext as packet `packet.packetNumber`, appends it to `output` and records it.
    private mutating func seal(_ packet: SentPacket, now: NIODeadline, into output: inout ByteBuffer) {
        var packet = packet
        let start = output.writerIndex
        self.headerScratch.clear()
        DataPacketHeader(receiverIndex: self.remoteIndex, packetNumber: packet.packetNumber).encode(into: &self.headerScratch)
        output.writeImmutableBuffer(self.headerScratch)
        self.sealer.seal(self.plaintext, header: self.headerScratch, into: &output)
        packet.size = output.writerIndex - start
        if packet.isAckEliciting { self.sentLog.append(packet) }
        self.nextPacketNumber += 1
        self.lastSendTime = now
        self.statistics.packetsSent += 1
        self.statistics.datagramBytesSent += UInt64(packet.size)
        if packet.isAckEliciting {
            if self.unansweredSince == nil { self.unansweredSince = now }
            self.probePending = false
            self.statistics.ackElicitingPacketsSent += 1
            self.congestion.onPacketSent(bytes: packet.size)
            self.pacer.onPacketSent(bytes: packet.size)
            if self.retransmissionDeadline == nil {
                self.retransmissionDeadline = now + self.currentRetransmissionTimeout
            }
            self.armTailLossProbe(now: now)
        }
    }
}
