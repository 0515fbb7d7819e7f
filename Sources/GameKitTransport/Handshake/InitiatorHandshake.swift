import Crypto
import NIOCore

/// Why an initiator withdraws its initiation (carried in the cancel message).
enum CancelReason: UInt8, Sendable {
    case cancelled = 0
    case timedOut = 1
}

/// The initiator's side of one handshake: sends the initiation, repeats it with back-off, takes a
/// cookie when the responder asks for one, and turns the response into link keys.
///
/// The initiation is built once; repeats are byte-identical (apart from `mac2` once a cookie is
/// known), so the responder recognises them and never treats a repeat as a new request.
struct InitiatorHandshake {
    static let initialRetransmitInterval = TimeAmount.milliseconds(250)
    static let maximumRetransmitInterval = TimeAmount.seconds(2)

    let localIndex: UInt32
    let remoteAddress: SocketAddress
    let deadline: NIODeadline
    private let ephemeral: Curve25519.KeyAgreement.PrivateKey
    private let psk: PreSharedKey
    private let initiationWithoutMAC: ByteBuffer
    private let ephemeralPublic: ByteBuffer
    private var cookie: SymmetricKey?
    /// When a cookie last made the initiation go out again at once.
    private var lastCookieResend: NIODeadline?
    private(set) var nextRetransmit: NIODeadline
    private var interval = InitiatorHandshake.initialRetransmitInterval

    /// Builds the initiation. Fails when `payload` does not fit in one datagram.
    init(
        localIndex: UInt32,
        remoteAddress: SocketAddress,
        psk: PreSharedKey,
        parameters: TransportParameters,
        payload: ByteBuffer,
        maxDatagramSize: Int,
        now: NIODeadline,
        timeout: TimeAmount
    ) throws(TransportError) {
        let limit = Self.maximumPayload(maxDatagramSize: maxDatagramSize)
        guard payload.readableBytes <= limit else {
            throw .payloadTooLarge(size: payload.readableBytes, limit: limit)
        }
        self.localIndex = localIndex
        self.remoteAddress = remoteAddress
        self.deadline = now + timeout
        self.psk = psk
        self.ephemeral = Curve25519.KeyAgreement.PrivateKey()
        self.ephemeralPublic = ByteBuffer(bytes: self.ephemeral.publicKey.rawRepresentation)

        var header = ByteBuffer()
        InitiationMessage(
            version: ProtocolVersion.current,
            senderIndex: localIndex,
            ephemeralPublicKey: self.ephemeralPublic,
            sealed: ByteBuffer(),
            mac2: ByteBuffer()
        ).encodeHeader(into: &header)
        var plaintext = ByteBuffer()
        parameters.encode(into: &plaintext)
        plaintext.writeImmutableBuffer(payload)
        let key = KeySchedule.initiationKey(psk: psk, initiatorEphemeral: self.ephemeralPublic)
        var message = header
        AEAD.seal(plaintext, key: key, counter: 0, authenticating: header, into: &message)
        self.initiationWithoutMAC = message
        self.nextRetransmit = now + self.interval
    }

    /// The largest handshake payload an initiation of `maxDatagramSize` bytes can carry.
    static func maximumPayload(maxDatagramSize: Int) -> Int {
        maxDatagramSize - InitiationMessage.minimumSize
    }

    /// The initiation as sent now: with `mac2` under the cookie when there is one, else zeros.
    func datagram() -> ByteBuffer {
        var datagram = self.initiationWithoutMAC
        if let cookie {
            datagram.writeBytes(KeySchedule.truncatedMAC(key: cookie, over: self.initiationWithoutMAC))
        } else {
            datagram.writeRepeatingByte(0, count: WireSize.mac)
        }
        return datagram
    }

    /// The first 16 bytes of the ephemeral key: what the responder echoes.
    var echo: ByteBuffer { self.ephemeralPublic.getSlice(at: self.ephemeralPublic.readerIndex, length: WireSize.echo)! }

    func matchesEcho(_ echo: ByteBuffer) -> Bool { echo == self.echo }

    enum TimerAction {
        case none
        case retransmit(ByteBuffer)
        case fail
    }

    /// Repeats the initiation with doubling intervals (at most 2 s apart) until the deadline.
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
    /// the next timed repeat then carries the newest cookie).
    mutating func acceptCookie(_ cookie: ByteBuffer, now: NIODeadline) -> ByteBuffer? {
        self.cookie = SymmetricKey(data: Array(buffer: cookie))
        if let last = self.lastCookieResend, now - last < Self.initialRetransmitInterval {
            return nil
        }
        self.lastCookieResend = now
        self.nextRetransmit = min(now + self.interval, self.deadline)
        return self.datagram()
    }

    /// What a valid response yields.
    struct Completion {
        var keys: LinkKeys
        var peerParameters: TransportParameters
        var payload: ByteBuffer
    }

    /// Derives the link keys from a response, or returns nil when it does not authenticate (such a
    /// response is dropped as if never received).
    func complete(with response: ResponseMessage) -> Completion? {
        guard
            response.receiverIndex == self.localIndex,
            response.version == ProtocolVersion.current,
            let shared = KeySchedule.agree(self.ephemeral, peerPublicKey: response.ephemeralPublicKey)
        else { return nil }
        var header = ByteBuffer()
        response.encodeHeader(into: &header)
        let transcript = KeySchedule.transcriptHash(initiationWithoutMAC: self.initiationWithoutMAC, responseHeader: header)
        let (responseKey, keys) = KeySchedule.sessionKeys(sharedSecret: shared, psk: self.psk, transcriptHash: transcript)
        guard
            var plaintext = AEAD.open(response.sealed, key: responseKey, counter: 0, authenticating: header),
            let parameters = TransportParameters.decode(from: &plaintext)
        else { return nil }
        return Completion(keys: keys, peerParameters: parameters, payload: plaintext)
    }

    /// A cancel message withdrawing this initiation.
    func cancelDatagram(reason: CancelReason) -> ByteBuffer {
        var datagram = ByteBuffer()
        CancelMessage(version: ProtocolVersion.current, reason: reason.rawValue, senderIndex: self.localIndex, echo: self.echo, mac: ByteBuffer())
            .encodeWithoutMAC(into: &datagram)
        let key = KeySchedule.cancelKey(psk: self.psk, initiatorEphemeral: self.ephemeralPublic)
        datagram.writeBytes(KeySchedule.truncatedMAC(key: key, over: datagram))
        return datagram
    }
}
