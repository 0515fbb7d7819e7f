import GameKitTransport
import NIOCore

extension SessionMachine {
    // MARK: - Sending

    /// `send(_:toPeers:with:)`: all destinations get the data or none does. Directly connected
    /// peers get a data message; peers reached through a server get one relay message per server.
    mutating func send(
        _ data: ByteBuffer, to destinations: [UInt32], mode: SendMode, channel: UInt8 = SessionChannel.application
    ) throws(GKSessionError) {
        let batch = try self.plan(data, to: destinations, mode: mode, channel: channel)
        do {
            try self.links.send(batch, mode: mode)
        } catch {
            throw GKSessionError(Self.sendError(error), "The transport refused the send: \(error).", underlying: error)
        }
    }

    /// The messages that carry `data` to `destinations`, checked: every destination connected,
    /// nothing waiting ahead of reliable data.
    func plan(
        _ data: ByteBuffer, to destinations: [UInt32], mode: SendMode, channel: UInt8 = SessionChannel.application
    ) throws(GKSessionError) -> [(message: ByteBuffer, link: LinkID)] {
        guard !destinations.isEmpty else { throw GKSessionError(.invalidParameterError, "The list of peers to send to is empty.") }
        var direct: [LinkID] = []
        var relayed: [UInt32: (link: LinkID, peers: [UInt32])] = [:]
        var seen = Set<UInt32>()
        for peerID in destinations where seen.insert(peerID).inserted {
            guard let peer = self.peers[peerID] else {
                if peerID == self.identity.peerID {
                    throw GKSessionError(.invalidParameterError, "\(peerID) is this session's own peer ID: a session does not send to itself.")
                }
                throw GKSessionError(.peerNotFoundError, "No peer \(peerID) is known to this session: it was never seen, or has left.")
            }
            if let link = peer.link {
                direct.append(link)
            } else if let server = peer.relayServer, let link = self.peers[server]?.link {
                relayed[server, default: (link, [])].peers.append(peerID)
            } else {
                let state = peer.derivedState.map { "\($0)" } ?? "gone"
                throw GKSessionError(.notConnectedError, "\(peer.displayName) (\(peerID)) is not connected: its state is \(state).")
            }
        }
        var batch: [(message: ByteBuffer, link: LinkID)] = []
        // Encoded once: every direct peer's message shares one buffer (the transport copies it
        // into each link's send stream, as it must keep it for retransmission anyway).
        if !direct.isEmpty {
            let encoded = channel == SessionChannel.application ? SessionMessage.encodedData(data) : SessionMessage.channel(channel, data).encode()
            for link in direct { batch.append((encoded, link)) }
        }
        for (_, route) in relayed.sorted(by: { $0.key < $1.key }) {
            for chunk in stride(from: 0, to: route.peers.count, by: SessionMessage.maximumPeers) {
                let peers = Array(route.peers[chunk..<min(chunk + SessionMessage.maximumPeers, route.peers.count)])
                batch.append((SessionMessage.relaying(data, to: peers, channel: channel).encode(), route.link))
            }
        }
        if mode == .reliable, let full = batch.first(where: { self.outboxes[$0.link]?.isEmpty == false }) {
            let name = self.linkOwners[full.link].flatMap { self.displayName(of: $0) } ?? "a peer"
            throw GKSessionError(.systemError, "The send buffer to \(name) is full: try again later, or use write(_:toPeers:with:), which waits for room.")
        }
        return batch
    }

    /// The links that reach these peers (each once), for the `async` send that waits for room.
    func routes(to destinations: [UInt32]) -> [LinkID] {
        var links: [LinkID] = []
        for peerID in destinations {
            guard let peer = self.peers[peerID] else { continue }
            if let link = peer.link ?? peer.relayServer.flatMap({ self.peers[$0]?.link }), !links.contains(link) {
                links.append(link)
            }
        }
        return links
    }

