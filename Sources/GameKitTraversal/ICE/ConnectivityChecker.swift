@_spi(Machine) import GameKitMachine
import NIOCore

/// ICE connectivity checks and consent between this socket and one peer's candidates, for
/// machines outside this module that share their socket with STUN (an online session checks a
/// direct path to each room member it talks to). A thin face of ``ICEAgent``: datagrams as
/// `ByteBuffer`, addresses as `SocketAddress`; a TURN allocation (``addRelay(_:)``) is a second
/// base, whose datagrams the owner carries in Send and Data indications (`viaRelay`).
package struct ConnectivityChecker: Sendable {
    package enum State: Equatable, Sendable {
        case checking
        /// The peer answers at this address: send there (through the TURN relay when `viaRelay`).
        case selected(SocketAddress, viaRelay: Bool)
        /// Every pair failed (no direct path, for now).
        case failed
        /// The selected address stopped answering consent checks.
        case consentLost
    }

    /// Short-term credentials (ICE's ufrag and password) of both sides.
    package struct Credentials: Sendable, Equatable {
        package var localUfrag: String
        package var localPassword: String
        package var remoteUfrag: String
        package var remotePassword: String

        package init(localUfrag: String, localPassword: String, remoteUfrag: String, remotePassword: String) {
            self.localUfrag = localUfrag
            self.localPassword = localPassword
            self.remoteUfrag = remoteUfrag
            self.remotePassword = remotePassword
        }
    }

    /// Consent timing: checks every `interval` (±20 %), lost once `timeout` has passed without an
    /// answer and three checks went unanswered (`ConsentFreshness`).
    package struct Timing: Sendable {
        package var consentInterval: TimeAmount
        package var consentTimeout: TimeAmount
        package init(consentInterval: TimeAmount = .milliseconds(1500), consentTimeout: TimeAmount = .seconds(5)) {
            self.consentInterval = consentInterval
            self.consentTimeout = consentTimeout
        }
    }

    private var agent: ICEAgent
    /// Every remote candidate so far (paired again with the relay once it exists).
    private var remote: [ICECandidate] = []

    package init(controlling: Bool, credentials: Credentials, timing: Timing = .init(), socketAcceptsIPv6: Bool, now: NIODeadline, random: MachineRandom) {
        var configuration = ICEAgent.Configuration()
        configuration.consentInterval = timing.consentInterval
        configuration.consentTimeout = timing.consentTimeout
        self.agent = ICEAgent(
            role: controlling ? .controlling : .controlled,
            credentials: .init(
                localUfrag: credentials.localUfrag, localPassword: credentials.localPassword, remoteUfrag: credentials.remoteUfrag,
                remotePassword: credentials.remotePassword),
            configuration: configuration, socketAcceptsIPv6: socketAcceptsIPv6, now: now, random: random)
    }

    /// Adds the peer's candidates: host ones (its interfaces), server-reflexive ones (its NAT) and
    /// relayed ones (its TURN allocation).
    package mutating func addRemote(host: [SocketAddress], serverReflexive: [SocketAddress], relayed: [SocketAddress] = []) {
        let candidates = host.compactMap { TraversalAddress($0).map { ICECandidate(kind: .host, address: $0) } }
            + serverReflexive.compactMap { TraversalAddress($0).map { ICECandidate(kind: .serverReflexive, address: $0) } }
            + relayed.compactMap { TraversalAddress($0).map { ICECandidate(kind: .relayed, address: $0) } }
        for candidate in candidates where !self.remote.contains(candidate) { self.remote.append(candidate) }
        self.agent.addRemote(candidates)
    }

    /// Makes this side's TURN allocation (its relayed address) a base for checks too.
    package mutating func addRelay(_ relayed: SocketAddress) {
        guard let address = TraversalAddress(relayed) else { return }
        self.agent.addRelay(address, remoteCandidates: self.remote)
    }

    package var state: State {
        switch self.agent.state {
        case .checking: self.agent.allPairsFailed ? .failed : .checking
        case .selected(let base, let remote): .selected(remote.socketAddress, viaRelay: base == .relay)
        case .consentLost: .consentLost
        }
    }

    /// Whether a binding request's USERNAME names this pair (`localUfrag:remoteUfrag`).
    package static func username(of datagram: ByteBuffer) -> String? {
        guard let decoded = try? STUNMessage.decode(Array(datagram.readableBytesView)), decoded.message.messageClass == .request else { return nil }
        return decoded.message.attribute(.username)?.stringValue
    }

    /// The USERNAME a request to this side carries.
    package var expectedUsername: String { "\(self.agent.credentials.localUfrag):\(self.agent.credentials.remoteUfrag)" }

    /// Takes a STUN datagram from `source` (unwrapped from a TURN Data indication when
    /// `viaRelay`): false when it is not this checker's (a response to another's transaction).
    package mutating func receive(_ datagram: ByteBuffer, from source: SocketAddress, viaRelay: Bool = false, now: NIODeadline) -> Bool {
        guard let decoded = try? STUNMessage.decode(Array(datagram.readableBytesView)), let from = TraversalAddress(source) else { return false }
        if decoded.message.messageClass == .success || decoded.message.messageClass == .error {
            guard self.agent.owns(transactionID: decoded.message.transactionID) else { return false }
        }
        return self.agent.receive(decoded, from: from, base: viaRelay ? .relay : .socket, now: now)
    }

    package mutating func handleTimeout(now: NIODeadline) {
        self.agent.handleTimeout(now: now)
    }

    /// The next check or answer: to whom, and whether it goes through the TURN relay.
    package mutating func pollTransmit() -> (SocketAddress, ByteBuffer, viaRelay: Bool)? {
        guard let output = self.agent.pollTransmit() else { return nil }
        return (output.to.socketAddress, ByteBuffer(bytes: output.bytes), output.base == .relay)
    }

    package var nextDeadline: NIODeadline? { self.agent.nextDeadline }

    /// Checks refused for wrong credentials or integrity.
    package var rejectedChecks: Int { self.agent.rejectedChecks }

    /// Where the peer's nominating checks came from on the socket (this side controlled), oldest
    /// first: the peer sends its other datagrams from there as soon as it selects the pair, which
    /// can be before this side has (its own check of the pair still under way).
    package var nominatingSources: [SocketAddress] { self.agent.nominatingSources.map(\.socketAddress) }
}

extension ICEAgent {
    /// Whether a response with this transaction ID answers one of this agent's checks (or its
    /// consent check).
    func owns(transactionID: [UInt8]) -> Bool {
        self.pairs.contains { $0.transaction?.transactionID == transactionID } || self.isConsentAnswer(transactionID)
    }
}
