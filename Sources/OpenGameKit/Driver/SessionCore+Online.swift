@_spi(Machine) import GameKitOnline
import GameKitTransport
import NIOCore
import NIOPosix

/// What an online session knows of its room, and the LAN sightings merged with it (guarded by
/// the core's lock).
struct OnlineState {
    /// A peer as discovery on the LAN last saw it.
    struct LANSighting {
        var displayName: String
        var addresses: [SocketAddress]
        var isBusy: Bool
        var livenessKey: [UInt8]?
    }

    var code: RoomCode?
    /// Why the session is not in its room, once that is final.
    var failure: GKSessionError?
    /// A session failure's reason for the delegate (a room's, or why the session could not
    /// start), not yet delivered.
    var unreportedFailure: GKSessionError?
    var members: [UInt32: MemberRecord] = [:]
    var lan: [UInt32: LANSighting] = [:]
    var codeWaiters: [CheckedContinuation<Result<String, GKSessionError>, Never>] = []
    /// The room client on the transport's socket.
    var tenant: OnlineTenant?
}

extension SessionCore {
    // MARK: - Starting

    /// The online room this session uses, if any.
    var onlineConfiguration: GKSession.Configuration.Online? { self.lock.withLock { self.onlineSettings } }

    /// Puts a session that has not started yet in `room` (the picker's online choice): on the
    /// rendezvous its configuration names, else on `rendezvous` with room members only (the user
    /// chose online rather than nearby).
    func joinBeforeStarting(_ room: GKSession.Configuration.Online.Room, rendezvous: [String]) throws(GKSessionError) {
        self.lock.lock()
        defer { self.lock.unlock() }
        guard self.phase == .idle, self.startTask == nil, !self.machine.isAvailable else {
            throw GKSessionError(.invalidParameterError, "The session has already been made available: it cannot join an online room now.")
        }
        var settings = self.onlineSettings ?? GKSession.Configuration.Online(rendezvous: rendezvous, room: room, alsoNearby: false)
        settings.room = room
        self.onlineSettings = settings
    }

    /// The room client for this session, sharing the transport's socket, or nil when the session
    /// is not online. Its record carries `livenessKey`'s public half.
    func makeOnlineTenant(livenessPublicKey: [UInt8]) async throws -> OnlineTenant? {
        guard let online = self.onlineConfiguration else { return nil }
        let request: RoomRequest
        switch online.room {
        case .create:
            request = .create
        case .join(let text):
            guard let code = RoomCode(text) else {
                throw GKSessionError(.invalidParameterError, "'\(text)' is not a room code: six letters and digits, such as 7K3-QXM.")
            }
            request = .join(code)
        }
        guard !online.rendezvous.isEmpty else { throw GKSessionError(.invalidParameterError, "An online session needs a rendezvous address.") }
        let rendezvous = try await Self.resolve(online.rendezvous)
        let stunServers = try await Self.resolve(online.stunServers, defaultPort: GKSession.Configuration.Online.defaultSTUNPort, what: "STUN server")
        var turn: TURNServer?
        if let server = online.turnServers.first {
            let address = try await Self.resolve([server.address], defaultPort: GKSession.Configuration.Online.defaultSTUNPort, what: "TURN server")
            turn = TURNServer(address: address[0], username: server.username, password: server.password)
        }
        let record = MemberRecord(
            peerID: self.identity.peerID, displayName: self.identity.displayName, keyShare: livenessPublicKey,
            isVisible: self.identity.mode != .client)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let tenant = OnlineTenant(
            rendezvous: rendezvous, sessionKey: self.identity.sessionKey, request: request, record: record,
            directPaths: online.directPaths, stunServers: stunServers, turn: turn, eventLoop: eventLoop
        ) { [weak self] event in
            self?.handle(event)
        }
        self.lock.withLock { self.online.tenant = tenant }
        return tenant
    }