    /// Every peer data to "all peers" goes to: connected directly or through a server.
    var allConnectedPeers: [UInt32] {
        self.peers.filter { $0.value.link != nil || $0.value.relayServer != nil }.map(\.key).sorted()
    }

    static func sendError(_ error: TransportError) -> GKSessionError.Code {
        switch error {
        case .bufferFull: .systemError
        case .dataTooBig: .dataTooBigError
        case .linkNotOpen, .endpointClosed: .notConnectedError
        default: .transportError
        }
    }

    /// Sends a reliable message of the session's own, holding it in the link's outbox while the
    /// send buffer is full. A peer whose outbox outgrows ``outboxLimit`` is disconnected.
    mutating func enqueue(_ message: SessionMessage, on link: LinkID) {
        self.enqueue(encoded: message.encode(), on: link)
    }

    mutating func enqueue(encoded message: ByteBuffer, on link: LinkID) {
        if self.outboxes[link] == nil {
            do {
                try self.links.send(message, on: link, mode: .reliable)
                return
            } catch .bufferFull {
                self.outboxes[link] = SessionOutbox()
            } catch {
                return
            }
        }
        self.outboxes[link]!.append(message)
        if self.outboxes[link]!.bytes > Self.outboxLimit {
            self.statistics.overloadedLinks += 1
            self.outboxes[link] = nil
            self.dropLink(link, code: Self.closeOverloaded)
        }
    }

    /// Room came back on a link: what waits in its outbox goes first.
    mutating func handleSendBufferAvailable(_ link: LinkID) {
        while let message = self.outboxes[link]?.first {
            do {
                try self.links.send(message, on: link, mode: .reliable)
                self.outboxes[link]!.removeFirst()
            } catch .bufferFull {
                return
            } catch {
                self.outboxes[link] = nil
                return
            }
        }
        self.outboxes[link] = nil
    }

    // MARK: - Receiving

    mutating func handleReceived(_ buffer: ByteBuffer, on link: LinkID, mode: SendMode) {
        guard let sender = self.linkOwners[link], self.peers[sender]?.link == link else { return }
        let message: SessionMessage
        do {
            message = try SessionMessage.decode(buffer)
        } catch {
            self.statistics.malformedMessages += 1
            return
        }
        switch message {
        case .data(let data):
            self.notify(.received(data, from: sender, mode: mode))
        case .channel(let channel, let data):
            self.channelInbox.append(.init(channel: channel, data: data, from: sender, mode: mode))
        case .roster(let entries):
            guard self.identity.mode != .server else { return self.statistics.malformedMessages += 1 }
            for entry in entries { self.relayedPeerJoined(entry, via: sender) }
        case .joined(let entry):
            guard self.identity.mode != .server else { return self.statistics.malformedMessages += 1 }
            self.relayedPeerJoined(entry, via: sender)
        case .left(let peerID):
            guard self.peers[peerID]?.relayServer == sender else { return }
            self.peers[peerID]!.relayServer = nil
            self.reconcile(peerID)
        case .relay(let destinations, let data):
            self.handleRelay(data, from: sender, to: destinations, mode: mode, channel: SessionChannel.application)
        case .channelRelay(let destinations, let channel, let data):
            self.handleRelay(data, from: sender, to: destinations, mode: mode, channel: channel)
        case .relayed(let source, let data):
            guard self.peers[source]?.relayServer == sender else { return self.statistics.relayDropped += 1 }
            self.notify(.received(data, from: source, mode: mode))
        case .channelRelayed(let source, let channel, let data):
            guard self.peers[source]?.relayServer == sender else { return self.statistics.relayDropped += 1 }
            self.channelInbox.append(.init(channel: channel, data: data, from: source, mode: mode))
        case .drop(let peerID):
            self.handleDrop(peerID, from: sender)
        }
    }

