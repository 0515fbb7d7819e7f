@_spi(Machine) import GameKitMachine
import Crypto
import NIOCore

/// A TURN client (RFC 8656) for one allocation on one server over UDP, sans-I/O: it asks for a
/// relayed address with the long-term credential mechanism (RFC 8489 §9.2), keeps the allocation
/// and its permissions refreshed, wraps outgoing data in Send indications and unwraps Data
/// indications.
///
/// The owner sends every datagram `poll` returns to ``server``, hands every STUN message from the
/// server to `receive`, and calls `poll` again by ``nextDeadline``.
package struct TURNClient: Sendable {
    package enum State: Equatable, Sendable {
        case allocating
        /// The relayed address others can send to, and this socket's server-reflexive address.
        case allocated(relayed: TraversalAddress, mapped: TraversalAddress?)
        case failed(String)
        case closed
    }

    /// What `receive` found.
    package enum Received: Equatable, Sendable {
        /// Not a message for this client.
        case ignored
        /// A response that moved the client along (check `state`).
        case handled
        /// Data a peer sent to the relayed address.
        case data([UInt8], from: TraversalAddress)
    }

    package let server: TraversalAddress
    private let username: String
    private let password: String
    private let timing: STUNTransaction.Timing
    package private(set) var state = State.allocating

    private var realm: String?
    private var nonce: String?
    private var key: [UInt8]?
    private var pending: [Pending] = []
    private var refreshAt: NIODeadline?
    /// Transaction IDs come from here.
    private var random: MachineRandom
    private var lifetime: TimeAmount = .seconds(600)
    /// Peer IP addresses (bytes) with permissions, and when to refresh them.
    private var permissions: [[UInt8]: NIODeadline] = [:]
    private var outbox: [[UInt8]] = []

    private struct Pending: Sendable {
        enum Kind: Equatable, Sendable {
            /// `createPermission` names one peer IP address (its bytes).
            case allocate, refresh(release: Bool), createPermission([UInt8])
        }
        var kind: Kind
        var transaction: STUNTransaction
        /// Authentication retries left (401 and 438 answers).
        var retries: Int
    }

    /// Permissions last 300 s (RFC 8656 §9); they are refreshed a minute early.
    static let permissionRefresh = TimeAmount.seconds(240)

    /// A client whose allocation request goes out at once.
    package init(server: TraversalAddress, username: String, password: String, now: NIODeadline, random: MachineRandom) {
        self.init(server: server, username: username, password: password, timing: .init(), now: now, random: random)
    }

    init(server: TraversalAddress, username: String, password: String, timing: STUNTransaction.Timing = .init(), now: NIODeadline,
         random: MachineRandom = .system()) {
        self.random = random
        self.server = server
        self.username = username
        self.password = password
        self.timing = timing
        self.start(.allocate, now: now, retries: 2)
    }

    /// The long-term credential key: MD5(username ":" realm ":" password) (RFC 8489 §9.2.2).
    static func longTermKey(username: String, realm: String, password: String) -> [UInt8] {
        Array(Insecure.MD5.hash(data: Array("\(username):\(realm):\(password)".utf8)))
    }

    package var relayedAddress: TraversalAddress? {
        if case .allocated(let relayed, _) = self.state { return relayed }
        return nil
    }

    // MARK: - Requests

    private mutating func request(_ kind: Pending.Kind) -> STUNMessage {
        var attributes: [STUNAttribute] = []
        let method: STUNMessage.Method
        switch kind {
        case .allocate:
            method = .allocate
            attributes.append(STUNAttribute(.requestedTransport, [17, 0, 0, 0]))
        case .refresh(let release):
            method = .refresh
            attributes.append(.uint32(.lifetime, release ? 0 : UInt32(self.lifetime.nanoseconds / 1_000_000_000)))
        case .createPermission(let ip):
            let id = STUNMessage.randomTransactionID(using: &self.random)
            let peer = STUNAttribute.xorAddress(.xorPeerAddress, TraversalAddress(bytes: ip, port: 0)!, transactionID: id)
            return self.authenticated(STUNMessage(.createPermission, .request, transactionID: id, attributes: [peer]))
        }
        return self.authenticated(STUNMessage(method, .request, transactionID: STUNMessage.randomTransactionID(using: &self.random), attributes: attributes))
    }

    private func authenticated(_ message: STUNMessage) -> STUNMessage {
        var message = message
        message.attributes.append(.text(.software, TraversalSoftware.name))
        if let realm, let nonce {
            message.attributes += [.text(.username, self.username), .text(.realm, realm), .text(.nonce, nonce)]
        }
        return message
    }

    private mutating func start(_ kind: Pending.Kind, now: NIODeadline, retries: Int) {
        let message = self.request(kind)
        let bytes = message.encoded(integrityKey: self.key, fingerprint: true)
        self.pending.append(Pending(kind: kind, transaction: STUNTransaction(message: message, bytes: bytes, timing: self.timing, now: now), retries: retries))
    }

    /// Asks the server to let these peers' IP addresses send to the relayed address (ports do not
    /// matter to permissions). Already-permitted addresses are skipped, and so are addresses of
    /// the other family than the relayed address's (RFC 6156 §6: an IPv4 allocation relays to
    /// IPv4 peers, whichever family reaches the server).
    package mutating func permit(_ peers: [TraversalAddress], now: NIODeadline) {
        guard case .allocated(let relayed, _) = self.state else { return }
        var fresh: [[UInt8]] = []
        for peer in peers where peer.isIPv4 == relayed.isIPv4 && !peer.isLoopback
            && self.permissions[peer.bytes] == nil && !fresh.contains(peer.bytes)
        {
            fresh.append(peer.bytes)
        }
        // One request per address: a server refusing one (e.g. 403 for a private or loopback
        // address it will not relay to) does not take the others down with it.
        for ip in fresh {
            self.permissions[ip] = now + Self.permissionRefresh
            self.start(.createPermission(ip), now: now, retries: 1)
        }
    }

    /// A Send indication carrying `payload` to `peer` through the relay (RFC 8656 §11.1).
    package mutating func sendIndication(_ payload: [UInt8], to peer: TraversalAddress) -> [UInt8] {
        let id = STUNMessage.randomTransactionID(using: &self.random)
        return STUNMessage(.send, .indication, transactionID: id, attributes: [
            .xorAddress(.xorPeerAddress, peer, transactionID: id), STUNAttribute(.data, payload),
        ]).encoded()
    }

    /// Releases the allocation (a Refresh with lifetime 0), sent once, unanswered.
    package mutating func close() -> [UInt8]? {
        guard case .allocated = self.state else {
            self.state = .closed
            return nil
        }
        self.state = .closed
        return self.request(.refresh(release: true)).encoded(integrityKey: self.key, fingerprint: true)
    }

    // MARK: - Time

    /// Runs what is due at `now`: refreshes, permissions, retransmissions (their datagrams are
    /// taken with ``pollTransmit()``).
    package mutating func handleTimeout(now: NIODeadline) {
        if case .allocated = self.state {
            if let refreshAt = self.refreshAt, now >= refreshAt {
                self.refreshAt = nil
                self.start(.refresh(release: false), now: now, retries: 2)
            }
            let due = self.permissions.filter { $0.value <= now }.map(\.key)
            for ip in due {
                self.permissions[ip] = now + Self.permissionRefresh
                self.start(.createPermission(ip), now: now, retries: 1)
            }
        }
        var index = 0
        while index < self.pending.count {
            switch self.pending[index].transaction.poll(now: now) {
            case .wait:
                index += 1
            case .send(let bytes):
                self.outbox.append(bytes)
                index += 1
            case .expired:
                let kind = self.pending.remove(at: index).kind
                if kind == .allocate || kind == .refresh(release: false) {
                    self.state = .failed("the TURN server did not answer")
                }
            }
        }
    }

    /// The next datagram for the server, in order; nil when none is due.
    package mutating func pollTransmit() -> [UInt8]? {
        self.outbox.isEmpty ? nil : self.outbox.removeFirst()
    }

    package var nextDeadline: NIODeadline? {
        switch self.state {
        case .failed, .closed: return nil
        default: break
        }
        let deadlines = self.pending.map(\.transaction.deadline) + [self.refreshAt].compactMap { $0 } + Array(self.permissions.values)
        return deadlines.min()
    }

    // MARK: - Receiving

    /// Takes a datagram that came from the server (anything but STUN is ignored).
    package mutating func receive(_ datagram: ByteBuffer, now: NIODeadline) -> Received {
        guard let decoded = try? STUNMessage.decode(Array(datagram.readableBytesView)) else { return .ignored }
        return self.receive(decoded, now: now)
    }

    /// Takes a STUN message that came from the server.
    mutating func receive(_ decoded: DecodedSTUNMessage, now: NIODeadline) -> Received {
        let message = decoded.message
        if message.method == .data, message.messageClass == .indication {
            guard case .allocated = self.state, let peer = message.xorAddress(.xorPeerAddress),
                let data = message.attribute(.data)?.value
            else { return .ignored }
            return .data(data, from: peer)
        }
        guard let index = self.pending.firstIndex(where: { $0.transaction.transactionID == message.transactionID }) else {
            return .ignored
        }
        let request = self.pending.remove(at: index)
        switch message.messageClass {
        case .success:
            // A success must be signed with the key once one is in use.
            if let key = self.key, !decoded.hasValidIntegrity(key: key) {
                self.pending.insert(request, at: index)
                return .ignored
            }
            self.succeeded(request.kind, message, now: now)
        case .error:
            self.failed(request, message, now: now)
        default:
            self.pending.insert(request, at: index)
            return .ignored
        }
        return .handled
    }

    private mutating func succeeded(_ kind: Pending.Kind, _ message: STUNMessage, now: NIODeadline) {
        switch kind {
        case .allocate:
            guard let relayed = message.xorAddress(.xorRelayedAddress) else {
                self.state = .failed("the allocation has no relayed address")
                return
            }
            if let seconds = message.attribute(.lifetime)?.uint32Value, seconds > 0 {
                self.lifetime = .seconds(Int64(seconds))
            }
            self.state = .allocated(relayed: relayed, mapped: message.xorAddress(.xorMappedAddress))
            self.scheduleRefresh(now: now)
        case .refresh(let release):
            if !release {
                if let seconds = message.attribute(.lifetime)?.uint32Value, seconds > 0 {
                    self.lifetime = .seconds(Int64(seconds))
                }
                self.scheduleRefresh(now: now)
            }
        case .createPermission:
            break
        }
    }

    private mutating func scheduleRefresh(now: NIODeadline) {
        let seconds = self.lifetime.nanoseconds / 1_000_000_000
        self.refreshAt = now + .seconds(seconds > 120 ? seconds - 60 : max(1, seconds / 2))
    }

    private mutating func failed(_ request: Pending, _ message: STUNMessage, now: NIODeadline) {
        let code = message.errorCode ?? 0
        // 401: credentials are needed (first request); 438: the nonce went stale. Both carry the
        // server's realm and a new nonce; the request is repeated, signed.
        if (code == 401 || code == 438), request.retries > 0,
            let nonce = message.attribute(.nonce)?.stringValue
        {
            if let realm = message.attribute(.realm)?.stringValue { self.realm = realm }
            guard let realm = self.realm else { return self.give(up: request.kind, "TURN error \(code) without a realm") }
            let alreadySigned = self.key != nil && code == 401 && self.nonce == nonce
            self.nonce = nonce
            self.key = Self.longTermKey(username: self.username, realm: realm, password: self.password)
            if alreadySigned { return self.give(up: request.kind, "the TURN server refused the credentials") }
            self.start(request.kind, now: now, retries: request.retries - 1)
            return
        }
        let reason = message.attribute(.errorCode)?.errorCodeValue?.reason ?? ""
        self.give(up: request.kind, "TURN error \(code) \(reason)")
    }

    private mutating func give(up kind: Pending.Kind, _ reason: String) {
        switch kind {
        case .allocate, .refresh(release: false): self.state = .failed(reason)
        case .createPermission(let ip): self.permissions[ip] = nil
        case .refresh(release: true): break
        }
    }
}
