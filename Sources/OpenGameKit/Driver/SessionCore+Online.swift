@_spi(Machine) import GameKitOnline
import GameKitTransport
import NIOCore
import NIOPosix

/// What an online session knows of its room, and the LAN sightings merged with it (guarded by
/// the core's lock).
struct OnlineState {
    /// The room's nameplate, once the rendezvous has answered.
    var code: RoomCode?
    /// The secret part of the room's code: drawn here for a room this session creates, read
    /// from the typed code for one it joins; never sent anywhere (PROTOCOL §18.2).
    var secret: UInt32?
    /// The whole code to show, once the rendezvous has answered.
    var invitation: RoomInvitation? {
        guard let code, let secret else { return nil }
        return RoomInvitation(nameplate: code, secret: secret)
    }
    /// Why the session is not in its room, once that is final.
    var failure: GKSessionError?
    /// A session failure's reason for the delegate (a room's, or why the session could not
    /// start), not yet delivered.
    var unreportedFailure: GKSessionError?
    /// The room's members and the LAN's advertisements, merged for the machine.
    var sightings = PeerSightings()
    /// Tasks waiting for the room's code, by a number of their own (to withdraw on cancellation).
    var codeWaiters: [UInt64: CheckedContinuation<Result<String, GKSessionError>, Never>] = [:]
    var nextCodeWaiter: UInt64 = 0

    /// The tasks waiting for the room's code, taken out in the order they came.
    mutating func takeCodeWaiters() -> [CheckedContinuation<Result<String, GKSessionError>, Never>] {
        defer { self.codeWaiters.removeAll() }
        return self.codeWaiters.sorted { $0.key < $1.key }.map(\.value)
    }
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

    /// The online layer for this session's socket (room client and member paths, under the
    /// transport) and the room's secret, or nil when the session is not online. Its record
    /// carries `livenessKey`'s public half.
    func makeOnlineMachine(livenessPublicKey: [UInt8]) async throws -> (machine: OnlineMachine, secret: UInt32)? {
        guard let online = self.onlineConfiguration else { return nil }
        let request: RoomRequest
        let secret: UInt32
        switch online.room {
        case .create:
            request = .create
            secret = RoomInvitation.randomSecret()
        case .join(let text):
            let invitation = try Self.parseRoomCode(text)
            request = .join(invitation.nameplate)
            secret = invitation.secret
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
        let machine = OnlineMachine.make(
            rendezvous: rendezvous, sessionKey: self.identity.sessionKey, request: request, record: record, directPaths: online.directPaths,
            stunServers: stunServers, turn: turn, now: .now())
        return (machine, secret)
    }

    /// A typed room code, or the error that says what is wrong with it.
    static func parseRoomCode(_ text: String) throws(GKSessionError) -> RoomInvitation {
        do {
            return try RoomInvitation(parsing: text)
        } catch {
            throw GKSessionError(.invalidParameterError, error.sentence(typed: text))
        }
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
                waiters = self.online.takeCodeWaiters()
                let displayed = self.online.invitation?.displayed ?? code.displayed
                outcome = .success(displayed)
                self.logger.info("in room", metadata: ["code": "\(displayed)"])
            case .memberJoined(let record), .memberUpdated(let record):
                self.logger.debug("room member", metadata: ["peer": "\(record.displayName) (\(record.peerID))", "visible": "\(record.isVisible)"])
                self.online.sightings.member(record, machine: &machine)
            case .memberLeft(let peer):
                self.logger.debug("room member left", metadata: ["peer": "\(peer)"])
                self.online.sightings.memberLeft(peer, machine: &machine)
            case .relayReady:
                self.logger.debug("relay ready")
            case .reflexiveAddress(let address):
                self.logger.debug("public address", metadata: ["address": "\(address)"])
            case .rendezvousLost:
                self.logger.info("the rendezvous stopped answering: registering again")
            case .failed(let error):
                var reason = error.description
                if case .noSuchRoom(let code) = error, let secret = self.online.secret, let invitation = RoomInvitation(nameplate: code, secret: secret) {
                    reason = RoomError.noSuchRoom(displayed: invitation.displayed)
                } else if error == .rendezvousUnreachable, let rendezvous = self.onlineSettings?.rendezvous {
                    reason = "No answer from the rendezvous at \(rendezvous.joined(separator: ", ")): is it running there, and can UDP or TCP reach it from this network?"
                }
                let failure = GKSessionError(.cannotEnableError, reason, underlying: error)
                self.online.failure = failure
                self.online.unreportedFailure = failure
                waiters = self.online.takeCodeWaiters()
                outcome = .failure(failure)
                self.online.sightings.forgetMembers(machine: &machine)
                self.logger.warning("not in the room", metadata: ["reason": "\(reason)"])
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

    // MARK: - Queries

    var roomCode: String? { self.lock.withLock { self.online.invitation?.displayed } }

    /// The room's code once the rendezvous has answered; throws why the session is not in the
    /// room (a wrong code, no rendezvous, a start that failed, a session never made available or
    /// closed) and, as soon as the calling task is cancelled, `cancelledError`.
    func waitForRoomCode() async throws(GKSessionError) -> String {
        guard self.onlineConfiguration != nil else {
            throw GKSessionError(.invalidParameterError, "The session is not online: set configuration.online.")
        }
        let id = self.lock.withLock { () -> UInt64 in
            self.online.nextCodeWaiter += 1
            return self.online.nextCodeWaiter
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<String, GKSessionError>, Never>) in
                let ready: Result<String, GKSessionError>? = self.lock.withLock {
                    if Task.isCancelled { return .failure(Self.codeWaitCancelled) }
                    if let invitation = self.online.invitation { return .success(invitation.displayed) }
                    if let failure = self.online.failure { return .failure(failure) }
                    if self.phase == .closed { return .failure(Self.closedError) }
                    if self.phase == .idle, self.startTask == nil, !self.machine.isAvailable {
                        return .failure(
                            GKSessionError(.notConnectedError, "The session is not available: set isAvailable to true (or call start()) to join its room."))
                    }
                    self.online.codeWaiters[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = self.lock.withLock { self.online.codeWaiters.removeValue(forKey: id) }
            waiter?.resume(returning: .failure(Self.codeWaitCancelled))
        }
        return try result.get()
    }

    /// What a cancelled wait for the room's code throws.
    static var codeWaitCancelled: GKSessionError {
        GKSessionError(.cancelledError, "Waiting for the room's code was cancelled.")
    }

    /// Ends every wait for the room's code with `failure` (lock held; resume them after).
    func failCodeWaitsLocked(_ failure: GKSessionError) -> [CheckedContinuation<Result<String, GKSessionError>, Never>] {
        self.online.failure = failure
        return self.online.takeCodeWaiters()
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
        let record = self.lock.withLock { self.online.sightings.members[member] }
        switch self.slot.current?.path(to: member) {
        case .direct(let address)?:
            // Straight to the member's TURN allocation is still through a relay (its TURN server).
            let relayed = record?.candidates.contains { $0.kind == .relayed && $0.address == address } ?? false
            return relayed ? .relayed : .direct
        case .relayed?, .turn?, nil:
            return .relayed
        }
    }
}
