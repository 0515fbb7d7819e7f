import Crypto
import NIOCore

/// Why an initiator withdraws its initiation (carried in the cancel message).
enum CancelReason: UInt8, Sendable {
    case cancelled = 0
    case timedOut = 1
}

/// The initiator's side of one handshake (PROTOCOL §6.1): sends its CPace share, repeating it
/// with back-off (taking a cookie when the responder asks for one) until the challenge comes;
/// checks the responder's key confirmation in it; then sends its sealed request, repeating it
/// until the response (or a reject) comes, and turns the response into the link.
///
/// Each message is built once; repeats are byte-identical (apart from `mac2` once a cookie is
/// known), so the responder recognises them and never treats a repeat as a new handshake.
struct InitiatorHandshake {
    static let initialRetransmitInterval = TimeAmount.milliseconds(250)
    /// 1 s: a handshake is two round trips (initiation and challenge, request and response), each
    /// needing both its datagrams through; with gaps capped at 2 s a 10 s handshake under 25 % loss
    /// each way failed about 1 in 230 times (1 in 5,000 at 1 s).
    static let maximumRetransmitInterval = TimeAmount.seconds(1)

    let localIndex: UInt32
    let remoteAddress: SocketAddress
    let deadline: NIODeadline
    private let scalar: [UInt8]
    private let share: ByteBuffer
    private let initiationHeader: ByteBuffer
    private let parameters: TransportParameters
    private let payload: ByteBuffer
    private var cookie: SymmetricKey?
    /// When a cookie last made the initiation go out again at once.
    private var lastCookieResend: NIODeadline?
    private(set) var nextRetransmit: NIODeadline
    private var interval = InitiatorHandshake.initialRetransmitInterval

    enum Phase {
        /// The share is out; the challenge has not come.
        case opening
        /// The challenge confirmed the password; the request is out, the response has not come.
        case requesting(keys: HandshakeKeys, request: ByteBuffer)
    }

    private(set) var phase = Phase.opening

    /// Builds the initiation. Fails when `payload` does not fit in the request's datagram.
    /// `scalar` is CPace's secret: fresh from the system's generator (tests may give their own).
    init(
        localIndex: UInt32,
        remoteAddress: SocketAddress,
        secret: HandshakeSecret,
        parameters: TransportParameters,
        payload: ByteBuffer,
        maxDatagramSize: Int,
        now: NIODeadline,
        timeout: TimeAmount,
        scalar: [UInt8] = CPace.randomScalar()
    ) throws(TransportError) {
        let limit = Self.maximumPayload(maxDatagramSize: maxDatagramSize)
        guard payload.readableBytes <= limit else {
            throw .payloadTooLarge(size: payload.readableBytes, limit: limit)
        }
        self.localIndex = localIndex
        self.remoteAddress = remoteAddress
        self.deadline = now + timeout
        self.parameters = parameters
        self.payload = payload
        self.scalar = scalar
        // The generator is a group element and the scalar nonzero: the product always exists.
        self.share = ByteBuffer(bytes: CPace.multiply(self.scalar, secret.generator)!)
        var header = ByteBuffer()
        InitiationMessage(version: ProtocolVersion.current, senderIndex: localIndex, share: self.share, mac2: ByteBuffer())
            .encodeWithoutMAC(into: &header)
        self.initiationHeader = header
        self.nextRetransmit = now + self.interval
    }

    /// The largest handshake payload a request of `maxDatagramSize` bytes can carry.
    static func maximumPayload(maxDatagramSize: Int) -> Int {
        maxDatagramSize - RequestMessage.minimumSize
    }

    /// The message of the current phase as sent now: the initiation (with `mac2` under the cookie
    /// when there is one, else zeros) or the request.
    func datagram() -> ByteBuffer {
        if case .requesting(_, let request) = self.phase { return request }
        var datagram = self.initiationHeader
        if let cookie {
            datagram.writeBytes(KeySchedule.truncatedMAC(key: cookie, over: self.initiationHeader))
        } else {
            datagram.writeRepeatingByte(0, count: WireSize.mac)
        }
        return datagram
    }

    /// The first 16 bytes of the share: what the responder echoes.
    var echo: ByteBuffer { self.share.getSlice(at: self.share.readerIndex, length: WireSize.echo)! }

    func matchesEcho(_ echo: ByteBuffer) -> Bool { echo == self.echo }

    enum TimerAction {
        case none
        case retransmit(ByteBuffer)
        case fail
    }

    /// Repeats the current message with doubling intervals (at most 1 s apart) until the deadline.
    mutating func handleTimeout(now: NIODeadline) -> TimerAction {
        if now >= self.deadline { return .fail }
        guard now >= self.nextRetransmit else { return .none }
        self.interval = min(self.interval * 2, Self.maximumRetransmitInterval)
        self.nextRetransmit = min(now + self.interval, self.deadline)
        return .retransmit(self.datagram())
    }

    var nextDeadline: NIODeadline { min(self.nextRetransmit, self.deadline) }

