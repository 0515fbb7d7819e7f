import GameKitTransport
import NIOCore

extension SessionMachine {
    // MARK: - Application calls

    /// `connect(toPeer:withTimeout:)`. Failures are reported, never thrown, as in Game Kit.
    mutating func connect(to peerID: UInt32, timeout: TimeAmount?) {
        guard peerID != self.identity.peerID, let peer = self.peers[peerID] else {
            self.notify(.connectionFailed(peerID, .peerNotFoundError))
            return
        }
        if peer.link != nil || peer.outgoing != nil { return }  // connected or already connecting
        if peer.incoming != nil {
            // It asked first: its request goes ahead.
            self.notify(.connectionFailed(peerID, .inProgressError))
            return
        }
        var addresses: [SocketAddress] = []
        for address in peer.sighting?.addresses ?? [] where !addresses.contains(address) {
            addresses.append(address)
        }
        guard !addresses.isEmpty else {
            self.notify(.connectionFailed(peerID, .peerNotFoundError))
            return
        }
        self.lastAttempt &+= 1
        let hello = SessionHello(
            sessionKey: self.identity.sessionKey, peerID: self.identity.peerID,
            mode: UInt8(self.identity.mode.rawValue), attempt: self.lastAttempt, displayName: self.identity.displayName)
        // Every address at once: one of them may be stale (an interface that went away), and
        // waiting out a timeout on it before trying the next would cost the whole timeout.
        var links: [LinkID] = []
        for address in addresses.prefix(Self.maximumPathsPerAttempt) {
            guard let link = try? self.links.connect(to: address, payload: hello.encode(), timeout: timeout) else { continue }
            links.append(link)
            self.linkOwners[link] = peerID
        }
        guard !links.isEmpty else {
            self.notify(.connectionFailed(peerID, .connectionFailedError))
            return
        }
        self.peers[peerID]!.outgoing = SessionPeer.OutgoingAttempt(attempt: self.lastAttempt, links: links)
        self.reconcile(peerID)
    }

    /// `cancelConnect(toPeer:)`: the failure (`GKSessionCancelledError`) is reported on both
    /// sides when the transport confirms.
    mutating func cancelConnect(to peerID: UInt32) {
        guard let attempt = self.peers[peerID]?.outgoing else { return }
        for link in attempt.links { _ = self.links.cancelConnect(link) }
    }

    /// `acceptConnection(fromPeer:)`.
    mutating func accept(_ peerID: UInt32) throws(GKSessionError) {
        guard var request = self.peers[peerID]?.incoming, request.acceptedLink == nil else { throw GKSessionError(.peerNotFoundError) }
        let welcome = SessionWelcome(peerID: self.identity.peerID, displayName: self.identity.displayName)
        // The attempt's other paths are answered "duplicate": the initiator drops them quietly.
        for alternate in request.alternates {
            try? self.links.deny(alternate, code: SessionDenyReason.duplicate.rawValue)
            self.requestOwners[alternate] = nil
        }
        request.alternates = []
        if let attempt = self.peers[peerID]!.outgoing {
            // Both asked at once and the peer's request went ahead (§14.3): ours has lost, and
            // the application hears so now, before the connection, not after it.
            self.withdrawPaths(attempt.links)
            self.peers[peerID]!.outgoing = nil
            self.notify(.connectionFailed(peerID, .inProgressError))
        }
        do {
            let link = try self.links.accept(request.id, payload: welcome.encode())
            request.acceptedLink = link
            self.peers[peerID]!.incoming = request
            self.linkOwners[link] = peerID
            self.requestOwners[request.id] = nil
        } catch {
            // The request is over whatever the reason (the transport forgot it, or the initiator
            // sent a hello too short for our welcome): refuse it if the transport still holds it,
            // forget it, and be ready for the peer's next request.
            try? self.links.deny(request.id, code: SessionDenyReason.malformed.rawValue)
            self.requestOwners[request.id] = nil
            self.peers[peerID]!.incoming = nil
            self.noteEnded(request.attempt, of: peerID)
            self.reconcile(peerID)
            throw GKSessionError(.connectionFailedError)
        }
    }

    /// `denyConnection(fromPeer:)`.
    mutating func deny(_ peerID: UInt32) {
        guard let request = self.peers[peerID]?.incoming, request.acceptedLink == nil else { return }
        for id in request.allRequests {
            try? self.links.deny(id, code: SessionDenyReason.declined.rawValue)
            self.requestOwners[id] = nil
        }
        self.peers[peerID]!.incoming = nil
        self.noteEnded(request.attempt, of: peerID)
        self.reconcile(peerID)
    }

    // MARK: - Transport handshake events

