import Crypto
import NIOCore

/// The responder's side of the handshake, as pure functions: the responder keeps no state for an
/// initiation until it authenticated (and, under load, until its source proved its address), and
/// the state it then keeps is a ``PendingRequest``.
enum ResponderHandshake {
    /// What an authenticated initiation carried.
    struct VerifiedInitiation {
        var message: InitiationMessage
        var initiationWithoutMAC: ByteBuffer
        var parameters: TransportParameters
        var payload: ByteBuffer
        var cancelKey: SymmetricKey
    }

    enum VerificationFailure: Error {
        /// Did not authenticate under this side's pre-shared key.
        case authentication
        /// Authenticated, but the parameters inside are unusable.
        case malformed
    }

    /// Authenticates an initiation under the pre-shared key.
    static func verify(_ message: InitiationMessage, datagram: ByteBuffer, psk: PreSharedKey) -> Result<VerifiedInitiation, VerificationFailure> {
        let header = datagram.getSlice(at: datagram.readerIndex, length: InitiationMessage.headerSize)!
        let key = KeySchedule.initiationKey(psk: psk, initiatorEphemeral: message.ephemeralPublicKey)
        guard var plaintext = AEAD.open(message.sealed, key: key, counter: 0, authenticating: header) else {
            return .failure(.authentication)
        }
        guard let parameters = TransportParameters.decode(from: &plaintext) else {
            return .failure(.malformed)
        }
        return .success(
            VerifiedInitiation(
                message: message,
                initiationWithoutMAC: datagram.getSlice(at: datagram.readerIndex, length: datagram.readableBytes - WireSize.mac)!,
                parameters: parameters,
                payload: plaintext,
                cancelKey: KeySchedule.cancelKey(psk: psk, initiatorEphemeral: message.ephemeralPublicKey)
            )
        )
    }

    /// The response accepting an initiation, and the keys of the new link. Nil when the initiator's
    /// ephemeral key is a low-order point (the key agreement would not depend on it).
    static func respond(
        initiatorEphemeral: ByteBuffer,
        initiatorIndex: UInt32,
        initiationWithoutMAC: ByteBuffer,
        localIndex: UInt32,
        parameters: TransportParameters,
        payload: ByteBuffer,
        psk: PreSharedKey
    ) -> (datagram: ByteBuffer, keys: LinkKeys)? {
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        guard let shared = KeySchedule.agree(ephemeral, peerPublicKey: initiatorEphemeral) else { return nil }
        let response = ResponseMessage(
            version: ProtocolVersion.current,
            senderIndex: localIndex,
            receiverIndex: initiatorIndex,
            ephemeralPublicKey: ByteBuffer(bytes: ephemeral.publicKey.rawRepresentation),
            sealed: ByteBuffer()
        )
        var header = ByteBuffer()
        response.encodeHeader(into: &header)
        let transcript = KeySchedule.transcriptHash(initiationWithoutMAC: initiationWithoutMAC, responseHeader: header)
        let (responseKey, keys) = KeySchedule.sessionKeys(sharedSecret: shared, psk: psk, transcriptHash: transcript)
        var plaintext = ByteBuffer()
        parameters.encode(into: &plaintext)
        plaintext.writeImmutableBuffer(payload)
        var datagram = header
        AEAD.seal(plaintext, key: responseKey, counter: 0, authenticating: header, into: &datagram)
        return (datagram, keys)
    }

    /// The largest accept payload for an initiation of `initiationSize` bytes: a response is never
    /// larger than the initiation it answers.
    static func maximumResponsePayload(initiationSize: Int, maxDatagramSize: Int) -> Int {
        min(initiationSize, maxDatagramSize) - ResponseMessage.minimumSize
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
