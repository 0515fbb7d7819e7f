import Crypto
import NIOCore

/// The responder's side of the handshake, as pure functions (PROTOCOL §6.2). The responder
/// answers an initiation with a challenge (its CPace share and key confirmation) and keeps a
/// ``ChallengedHandshake``; only a request that opens under the keys of that exchange becomes a
/// ``PendingRequest`` the application sees.
enum ResponderHandshake {
    /// The challenge answering an initiation, and the keys of the exchange. Nil when the
    /// initiator's share is not a group element (or gives the identity): CPace's abort.
    static func challenge(_ message: InitiationMessage, datagram: ByteBuffer, secret: HandshakeSecret) -> (datagram: ByteBuffer, keys: HandshakeKeys)? {
        let scalar = CPace.randomScalar()
        let share = ByteBuffer(bytes: CPace.multiply(scalar, secret.generator)!)
        var header = ByteBuffer()
        ChallengeMessage(version: ProtocolVersion.current, receiverIndex: message.senderIndex, echo: message.echo, share: share, tag: ByteBuffer())
            .encodeHeader(into: &header)
        let initiationHeader = datagram.getSlice(at: datagram.readerIndex, length: InitiationMessage.headerSize)!
        guard
            let keys = KeySchedule.handshakeKeys(
                scalar: scalar, peerShare: message.share, initiatorShare: message.share, responderShare: share,
                initiationHeader: initiationHeader, challengeHeader: header)
        else { return nil }
        var challenge = header
        AEAD.seal(ByteBuffer(), key: keys.challenge, counter: 0, authenticating: header, into: &challenge)
        return (challenge, keys)
    }

    /// The parameters and payload of a request, or nil when it does not open under `keys` (the
    /// initiator used another password) or its parameters are unusable.
    static func open(_ message: RequestMessage, datagram: ByteBuffer, keys: HandshakeKeys) -> (parameters: TransportParameters, payload: ByteBuffer)? {
        let header = datagram.getSlice(at: datagram.readerIndex, length: RequestMessage.headerSize)!
        guard
            var plaintext = AEAD.open(message.sealed, key: keys.request, counter: 0, authenticating: header),
            let parameters = TransportParameters.decode(from: &plaintext)
        else { return nil }
        return (parameters, plaintext)
    }

    /// The response accepting a request.
    static func respond(
        initiatorIndex: UInt32,
        localIndex: UInt32,
        parameters: TransportParameters,
        payload: ByteBuffer,
        keys: HandshakeKeys
    ) -> ByteBuffer {
        var header = ByteBuffer()
        ResponseMessage(version: ProtocolVersion.current, senderIndex: localIndex, receiverIndex: initiatorIndex, sealed: ByteBuffer())
            .encodeHeader(into: &header)
        var plaintext = ByteBuffer()
        parameters.encode(into: &plaintext)
        plaintext.writeImmutableBuffer(payload)
        var datagram = header
        AEAD.seal(plaintext, key: keys.response, counter: 0, authenticating: header, into: &datagram)
        return datagram
    }

    /// The largest accept payload. A response may be larger than the request it answers: the
    /// request opened under keys only the challenge sent to its source gives, so that source
    /// proved it receives at its address (the challenge itself is never larger than the
    /// initiation).
    static func maximumResponsePayload(maxDatagramSize: Int) -> Int {
        maxDatagramSize - ResponseMessage.minimumSize
    }

    static func reject(_ reason: RejectReason, code: UInt16 = 0, receiverIndex: UInt32, echo: ByteBuffer) -> ByteBuffer {
        var datagram = ByteBuffer()
        RejectMessage(version: ProtocolVersion.current, reason: reason, receiverIndex: receiverIndex, code: code, echo: echo)
            .encode(into: &datagram)
        return datagram
    }

    static func cookieReply(_ cookie: [UInt8], receiverIndex: UInt32, echo: ByteBuffer) -> ByteBuffer {
        var datagram = ByteBuffer()
        CookieMessage(version: ProtocolVersion.current, receiverIndex: receiverIndex, echo: echo, cookie: ByteBuffer(bytes: cookie))
            .encode(into: &datagram)
        return datagram
    }

    /// Whether a cancel message carries a valid MAC under `cancelKey`.
    static func isAuthentic(cancel datagram: ByteBuffer, cancelKey: SymmetricKey) -> Bool {
        let covered = datagram.getSlice(at: datagram.readerIndex, length: CancelMessage.authenticatedSize)!
        let mac = datagram.getSlice(at: datagram.readerIndex + CancelMessage.authenticatedSize, length: WireSize.mac)!
        return KeySchedule.constantTimeEqual(mac, KeySchedule.truncatedMAC(key: cancelKey, over: covered))
    }
}
