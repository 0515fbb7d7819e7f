import NIOCore

// The endpoint's handling of handshake messages, both as responder (initiation, cancel) and as
// initiator (response, reject, cookie). docs/PROTOCOL.md §6 has the state tables.
extension EndpointMachine {
    // MARK: - Responder

    /// Type 4: an initiation or a request, after a version check common to both.
    mutating func handleInitiatorMessage(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
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
        switch HandshakeKind.of(datagram) {
        case .share: self.handleInitiation(datagram, from: address, now: now)
        case .sealed: self.handleRequest(datagram, from: address, now: now)
        case nil: self.statistics.droppedMalformed += 1
        }
    }

    private mutating func handleInitiation(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let message = InitiationMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let source = HandshakeSource(address: address, index: message.senderIndex)
        if self.answerRepeat(of: message, from: source, now: now) { return }

        // Under load (handshakes in progress, or the reply budget spent), an initiation must carry
        // a valid cookie MAC before any cryptography is done for it.
        let withoutMAC = datagram.getSlice(at: datagram.readerIndex, length: InitiationMessage.headerSize)!
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
        // Each challenge answers one password guess: a source that spent its guesses gets none.
        guard self.guesses.admit(address, now: now) else {
            self.statistics.guessesLimited += 1
            return
        }
        guard let (challenge, keys) = ResponderHandshake.challenge(message, datagram: datagram, secret: self.secret) else {
            // A share that is not a group element: no honest initiator sends one.
            self.guesses.finish(address, failed: false, now: now)
            self.statistics.droppedMalformed += 1
            return
        }
        self.challenges[source] = ChallengedHandshake(share: message.share.detached(), challenge: challenge, keys: keys, lastSeen: now)
        self.statistics.challengesSent += 1
        self.outbox.append((address, challenge))
    }

    /// Handles a repeat of an initiation already seen: the same challenge again, or nothing once
    /// the handshake went further; drops an initiation that collides with a live handshake of the
    /// same source. Returns false when the initiation is new.
    private mutating func answerRepeat(of message: InitiationMessage, from source: HandshakeSource, now: NIODeadline) -> Bool {
        if let challenged = self.challenges[source], challenged.share == message.share {
            self.challenges[source]!.lastSeen = now
            self.outbox.append((source.address, challenged.challenge))
            return true
        }
        if let id = self.requestsBySource[source], self.requests[id]?.share == message.share { return true }
        if self.accepted[source]?.share == message.share || self.answered[source]?.share == message.share { return true }
        if self.challenges[source] != nil || self.requestsBySource[source] != nil || self.accepted[source] != nil {
            // Another handshake from the same address and index is under way: no honest initiator
            // reuses its index with a new share, and letting it through would mix up the two.
            self.statistics.droppedStrayHandshake += 1
            return true
        }
        return false
    }

    /// The initiator's request: it opens under the challenge's keys (the same password), or the
    /// handshake fails on both sides with a wrong password.
    private mutating func handleRequest(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let message = RequestMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let source = HandshakeSource(address: address, index: message.senderIndex)
        let tag = message.tag
        if let id = self.requestsBySource[source], self.requests[id]?.requestTag == tag {
            self.requests[id]!.lastSeen = now
            return
        }
        if let accepted = self.accepted[source], accepted.requestTag == tag {
            self.links[accepted.linkIndex]?.machine.responseSentAt = nil
            self.fileTimer(of: accepted.linkIndex)
            self.outbox.append((source.address, accepted.response))
            return
        }
        if let answer = self.answered[source], answer.requestTag == tag {
            if let reply = answer.reply { self.outbox.append((source.address, reply)) }
            return
        }
        guard let challenged = self.challenges.removeValue(forKey: source) else {
            self.statistics.droppedStrayHandshake += 1
            return
        }
        guard let (parameters, payload) = ResponderHandshake.open(message, datagram: datagram, keys: challenged.keys) else {
            self.guesses.finish(address, failed: true, now: now)
            self.statistics.handshakeAuthenticationFailures += 1
            let reject = ResponderHandshake.reject(.authenticationFailed, receiverIndex: message.senderIndex, echo: challenged.echo)
            self.answered[source] = AnsweredHandshake(share: challenged.share, requestTag: tag.detached(), reply: reject, until: now + Self.answerLifetime)
            self.events.append(.handshakeFailed(remoteAddress: address, .authenticationFailed))
            if self.replyLimiter.take(now: now) { self.outbox.append((address, reject)) }
            return
        }
        self.guesses.finish(address, failed: false, now: now)
        let id = ConnectionRequest.ID(rawValue: self.nextRequestID)
        self.nextRequestID += 1
        self.requests[id] = PendingRequest(
            id: id,
            source: source,
            share: challenged.share,
            requestTag: tag.detached(),
            keys: challenged.keys,
            parameters: parameters,
            payload: payload.detached(),
            lastSeen: now
        )
        self.requestsBySource[source] = id
        self.statistics.connectionRequestsReceived += 1
        self.events.append(.connectionRequest(ConnectionRequest(id: id, remoteAddress: address, payload: self.requests[id]!.payload)))
    }