    mutating func handleConnectionRequest(_ request: ConnectionRequest) {
        let hello: SessionHello
        do {
            hello = try SessionHello.decode(request.payload)
        } catch {
            self.refuse(request.id, .malformed)
            return
        }
        guard hello.sessionKey == self.identity.sessionKey else { return self.refuse(request.id, .wrongSession) }
        guard hello.peerID != self.identity.peerID, GKSessionMode(rawValue: Int32(hello.mode)) != nil else {
            return self.refuse(request.id, .malformed)
        }
        guard self.isAvailable, self.identity.mode != .client else { return self.refuse(request.id, .notAccepting) }
        let peerID = hello.peerID
        var peer = self.peers[peerID] ?? SessionPeer(displayName: hello.displayName)
        if let incoming = peer.incoming, incoming.attempt == hello.attempt {
            // The same attempt over another path: held beside the first while it is pending.
            guard incoming.acceptedLink == nil else { return self.refuse(request.id, .duplicate) }
            self.peers[peerID]!.incoming!.alternates.append(request.id)
            self.requestOwners[request.id] = peerID
            return
        }
        if peer.link != nil || peer.incoming != nil {
            return self.refuse(request.id, .inProgress)
        }
        if peer.outgoing != nil && self.identity.peerID < peerID {
            // Both asked at once: the request of the lower peer ID goes ahead.
            return self.refuse(request.id, .inProgress)
        }
        if let ended = self.endedAttempts[peerID], Int32(bitPattern: hello.attempt &- ended) <= 0 {
            // A late path of an attempt that has ended (or of an older one): its end was
            // reported already, so it is not shown again.
            return self.refuse(request.id, .duplicate)
        }
        peer.displayName = hello.displayName
        peer.incoming = SessionPeer.IncomingRequest(id: request.id, attempt: hello.attempt)
        self.peers[peerID] = peer
        self.requestOwners[request.id] = peerID
        self.reconcile(peerID)
        self.notify(.connectionRequest(peerID))
    }

    /// Remembers that the peer's request of `attempt` is over (answered, withdrawn, expired or
    /// connected), for ``handleConnectionRequest(_:)``.
    private mutating func noteEnded(_ attempt: UInt32, of peerID: UInt32) {
        if self.endedAttempts[peerID] == nil, self.endedAttempts.count >= Self.rememberedNames, let any = self.endedAttempts.keys.first {
            self.endedAttempts[any] = nil
        }
        self.endedAttempts[peerID] = attempt
    }

    private mutating func refuse(_ request: ConnectionRequest.ID, _ reason: SessionDenyReason) {
        self.statistics.refusedRequests += 1
        try? self.links.deny(request, code: reason.rawValue)
    }

    mutating func handleRequestWithdrawn(_ id: ConnectionRequest.ID, _ reason: ConnectionRequestWithdrawal) {
        guard let peerID = self.requestOwners.removeValue(forKey: id), var request = self.peers[peerID]?.incoming else { return }
        if request.alternates.contains(id) || (request.id == id && !request.alternates.isEmpty) {
            // One path of the attempt is gone; another still carries it (the application still
            // sees one request).
            request.alternates.removeAll { $0 == id }
            if request.id == id { request.id = request.alternates.removeFirst() }
            self.peers[peerID]!.incoming = request
            return
        }
        self.peers[peerID]!.incoming = nil
        self.noteEnded(request.attempt, of: peerID)
        let error: GKSessionError.Code =
            switch reason {
            case .cancelled: .cancelledError
            case .timedOut: .timedOutError
            case .expired: .connectionFailedError
            }
        self.notify(.connectionFailed(peerID, error))
        self.reconcile(peerID)
    }

    mutating func handleLinkOpened(_ link: LinkID, payload: ByteBuffer) {
        guard let peerID = self.linkOwners[link], var peer = self.peers[peerID] else {
            // Not ours any more (disconnected meanwhile, or a path that lost): close it.
            try? self.links.close(link, code: Self.closeNormal)
            return
        }
        if let attempt = peer.outgoing, attempt.links.contains(link) {
            guard let welcome = try? SessionWelcome.decode(payload), welcome.peerID == peerID else {
                // Someone else answers at that address now: that path has failed.
                try? self.links.close(link, code: Self.closeWrongPeer)
                self.pathFailed(link, of: peerID, .connectionFailedError, endsAttempt: false)
                return
            }
            // This path won: the others are withdrawn.
            self.withdrawPaths(attempt.links.filter { $0 != link })
            peer.outgoing = nil
            peer.displayName = welcome.displayName
        } else if let request = peer.incoming, request.acceptedLink == link {
            peer.incoming = nil
            self.noteEnded(request.attempt, of: peerID)
        } else {
            return
        }
        peer.link = link
        peer.relayServer = nil
        self.peers[peerID] = peer
        self.reconcile(peerID)
        if self.relays { self.introduce(peerID) }
        self.updateDiscovery()
    }

    mutating func handleConnectFailed(_ link: LinkID, _ error: TransportError) {
        guard let peerID = self.linkOwners[link], self.peers[peerID]?.outgoing?.links.contains(link) == true else { return }
        if case .authenticationFailed = error {
            self.statistics.authenticationFailures += 1
            self.notify(.authenticationFailed(peerID))
        }
        // A refusal by the peer's application or session decides for every path; a path that
        // got no answer (or was answered "duplicate") leaves the attempt to the others.
        let endsAttempt: Bool
        switch error {
        case .denied(let code): endsAttempt = code != SessionDenyReason.duplicate.rawValue
        case .authenticationFailed: endsAttempt = true
        default: endsAttempt = false
        }
        self.pathFailed(link, of: peerID, Self.sessionError(for: error), endsAttempt: endsAttempt)
    }

