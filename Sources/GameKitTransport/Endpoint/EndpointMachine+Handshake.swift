import NIOCore

// The endpoint's handling of handshake messages, both as responder (initiation, cancel) and as
// initiator (response, reject, cookie). docs/PROTOCOL.md §6 has the state tables.
extension EndpointMachine {
    // MARK: - Responder

    mutating func handleInitiation(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let peek = InitiationMessage.peekVersionAndEcho(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        guard peek.version == ProtocolVersion.current else {
            // Tell a newer (or older) initiator which version this side speaks; never with a reply
            // larger than what it answers.
            self.statistics.unsupportedVersions += 1
            if datagram.readableBytes >= RejectMessage.size, self.replyLimiter.take(now: now) {
                self.outbox.append((address, ResponderHandshake.reject(.unsupportedVersion, receiverIndex: peek.senderIndex, echo: peek.echo)))
            }
            return
        }
        guard let message = InitiationMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let source = HandshakeSource(address: address, index: message.senderIndex)
        if self.answerRepeat(of: message, from: source, now: now) { return }

        // Under load (handshakes awaiting an answer or a confirmation, or the reply budget spent
        // on failed authentications), an initiation must carry a valid cookie MAC before any
        // cryptography is done for it.
        let withoutMAC = datagram.getSlice(at: datagram.readerIndex, length: datagram.readableBytes - WireSize.mac)!
        let underLoad = self.handshakesInProgress >= self.configuration.cookieThreshold || !self.replyLimiter.hasTokens(now: now)
        if underLoad,
            !self.cookies.isValid(mac2: message.mac2, message: withoutMAC, from: address)
        {
            self.outbox.append((address, ResponderHandshake.cookieReply(self.cookies.cookie(for: address), receiverIndex: message.senderIndex, echo: message.echo)))
            self.statistics.cookieRepliesSent += 1
            return
        }
        guard self.handshakesInProgress < self.configuration.maximumPendingRequests else {
            self.statistics.droppedOverload += 1
            return
        }
        switch ResponderHandshake.verify(message, datagram: datagram, psk: self.psk) {
        case .failure(.authentication):
            self.statistics.handshakeAuthenticationFailures += 1
            guard self.replyLimiter.take(now: now) else { return }
            self.outbox.append((address, ResponderHandshake.reject(.authenticationFailed, receiverIndex: message.senderIndex, echo: message.echo)))
            self.events.append(.handshakeFailed(remoteAddress: address, .authenticationFailed))
        case .failure(.malformed):
            self.statistics.droppedMalformed += 1
        case .success(let verified):
            let id = ConnectionRequest.ID(rawValue: self.nextRequestID)
            self.nextRequestID += 1
            self.requests[id] = PendingRequest(
                id: id,
                source: source,
                ephemeralPublicKey: message.ephemeralPublicKey.detached(),
                initiationWithoutMAC: verified.initiationWithoutMAC.detached(),
                initiationSize: datagram.readableBytes,
                parameters: verified.parameters,
                payload: verified.payload,
                cancelKey: verified.cancelKey,
                lastSeen: now
            )
            self.requestsBySource[source] = id
            self.statistics.connectionRequestsReceived += 1
            self.events.append(.connectionRequest(ConnectionRequest(id: id, remoteAddress: address, payload: verified.payload)))
        }
    }

    /// Handles a repeat of an initiation already seen: the same answer again, or a refreshed
    /// request; drops an initiation that collides with a live handshake of the same source.
    /// Returns false when the initiation is new.
    private mutating func answerRepeat(of message: InitiationMessage, from source: HandshakeSource, now: NIODeadline) -> Bool {
        if let accepted = self.accepted[source], accepted.ephemeralPublicKey == message.ephemeralPublicKey {
            self.links[accepted.linkIndex]?.machine.responseSentAt = nil
            self.fileTimer(of: accepted.linkIndex)
            self.outbox.append((source.address, accepted.response))
            return true
        }
        if let answer = self.answered[source], answer.ephemeralPublicKey == message.ephemeralPublicKey {
            if let reply = answer.reply { self.outbox.append((source.address, reply)) }
            return true
        }
        if let id = self.requestsBySource[source], self.requests[id]?.ephemeralPublicKey == message.ephemeralPublicKey {
            self.requests[id]!.lastSeen = now
            return true
        }
        if self.requestsBySource[source] != nil || self.accepted[source] != nil {
            // Another handshake from the same address and index is under way: no honest initiator
            // reuses its index with a new key, and letting it through would mix up the two.
            self.statistics.droppedStrayHandshake += 1
            return true
        }
        return false
    }

    mutating func handleCancel(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let message = CancelMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let source = HandshakeSource(address: address, index: message.senderIndex)
        if let id = self.requestsBySource[source], let request = self.requests[id] {
            guard ResponderHandshake.isAuthentic(cancel: datagram, cancelKey: request.cancelKey) else {
                self.statistics.droppedStrayHandshake += 1
                return
            }
            self.removeRequest(id)
            let withdrawal: ConnectionRequestWithdrawal = message.reason == CancelReason.timedOut.rawValue ? .timedOut : .cancelled
            self.events.append(.connectionRequestWithdrawn(id, withdrawal))
        } else if let accepted = self.accepted[source] {
            guard ResponderHandshake.isAuthentic(cancel: datagram, cancelKey: accepted.cancelKey) else {
                self.statistics.droppedStrayHandshake += 1
                return
            }
            self.links[accepted.linkIndex]?.machine.terminate(reason: .cancelledByPeer, now: now)
            self.fileTimer(of: accepted.linkIndex)
            self.collectEvents(of: accepted.linkIndex)
        } else {
            self.statistics.droppedStrayHandshake += 1
        }
    }

    // MARK: - Initiator

    mutating func handleResponse(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let message = ResponseMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let index = message.receiverIndex
        if let withdrawn = self.withdrawnInitiations[index] {
            // Accepted after this side gave up: make sure the responder drops the link.
            if self.replyLimiter.take(now: now) { self.outbox.append((address, withdrawn.cancel)) }
            return
        }
        guard
            let initiator = self.initiators[index], let completion = initiator.complete(with: message),
            // A response naming a cipher this side did not offer is ignored like an invalid one.
            let cipher = DataCipher.chosen(inResponse: completion.peerParameters.dataCiphers, offer: self.localParameters.dataCiphers)
        else {
            self.statistics.droppedStrayHandshake += 1
            return
        }
        self.initiators[index] = nil
        let parameters = LinkParameters(configuration: self.configuration, local: self.localParameters, peer: completion.peerParameters)
        self.links[index] = LinkSlot(LinkMachine(
            localIndex: index,
            remoteIndex: message.senderIndex,
            role: .initiator,
            remoteAddress: address,
            keys: completion.keys,
            cipher: cipher,
            parameters: parameters,
            now: now
        ))
        self.fileTimer(of: index)
        self.statistics.linksOpened += 1
        self.events.append(.linkOpened(LinkID(rawValue: index), remoteAddress: address, payload: completion.payload))
    }

    mutating func handleReject(_ datagram: ByteBuffer) {
        guard let message = RejectMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        guard let initiator = self.initiators[message.receiverIndex], initiator.matchesEcho(message.echo) else {
            self.statistics.droppedStrayHandshake += 1
            return
        }
        self.initiators[message.receiverIndex] = nil
        let error: TransportError
        switch message.reason {
        case .authenticationFailed: error = .authenticationFailed
        case .denied: error = .denied(code: message.code)
        case .unsupportedVersion: error = .unsupportedVersion(remote: message.version)
        }
        self.events.append(.connectFailed(LinkID(rawValue: message.receiverIndex), error))
    }

    mutating func handleCookie(_ datagram: ByteBuffer, now: NIODeadline) {
        guard let message = CookieMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let index = message.receiverIndex
        guard self.initiators[index]?.matchesEcho(message.echo) == true else {
            self.statistics.droppedStrayHandshake += 1
            return
        }
        if let repeated = self.initiators[index]!.acceptCookie(message.cookie, now: now) {
            self.outbox.append((self.initiators[index]!.remoteAddress, repeated))
        }
    }
}