    mutating func handleCancel(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let message = CancelMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let source = HandshakeSource(address: address, index: message.senderIndex)
        if let id = self.requestsBySource[source], let request = self.requests[id] {
            guard ResponderHandshake.isAuthentic(cancel: datagram, cancelKey: request.keys.cancel) else {
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
        } else if let challenged = self.challenges[source] {
            // An initiator that gave up before the challenge reached it, answering it now: the
            // MAC proves its key, so the guess was right and costs nothing.
            guard ResponderHandshake.isAuthentic(cancel: datagram, cancelKey: challenged.keys.cancel) else {
                self.statistics.droppedStrayHandshake += 1
                return
            }
            self.challenges[source] = nil
            self.guesses.finish(address, failed: false, now: now)
            self.statistics.challengesCancelled += 1
        } else {
            self.statistics.droppedStrayHandshake += 1
        }
    }

    // MARK: - Initiator

    /// Type 5: a challenge or a response.
    mutating func handleResponderMessage(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        switch HandshakeKind.of(datagram) {
        case .share: self.handleChallenge(datagram, from: address, now: now)
        case .sealed: self.handleResponse(datagram, from: address, now: now)
        case nil: self.statistics.droppedMalformed += 1
        }
    }

    private mutating func handleChallenge(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let message = ChallengeMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let index = message.receiverIndex
        if let withdrawn = self.withdrawnInitiations[index] {
            // Withdrawn before this challenge came: tell the responder, under the exchange's keys,
            // so that it forgets the challenge and counts no failed guess.
            let cancel = withdrawn.cancel ?? withdrawn.opening?.cancel(answering: message, datagram: datagram, reason: withdrawn.reason)
            if let cancel {
                self.withdrawnInitiations[index]!.cancel = cancel
                self.outbox.append((address, cancel))
            } else {
                self.statistics.droppedStrayHandshake += 1
            }
            return
        }
        guard self.initiators[index] != nil else {
            self.statistics.droppedStrayHandshake += 1
            return
        }
        switch self.initiators[index]!.handleChallenge(message, datagram: datagram, now: now) {
        case .ignored:
            self.statistics.droppedStrayHandshake += 1
        case .request(let request):
            self.outbox.append((self.initiators[index]!.remoteAddress, request))
        case .wrongPassword(let request):
            let initiator = self.initiators.removeValue(forKey: index)!
            self.statistics.handshakeAuthenticationFailures += 1
            self.outbox.append((initiator.remoteAddress, request))
            self.events.append(.connectFailed(LinkID(rawValue: index), .authenticationFailed))
        }
    }

    private mutating func handleResponse(_ datagram: ByteBuffer, from address: SocketAddress, now: NIODeadline) {
        guard let message = ResponseMessage.decode(datagram) else {
            self.statistics.droppedMalformed += 1
            return
        }
        let index = message.receiverIndex
        if let withdrawn = self.withdrawnInitiations[index] {
            // Accepted after this side gave up: make sure the responder drops the link.
            if let cancel = withdrawn.cancel, self.replyLimiter.take(now: now) { self.outbox.append((address, cancel)) }
            return
        }
        guard
            let initiator = self.initiators[index], let completion = initiator.complete(with: message, datagram: datagram),
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