    /// One path of our attempt failed: the attempt fails with `error` when this was its last
    /// path or when the failure decides for all (the others are then withdrawn).
    private mutating func pathFailed(_ link: LinkID, of peerID: UInt32, _ error: GKSessionError.Code, endsAttempt: Bool) {
        guard var attempt = self.peers[peerID]?.outgoing else { return }
        self.linkOwners[link] = nil
        attempt.links.removeAll { $0 == link }
        if !endsAttempt, !attempt.links.isEmpty {
            self.peers[peerID]!.outgoing = attempt
            return
        }
        self.withdrawPaths(attempt.links)
        self.peers[peerID]!.outgoing = nil
        self.notify(.connectionFailed(peerID, error))
        // Nobody answered at any of its addresses: ask the network whether the peer is still
        // there (RFC 6762 §10.4), so that a vanished one leaves the list.
        if error == .timedOutError || error == .connectionFailedError { self.discoveryCommands.append(.reconfirm(peerID)) }
        self.reconcile(peerID)
    }

    /// Withdraws paths of our attempt that are no longer wanted. They are forgotten first, so
    /// their `cancelled` failures (or a late `linkOpened`, then closed) find no owner.
    private mutating func withdrawPaths(_ paths: [LinkID]) {
        for link in paths {
            self.linkOwners[link] = nil
            _ = self.links.cancelConnect(link)
        }
    }

    /// The Game Kit error for a failed connection attempt.
    static func sessionError(for error: TransportError) -> GKSessionError.Code {
        switch error {
        case .denied(let code):
            switch SessionDenyReason(rawValue: code) {
            case .declined, .notAccepting: .declinedError
            case .inProgress: .inProgressError
            case .cancelled: .cancelledError
            case .timedOut: .timedOutError
            case .wrongSession, .malformed, .duplicate, nil: .connectionFailedError
            }
        case .timedOut: .timedOutError
        case .cancelled: .cancelledError
        default: .connectionFailedError
        }
    }

    mutating func handleLinkClosed(_ link: LinkID, _ reason: LinkCloseReason) {
        self.outboxes[link] = nil
        guard let peerID = self.linkOwners.removeValue(forKey: link), var peer = self.peers[peerID] else { return }
        if let request = peer.incoming, request.acceptedLink == link {
            // Accepted, but the requester never completed.
            peer.incoming = nil
            self.noteEnded(request.attempt, of: peerID)
            self.peers[peerID] = peer
            let error: GKSessionError.Code =
                switch reason {
                case .cancelledByPeer: .cancelledError
                case .handshakeNotConfirmed: .timedOutError
                default: .connectionFailedError
                }
            self.notify(.connectionFailed(peerID, error))
            self.reconcile(peerID)
            return
        }
        guard peer.link == link else { return }
        peer.link = nil
        self.peers[peerID] = peer
        self.linkGone(peerID)
    }

    /// A directly connected peer is gone: its relayed peers go with it, and a relaying server
    /// tells the other clients.
    mutating func linkGone(_ peerID: UInt32) {
        for (other, peer) in self.peers where peer.relayServer == peerID {
            self.peers[other]!.relayServer = nil
            self.reconcile(other)
        }
        self.reconcile(peerID)
        if self.relays {
            for member in self.directMembers(except: peerID) {
                self.enqueue(.left(peerID: peerID), on: member.link)
            }
        }
        self.updateDiscovery()
    }

    /// Whether this session is a server that relays between its clients.
    var relays: Bool { self.identity.mode == .server && self.identity.relaysBetweenClients }

    /// A relaying server's new member learns who else is there; the others learn of it.
    private mutating func introduce(_ peerID: UInt32) {
        guard let link = self.peers[peerID]?.link else { return }
        let others = self.directMembers(except: peerID)
        let roster = others.map { SessionPeerEntry(peerID: $0.peerID, displayName: self.peers[$0.peerID]!.displayName) }
        for chunk in stride(from: 0, to: max(roster.count, 1), by: SessionMessage.maximumPeers) {
            self.enqueue(.roster(Array(roster[chunk..<min(chunk + SessionMessage.maximumPeers, roster.count)])), on: link)
        }
        let entry = SessionPeerEntry(peerID: peerID, displayName: self.peers[peerID]!.displayName)
        for member in others {
            self.enqueue(.joined(entry), on: member.link)
        }
    }

    /// The directly connected peers, but one.
    func directMembers(except excluded: UInt32? = nil) -> [(peerID: UInt32, link: LinkID)] {
        self.peers.compactMap { peerID, peer in
            guard peerID != excluded, let link = peer.link else { return nil }
            return (peerID, link)
        }.sorted { $0.peerID < $1.peerID }
    }
}