    /// `HOST:PORT` strings as addresses (names looked up, off the caller's thread); `what` names
    /// them in errors.
    static func resolve(
        _ texts: [String], defaultPort: Int = GKSession.Configuration.Online.defaultPort, what: String = "rendezvous"
    ) async throws -> [SocketAddress] {
        var addresses: [SocketAddress] = []
        for text in texts {
            let (host, port) = try Self.split(text, defaultPort: defaultPort, what: what)
            let resolved = await Task.detached { () -> SocketAddress? in
                try? SocketAddress.makeAddressResolvingHost(host, port: port)
            }.value
            guard let resolved else {
                throw GKSessionError(.invalidParameterError, "The \(what) '\(text)' could not be found (is the host name right?).")
            }
            addresses.append(resolved)
        }
        return addresses
    }

    private static func split(_ text: String, defaultPort: Int, what: String) throws -> (String, Int) {
        var host = Substring(text)
        var port = defaultPort
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if rest.hasPrefix(":") {
                guard let number = Int(rest.dropFirst()) else { throw Self.badAddress(text, what) }
                port = number
            } else if !rest.isEmpty {
                throw Self.badAddress(text, what)
            }
        } else if let colon = text.lastIndex(of: ":") {
            guard !text[..<colon].contains(":") else { throw Self.badAddress(text, what) }
            host = text[..<colon]
            guard let number = Int(text[text.index(after: colon)...]) else { throw Self.badAddress(text, what) }
            port = number
        }
        guard !host.isEmpty, (1...65_535).contains(port) else { throw Self.badAddress(text, what) }
        return (String(host), port)
    }

    private static func badAddress(_ text: String, _ what: String) -> GKSessionError {
        GKSessionError(.invalidParameterError, "'\(text)' is not a \(what) address: HOST or HOST:PORT, IPv6 in brackets ([2001:db8::1]:7878).")
    }

    // MARK: - Room events

    func handle(_ event: RoomEvent) {
        var waiters: [CheckedContinuation<Result<String, GKSessionError>, Never>] = []
        var outcome: Result<String, GKSessionError>?
        try? self.perform { machine throws(GKSessionError) in
            switch event {
            case .joined(let code, _):
                self.online.code = code
                waiters = self.online.codeWaiters
                self.online.codeWaiters.removeAll()
                outcome = .success(code.displayed)
                self.logger.info("in room", metadata: ["code": "\(code.displayed)"])
            case .memberJoined(let record), .memberUpdated(let record):
                self.online.members[record.peerID] = record
                self.logger.debug("room member", metadata: ["peer": "\(record.displayName) (\(record.peerID))", "visible": "\(record.isVisible)"])
                self.sightLocked(record.peerID, machine: &machine)
            case .memberLeft(let peer):
                self.online.members[peer] = nil
                self.logger.debug("room member left", metadata: ["peer": "\(peer)"])
                self.sightLocked(peer, machine: &machine)
            case .relayReady:
                self.logger.debug("relay ready")
            case .reflexiveAddress(let address):
                self.logger.debug("public address", metadata: ["address": "\(address)"])
            case .rendezvousLost:
                self.logger.info("the rendezvous stopped answering: registering again")
            case .failed(let error):
                let failure = GKSessionError(.cannotEnableError, error.description, underlying: error)
                self.online.failure = failure
                self.online.unreportedFailure = failure
                waiters = self.online.codeWaiters
                self.online.codeWaiters.removeAll()
                outcome = .failure(failure)
                for peer in self.online.members.keys.sorted() {
                    self.online.members[peer] = nil
                    self.sightLocked(peer, machine: &machine)
                }
                self.logger.warning("not in the room", metadata: ["reason": "\(error)"])
                machine.notify(.failed(.cannotEnableError))
            case .pathChanged(let peer, let path):
                let name = machine.displayName(of: peer) ?? "\(peer)"
                switch path {
                case .direct(let address): self.logger.info("direct path", metadata: ["peer": "\(name) (\(peer))", "address": "\(address)"])
                case .turn(let address): self.logger.info("through the TURN server", metadata: ["peer": "\(name) (\(peer))", "address": "\(address)"])
                case .relayed: self.logger.info("through the relay", metadata: ["peer": "\(name) (\(peer))"])
                }
            case .memberSendsFrom(let peer, let address):
                self.logger.debug("member nominated a direct path", metadata: ["peer": "\(peer)", "from": "\(address)"])
            case .turnAllocated(let address):
                self.logger.debug("TURN allocation", metadata: ["relayed": "\(address)"])
            case .turnFailed(let reason):
                self.logger.warning("the TURN server cannot be used", metadata: ["reason": "\(reason)"])
            case .left:
                break
            }
        }
        if let outcome { for waiter in waiters { waiter.resume(returning: outcome) } }
    }

    /// Tells the machine what is known of `peerID` now, from the LAN and the room together: the
    /// LAN's addresses first, then the member address the relay (or a direct path) serves.
    func sightLocked(_ peerID: UInt32, machine: inout SessionMachine) {
        let lan = self.online.lan[peerID]
        let member = self.online.members[peerID].flatMap { $0.isVisible ? $0 : nil }
        guard lan != nil || member != nil else {
            machine.peerLost(peerID)
            return
        }
        var addresses = lan?.addresses ?? []
        if member != nil { addresses.append(MemberAddress.of(peerID)) }
        let key = lan?.livenessKey ?? member.flatMap { $0.keyShare.count == 32 ? $0.keyShare : nil }
        machine.peerSighted(
            peerID, displayName: lan?.displayName ?? member!.displayName, addresses: addresses, isBusy: lan?.isBusy ?? member!.isBusy,
            livenessKey: key)
    }

    /// After browsing starts again: every room member is sighted anew (the machine forgot them
    /// when browsing stopped).
    func resightMembersLocked(machine: inout SessionMachine) {
        for peer in self.online.members.keys.sorted() { self.sightLocked(peer, machine: &machine) }
    }

    // MARK: - Queries

    var roomCode: String? { self.lock.withLock { self.online.code?.displayed } }

    func waitForRoomCode() async throws(GKSessionError) -> String {
        guard self.onlineConfiguration != nil else {
            throw GKSessionError(.invalidParameterError, "The session is not online: set configuration.online.")
        }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<String, GKSessionError>, Never>) in
            let ready: Result<String, GKSessionError>? = self.lock.withLock {
                if let code = self.online.code { return .success(code.displayed) }
                if let failure = self.online.failure { return .failure(failure) }
                if self.phase == .closed { return .failure(Self.closedError) }
                self.online.codeWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        return try result.get()
    }

    /// The verification code of the link to `peerID`, as text (PROTOCOL §4.9).
    func verificationCode(for peerID: UInt32) -> String? {
        guard let link = self.read({ $0.peers[peerID]?.link }), let bytes = self.transportVerificationCode(link), bytes.count == 5 else { return nil }
        let value = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let text = CrockfordBase32.encode(value, symbols: 8)
        return "\(text.prefix(4))-\(text.suffix(4))"
    }

    /// How traffic to a connected peer travels now.
    func path(to peerID: UInt32) -> GKSession.PeerPath? {
        guard let link = self.read({ $0.peers[peerID]?.link }) else { return nil }
        guard let address = self.transportLinkAddress(link) else { return nil }
        guard let member = MemberAddress.peer(of: address) else { return .lan }
        let (tenant, record) = self.lock.withLock { (self.online.tenant, self.online.members[member]) }
        switch tenant?.path(to: member) {
        case .direct(let address)?:
            // Straight to the member's TURN allocation is still through a relay (its TURN server).
            let relayed = record?.candidates.contains { $0.kind == .relayed && $0.address == address } ?? false
            return relayed ? .relayed : .direct
        case .relayed?, .turn?, nil:
            return .relayed
        }
    }
}