    /// Takes the responder's cookie and returns the initiation to send again at once, unless a
    /// cookie already caused an immediate repeat within the initial retransmission interval (so
    /// that forged or repeated cookies cannot make this side send faster than its timer would;
    /// the next timed repeat then carries the newest cookie). Nil after the challenge.
    mutating func acceptCookie(_ cookie: ByteBuffer, now: NIODeadline) -> ByteBuffer? {
        guard case .opening = self.phase else { return nil }
        self.cookie = SymmetricKey(data: Array(buffer: cookie))
        if let last = self.lastCookieResend, now - last < Self.initialRetransmitInterval {
            return nil
        }
        self.lastCookieResend = now
        self.nextRetransmit = min(now + self.interval, self.deadline)
        return self.datagram()
    }

    enum ChallengeOutcome {
        /// Not for this handshake, or not in this phase, or a share that is not a group element:
        /// dropped as if never received.
        case ignored
        /// The responder used the same password: send the request (this side now waits for the
        /// response).
        case request(ByteBuffer)
        /// The responder's confirmation is wrong: it used another password (or someone forged the
        /// challenge). Send the request anyway, so that the responder learns it at once too, and
        /// fail; it carries the parameters only, never the application's payload.
        case wrongPassword(ByteBuffer)
    }

    /// This side's half of CPace on a challenge for this handshake, and whether the responder's
    /// confirmation holds; nil when the challenge is not for this handshake or its share is not a
    /// group element.
    private func exchange(_ message: ChallengeMessage, datagram: ByteBuffer) -> (keys: HandshakeKeys, confirmed: Bool)? {
        guard case .opening = self.phase, message.version == ProtocolVersion.current, self.matchesEcho(message.echo) else { return nil }
        let header = datagram.getSlice(at: datagram.readerIndex, length: ChallengeMessage.headerSize)!
        guard
            let keys = KeySchedule.handshakeKeys(
                scalar: self.scalar, peerShare: message.share, initiatorShare: self.share, responderShare: message.share,
                initiationHeader: self.initiationHeader, challengeHeader: header)
        else { return nil }
        return (keys, AEAD.open(message.tag, key: keys.challenge, counter: 0, authenticating: header) != nil)
    }

    /// Runs this side's half of CPace on the challenge and checks the responder's confirmation.
    mutating func handleChallenge(_ message: ChallengeMessage, datagram: ByteBuffer, now: NIODeadline) -> ChallengeOutcome {
        guard let (keys, confirmed) = self.exchange(message, datagram: datagram) else { return .ignored }
        var requestHeader = ByteBuffer()
        RequestMessage(version: ProtocolVersion.current, senderIndex: self.localIndex, sealed: ByteBuffer()).encodeHeader(into: &requestHeader)
        var plaintext = ByteBuffer()
        self.parameters.encode(into: &plaintext)
        if confirmed { plaintext.writeImmutableBuffer(self.payload) }
        var request = requestHeader
        AEAD.seal(plaintext, key: keys.request, counter: 0, authenticating: requestHeader, into: &request)
        guard confirmed else { return .wrongPassword(request) }
        self.phase = .requesting(keys: keys, request: request)
        self.interval = Self.initialRetransmitInterval
        self.nextRetransmit = min(now + self.interval, self.deadline)
        return .request(request)
    }

    /// What a valid response yields.
    struct Completion {
        var keys: LinkKeys
        var peerParameters: TransportParameters
        var payload: ByteBuffer
    }

    /// The link keys and what the response carried, or nil when it does not authenticate (such a
    /// response is dropped as if never received).
    func complete(with response: ResponseMessage, datagram: ByteBuffer) -> Completion? {
        guard
            case .requesting(let keys, _) = self.phase,
            response.receiverIndex == self.localIndex,
            response.version == ProtocolVersion.current
        else { return nil }
        let header = datagram.getSlice(at: datagram.readerIndex, length: ResponseMessage.headerSize)!
        guard
            var plaintext = AEAD.open(response.sealed, key: keys.response, counter: 0, authenticating: header),
            let parameters = TransportParameters.decode(from: &plaintext)
        else { return nil }
        return Completion(keys: keys.link, peerParameters: parameters, payload: plaintext)
    }

    /// A cancel message withdrawing this handshake; nil before the challenge (there are no keys
    /// to authenticate one yet: see ``cancel(answering:datagram:reason:)``).
    func cancelDatagram(reason: CancelReason) -> ByteBuffer? {
        guard case .requesting(let keys, _) = self.phase else { return nil }
        return self.cancel(keys: keys, reason: reason)
    }

    /// For a handshake withdrawn before its challenge came, the cancel answering the challenge
    /// when it does come: under the exchange's K_cancel, it tells the responder to forget its
    /// challenge and that the guess the challenge answered was right, so that an honest initiator
    /// that gave up (a timeout, a path that lost the race) spends none of its address's guesses.
    /// Nil when the challenge is not for this handshake or does not confirm the password.
    func cancel(answering message: ChallengeMessage, datagram: ByteBuffer, reason: CancelReason) -> ByteBuffer? {
        guard let (keys, confirmed) = self.exchange(message, datagram: datagram), confirmed else { return nil }
        return self.cancel(keys: keys, reason: reason)
    }

    private func cancel(keys: HandshakeKeys, reason: CancelReason) -> ByteBuffer {
        var datagram = ByteBuffer()
        CancelMessage(version: ProtocolVersion.current, reason: reason.rawValue, senderIndex: self.localIndex, echo: self.echo, mac: ByteBuffer())
            .encodeWithoutMAC(into: &datagram)
        datagram.writeBytes(KeySchedule.truncatedMAC(key: keys.cancel, over: datagram))
        return datagram
    }
}