    private mutating func relayedPeerJoined(_ entry: SessionPeerEntry, via server: UInt32) {
        let peerID = entry.peerID
        guard peerID != self.identity.peerID, peerID != server else { return }
        var peer = self.peers[peerID] ?? SessionPeer(displayName: entry.displayName)
        guard peer.link == nil else { return }  // reached directly already
        peer.displayName = entry.displayName
        peer.relayServer = server
        self.peers[peerID] = peer
        self.reconcile(peerID)
    }

    private mutating func handleRelay(_ data: ByteBuffer, from sender: UInt32, to destinations: [UInt32], mode: SendMode, channel: UInt8) {
        guard self.identity.mode == .server else { return self.statistics.malformedMessages += 1 }
        guard self.relays else { return self.statistics.relayDropped += 1 }
        self.relay(data, from: sender, to: destinations, mode: mode, channel: channel)
    }

    /// A server forwards a client's data (on a channel) to the other members named.
    private mutating func relay(_ data: ByteBuffer, from source: UInt32, to destinations: [UInt32], mode: SendMode, channel: UInt8) {
        var seen = Set<UInt32>()
        let message = SessionMessage.relayed(data, from: source, channel: channel).encode()
        for destination in destinations where seen.insert(destination).inserted {
            if destination == self.identity.peerID {
                if channel == SessionChannel.application {
                    self.notify(.received(data, from: source, mode: mode))
                } else {
                    self.channelInbox.append(.init(channel: channel, data: data, from: source, mode: mode))
                }
                continue
            }
            guard destination != source, let link = self.peers[destination]?.link else {
                self.statistics.relayDropped += 1
                continue
            }
            if mode == .reliable {
                self.enqueue(encoded: message, on: link)
                self.statistics.relayedMessages += 1
            } else if (try? self.links.send(message, on: link, mode: .unreliable)) != nil {
                self.statistics.relayedMessages += 1
            } else {
                self.statistics.relayDropped += 1
            }
        }
    }

    // MARK: - Disconnecting

    /// `disconnectFromAllPeers()`: every direct link closes (after what is queued on it) and the
    /// peers reached through a server are disconnected with it.
    mutating func disconnectFromAllPeers() {
        for member in self.directMembers() {
            self.dropLink(member.link, code: Self.closeNormal)
        }
        for (peerID, peer) in self.peers where peer.relayServer != nil {
            self.peers[peerID]!.relayServer = nil
            self.reconcile(peerID)
        }
    }

    /// `disconnectPeer(fromAllPeers:)`: every member is asked to drop the peer (a server's
    /// clients through the server), the peer itself included, and this session drops it too.
    mutating func disconnectPeerFromAllPeers(_ peerID: UInt32) {
        if peerID == self.identity.peerID {
            for member in self.directMembers() { self.enqueue(.drop(peerID: peerID), on: member.link) }
            self.disconnectFromAllPeers()
            return
        }
        guard let peer = self.peers[peerID], peer.link != nil || peer.relayServer != nil else { return }
        for member in self.directMembers() {
            self.enqueue(.drop(peerID: peerID), on: member.link)
        }
        if let link = peer.link {
            self.dropLink(link, code: Self.closeNormal)
        } else {
            self.peers[peerID]!.relayServer = nil
            self.reconcile(peerID)
        }
    }

    /// A member asks this session to drop a peer; asked to drop itself, it leaves everyone.
    private mutating func handleDrop(_ peerID: UInt32, from sender: UInt32) {
        if peerID == self.identity.peerID {
            self.disconnectFromAllPeers()
        } else if peerID != sender, let link = self.peers[peerID]?.link {
            self.dropLink(link, code: Self.closeNormal)
        }
    }

    /// Closes a direct link at once, as far as the application is concerned.
    mutating func dropLink(_ link: LinkID, code: UInt16) {
        guard let peerID = self.linkOwners.removeValue(forKey: link) else { return }
        try? self.links.close(link, code: code)
        self.outboxes[link] = nil
        if self.peers[peerID]?.link == link {
            self.peers[peerID]!.link = nil
            self.linkGone(peerID)
        }
    }
}
