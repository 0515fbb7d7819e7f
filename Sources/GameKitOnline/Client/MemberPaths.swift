import DequeModule
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitTraversal
import NIOCore

/// Direct paths to room members (PROTOCOL §18.9): ICE connectivity checks on the session's own
/// socket, started when the transport first sends to a member (or the member checks first),
/// and consent on the address found. Until a direct path is selected, and again once it stops
/// answering, the member is reached through the relay. With a TURN allocation
/// (``relayAllocated(_:)``), checks also go through it, and a pair through it is a path too
/// (``OnlinePath/turn(_:)``). Sans-I/O: datagrams `viaRelay` go in and out of TURN indications.
package struct MemberPaths {
    package struct Path {
        var checker: ConnectivityChecker?
        var route = OnlinePath.relayed
        /// After a failure, no new checks before this.
        var retryAt: NIODeadline?
    }

    package struct Configuration: Sendable {
        package var localPeerID: UInt32
        package var localUfrag: String
        package var localPassword: String
        package var socketAcceptsIPv6: Bool
        package var timing = ConnectivityChecker.Timing()
        /// How long after a failed or lost path checks may start again.
        package var retryDelay = TimeAmount.seconds(15)

        package init(localPeerID: UInt32, localUfrag: String, localPassword: String, socketAcceptsIPv6: Bool) {
            self.localPeerID = localPeerID
            self.localUfrag = localUfrag
            self.localPassword = localPassword
            self.socketAcceptsIPv6 = socketAcceptsIPv6
        }
    }

    let configuration: Configuration
    private var records: [UInt32: MemberRecord] = [:]
    private(set) var paths: [UInt32: Path] = [:]
    private var random: MachineRandom
    /// This side's TURN relayed address, once allocated.
    private var relayed: SocketAddress?
    private var outbox = Deque<(SocketAddress, ByteBuffer, viaRelay: Bool)>()
    private(set) var events = Deque<(UInt32, OnlinePath)>()
    /// Members to tell, through the relay, to check a path to this side now (both sides must
    /// send for their NATs to let the other's checks in).
    private(set) var invitations = Deque<UInt32>()
    /// STUN requests for no member (wrong or unknown credentials).
    private(set) var strayChecks = 0
    /// Addresses members nominated a direct path from, not told yet: their transport datagrams
    /// may come from there before this side selects that path.
    private var sendingFrom = Deque<(UInt32, SocketAddress)>()
    /// Sources whose datagrams are a member's (shown to the transport as its member address):
    /// each direct path's far end and each address a member nominated one from, until the member
    /// leaves. A path given up keeps its address here, so that datagrams the member still sends
    /// there (it has not given the path up yet) stay the member's.
    private(set) var sources: [SocketAddress: UInt32] = [:]

    package init(configuration: Configuration, random: MachineRandom) {
        self.configuration = configuration
        self.random = random
    }

    // MARK: - Members

    mutating func memberChanged(_ record: MemberRecord) {
        self.records[record.peerID] = record
        if var path = self.paths[record.peerID], path.checker != nil {
            Self.addCandidates(of: record, to: &path.checker!)
            self.paths[record.peerID] = path
        }
    }

    mutating func memberLeft(_ peer: UInt32) {
        self.records[peer] = nil
        if self.sources.values.contains(peer) { self.sources = self.sources.filter { $0.value != peer } }
        if let path = self.paths.removeValue(forKey: peer), path.route != .relayed {
            self.events.append((peer, .relayed))
        }
    }

    /// The transport sends to `peer` (through the relay), or the member asked: start checking a
    /// direct path, unless one is being checked, was found, or failed recently. Checks this side
    /// starts of its own accord come with an invitation to the member to check too.
    mutating func wanted(_ peer: UInt32, invited: Bool = false, now: NIODeadline) {
        if let path = self.paths[peer] {
            guard path.checker == nil, path.retryAt.map({ $0 <= now }) ?? true else { return }
        }
        if self.startChecks(peer, now: now), !invited { self.invitations.append(peer) }
    }

    /// This side's TURN allocation exists: checks under way and to come use it as a base too.
    mutating func relayAllocated(_ address: SocketAddress, now: NIODeadline) {
        self.relayed = address
        for peer in self.paths.keys.sorted() where self.paths[peer]?.checker != nil {
            self.paths[peer]!.checker!.addRelay(address)
            self.run(peer, now: now)
        }
    }

    /// The next member to invite to check.
    mutating func pollInvitation() -> UInt32? {
        self.invitations.popFirst()
    }

    @discardableResult
    private mutating func startChecks(_ peer: UInt32, now: NIODeadline) -> Bool {
        guard let record = self.records[peer], !record.iceUfrag.isEmpty, !record.icePassword.isEmpty, !record.candidates.isEmpty else { return false }
        var checker = ConnectivityChecker(
            controlling: self.configuration.localPeerID < peer,
            credentials: .init(
                localUfrag: self.configuration.localUfrag, localPassword: self.configuration.localPassword, remoteUfrag: record.iceUfrag,
                remotePassword: record.icePassword),
            timing: self.configuration.timing, socketAcceptsIPv6: self.configuration.socketAcceptsIPv6, now: now, random: self.random.split())
        Self.addCandidates(of: record, to: &checker)
        if let relayed = self.relayed { checker.addRelay(relayed) }
        var path = self.paths[peer] ?? Path()
        path.checker = checker
        path.retryAt = nil
        self.paths[peer] = path
        self.run(peer, now: now)
        return true
    }

    private static func addCandidates(of record: MemberRecord, to checker: inout ConnectivityChecker) {
        checker.addRemote(
            host: record.candidates.filter { $0.kind == .host }.map(\.address),
            serverReflexive: record.candidates.filter { $0.kind == .serverReflexive }.map(\.address),
            relayed: record.candidates.filter { $0.kind == .relayed }.map(\.address))
    }

    /// The member whose path goes through TURN to `address`, or whose candidate it is.
    func member(at address: SocketAddress) -> UInt32? {
        if let peer = self.paths.first(where: { $0.value.route == .turn(address) })?.key { return peer }
        return self.records.first { $0.value.candidates.contains { $0.address == address } }?.key
    }

    /// Where the transport's datagrams to `peer` go now.
    package func route(to peer: UInt32) -> OnlinePath { self.paths[peer]?.route ?? .relayed }

    /// The member whose datagrams come from `source` (see ``sources``), if any.
    func member(sending source: SocketAddress) -> UInt32? {
        self.sources.isEmpty ? nil : self.sources[source]
    }

    // MARK: - Datagrams

    /// A STUN datagram that is not the rendezvous's answer: a member's check or an answer to one
    /// of ours (unwrapped from a TURN Data indication when `viaRelay`). Returns whether a
    /// member's checker took it.
    mutating func handleSTUN(_ datagram: ByteBuffer, from source: SocketAddress, viaRelay: Bool = false, now: NIODeadline) -> Bool {
        if let username = ConnectivityChecker.username(of: datagram) {
            // A check: its USERNAME names us and the member ("ours:theirs").
            let parts = username.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0] == self.configuration.localUfrag,
                let peer = self.records.first(where: { $0.value.iceUfrag == parts[1] })?.key
            else {
                self.strayChecks += 1
                return false
            }
            if self.paths[peer]?.checker == nil, !self.startChecks(peer, now: now) {
                self.strayChecks += 1
                return false
            }
            let known = self.paths[peer]!.checker!.nominatingSources.count
            let taken = self.paths[peer]!.checker!.receive(datagram, from: source, viaRelay: viaRelay, now: now)
            for address in self.paths[peer]!.checker!.nominatingSources.dropFirst(known) {
                self.sendingFrom.append((peer, address))
                self.sources[address.unmappingIPv4] = peer
            }
            self.run(peer, now: now)
            return taken
        }
        for peer in self.paths.keys.sorted() where self.paths[peer]?.checker != nil {
            if self.paths[peer]!.checker!.receive(datagram, from: source, viaRelay: viaRelay, now: now) {
                self.run(peer, now: now)
                return true
            }
        }
        return false
    }

    mutating func handleTimeout(now: NIODeadline) {
        for peer in self.paths.keys.sorted() where self.paths[peer]?.checker != nil {
            if let deadline = self.paths[peer]!.checker!.nextDeadline, deadline <= now {
                self.paths[peer]!.checker!.handleTimeout(now: now)
            }
            self.run(peer, now: now)
        }
    }

    /// Collects a checker's datagrams and follows its state.
    private mutating func run(_ peer: UInt32, now: NIODeadline) {
        guard var path = self.paths[peer], var checker = path.checker else { return }
        while let output = checker.pollTransmit() { self.outbox.append(output) }
        let route: OnlinePath
        switch checker.state {
        case .checking:
            route = path.route
        case .selected(let address, let viaRelay):
            route = viaRelay ? .turn(address) : .direct(address)
        case .failed, .consentLost:
            // Back to the relay; checks may start again later.
            route = .relayed
            path.checker = nil
            path.retryAt = now + self.configuration.retryDelay
        }
        if path.checker != nil { path.checker = checker }
        if route != path.route {
            path.route = route
            if case .direct(let address) = route { self.sources[address.unmappingIPv4] = peer }
            self.events.append((peer, route))
        }
        self.paths[peer] = path
    }

    /// The next check or answer: to whom, and whether it goes through the TURN allocation.
    mutating func pollTransmit() -> (SocketAddress, ByteBuffer, viaRelay: Bool)? {
        self.outbox.popFirst()
    }

    mutating func pollEvent() -> (UInt32, OnlinePath)? {
        self.events.popFirst()
    }

    /// The next address a member nominated a direct path from (see ``RoomEvent/memberSendsFrom(_:_:)``).
    mutating func pollSendingFrom() -> (UInt32, SocketAddress)? {
        self.sendingFrom.popFirst()
    }

    var nextDeadline: NIODeadline? {
        var deadline: NIODeadline?
        for path in self.paths.values { deadline = deadline.earliest(path.checker?.nextDeadline) }
        return deadline
    }
}
