import NIOCore

// The handshake's seven message formats. Each type encodes itself into a ByteBuffer and decodes
// from a whole datagram; decoding checks sizes only; authentication is the handshake code's job.
// Byte layouts are tabulated in docs/PROTOCOL.md §3.

/// Byte 2 of the two handshake types: type 4 (initiator → responder) and type 5 (responder →
/// initiator) each carry two messages, told apart by it (PROTOCOL §3.1).
enum HandshakeKind: UInt8 {
    /// The initiator's CPace share (type 4), or the responder's share and confirmation (type 5).
    case share = 0
    /// The initiator's sealed request (type 4), or the responder's sealed acceptance (type 5).
    case sealed = 1

    /// The kind of a type-4 or type-5 datagram; nil when byte 2 names none.
    static func of(_ datagram: ByteBuffer) -> HandshakeKind? {
        datagram.getInteger(at: datagram.readerIndex + 2, as: UInt8.self).flatMap(HandshakeKind.init(rawValue:))
    }
}

/// Initiator → responder, first: the initiator's CPace share. Carries nothing else; it is padded
/// so that the challenge answering it is never larger.
struct InitiationMessage: Equatable {
    /// Bytes `mac2` covers: type, version, kind, reserved, sender index, share, padding.
    static let headerSize = 56
    static let size = headerSize + WireSize.mac

    var version: UInt8
    var senderIndex: UInt32
    /// Ya: the initiator's scalar times the password's generator.
    var share: ByteBuffer
    var mac2: ByteBuffer

    /// The first 16 bytes of the share, which replies echo.
    var echo: ByteBuffer { self.share.getSlice(at: self.share.readerIndex, length: WireSize.echo)! }

    /// Writes everything but `mac2`; that is computed over these bytes.
    func encodeWithoutMAC(into buffer: inout ByteBuffer) {
        buffer.writeInteger(PacketType.initiation.rawValue)
        buffer.writeInteger(self.version)
        buffer.writeInteger(HandshakeKind.share.rawValue)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(self.senderIndex)
        buffer.writeImmutableBuffer(self.share)
        buffer.writeRepeatingByte(0, count: Self.headerSize - 8 - WireSize.publicKey)
    }

    static func decode(_ datagram: ByteBuffer) -> InitiationMessage? {
        var buffer = datagram
        guard
            buffer.readableBytes == size,
            buffer.readInteger(as: UInt8.self) == PacketType.initiation.rawValue,
            let version = buffer.readInteger(as: UInt8.self),
            buffer.readInteger(as: UInt8.self) == HandshakeKind.share.rawValue,
            buffer.readInteger(as: UInt8.self) != nil,
            let sender = buffer.readInteger(as: UInt32.self),
            let share = buffer.readSlice(length: WireSize.publicKey),
            // The padding is zero: it is in the transcript, and only one encoding is accepted.
            buffer.readSlice(length: Self.headerSize - 8 - WireSize.publicKey)?.readableBytesView.allSatisfy({ $0 == 0 }) == true,
            let mac2 = buffer.readSlice(length: WireSize.mac)
        else { return nil }
        return InitiationMessage(version: version, senderIndex: sender, share: share, mac2: mac2)
    }

    /// The version byte of anything that starts like an initiator's message, even one too short
    /// or of an unknown version to decode, so that the responder can answer with the version it
    /// speaks.
    static func peekVersionAndEcho(_ datagram: ByteBuffer) -> (version: UInt8, senderIndex: UInt32, echo: ByteBuffer)? {
        guard
            let version = datagram.getInteger(at: datagram.readerIndex + 1, as: UInt8.self),
            let sender = datagram.getInteger(at: datagram.readerIndex + 4, as: UInt32.self),
            let echo = datagram.getSlice(at: datagram.readerIndex + 8, length: WireSize.echo)
        else { return nil }
        return (version, sender, echo)
    }
}

/// Responder → initiator, first: the responder's CPace share and its key confirmation (an AEAD
/// tag over the message under a key only the same password gives).
struct ChallengeMessage: Equatable {
    /// Bytes the tag authenticates: type, version, kind, reserved, receiver index, echo, share.
    static let headerSize = 56
    static let size = headerSize + WireSize.tag

    var version: UInt8
    var receiverIndex: UInt32
    var echo: ByteBuffer
    /// Yb: the responder's scalar times the password's generator.
    var share: ByteBuffer
    var tag: ByteBuffer

    func encodeHeader(into buffer: inout ByteBuffer) {
        buffer.writeInteger(PacketType.response.rawValue)
        buffer.writeInteger(self.version)
        buffer.writeInteger(HandshakeKind.share.rawValue)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(self.receiverIndex)
        buffer.writeImmutableBuffer(self.echo)
        buffer.writeImmutableBuffer(self.share)
    }

    static func decode(_ datagram: ByteBuffer) -> ChallengeMessage? {
        var buffer = datagram
        guard
            buffer.readableBytes == size,
            buffer.readInteger(as: UInt8.self) == PacketType.response.rawValue,
            let version = buffer.readInteger(as: UInt8.self),
            buffer.readInteger(as: UInt8.self) == HandshakeKind.share.rawValue,
            buffer.readInteger(as: UInt8.self) != nil,
            let receiver = buffer.readInteger(as: UInt32.self),
            let echo = buffer.readSlice(length: WireSize.echo),
            let share = buffer.readSlice(length: WireSize.publicKey),
            let tag = buffer.readSlice(length: WireSize.tag)
        else { return nil }
        return ChallengeMessage(version: version, receiverIndex: receiver, echo: echo, share: share, tag: tag)
    }
}

/// Initiator → responder, second: the transport parameters and the application's payload, sealed
/// under a key from the exchange. Opening it proves the initiator used the same password.
struct RequestMessage: Equatable {
    /// Bytes the seal authenticates: type, version, kind, reserved, sender index.
    static let headerSize = 8
    static let minimumSize = headerSize + TransportParameters.encodedSize + WireSize.tag

    var version: UInt8
    var senderIndex: UInt32
    var sealed: ByteBuffer

    func encodeHeader(into buffer: inout ByteBuffer) {
        buffer.writeInteger(PacketType.initiation.rawValue)
        buffer.writeInteger(self.version)
        buffer.writeInteger(HandshakeKind.sealed.rawValue)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(self.senderIndex)
    }

    static func decode(_ datagram: ByteBuffer) -> RequestMessage? {
        var buffer = datagram
        guard
            buffer.readableBytes >= minimumSize,
            buffer.readInteger(as: UInt8.self) == PacketType.initiation.rawValue,
            let version = buffer.readInteger(as: UInt8.self),
            buffer.readInteger(as: UInt8.self) == HandshakeKind.sealed.rawValue,
            buffer.readInteger(as: UInt8.self) != nil,
            let sender = buffer.readInteger(as: UInt32.self),
            let sealed = buffer.readSlice(length: buffer.readableBytes)
        else { return nil }
        return RequestMessage(version: version, senderIndex: sender, sealed: sealed)
    }

    /// The seal's last 16 bytes: what tells a repeat of this request from another.
    var tag: ByteBuffer { self.sealed.getSlice(at: self.sealed.writerIndex - WireSize.tag, length: WireSize.tag)! }
}

/// Responder → initiator, second: accepts, with the responder's parameters and payload sealed.
struct ResponseMessage: Equatable {
    /// Bytes the seal authenticates: type, version, kind, reserved, sender and receiver index.
    static let headerSize = 12
    static let minimumSize = headerSize + TransportParameters.encodedSize + WireSize.tag

    var version: UInt8
    var senderIndex: UInt32
    var receiverIndex: UInt32
    var sealed: ByteBuffer

    func encode(into buffer: inout ByteBuffer) {
        self.encodeHeader(into: &buffer)
        buffer.writeImmutableBuffer(self.sealed)
    }

    func encodeHeader(into buffer: inout ByteBuffer) {
        buffer.writeInteger(PacketType.response.rawValue)
        buffer.writeInteger(self.version)
        buffer.writeInteger(HandshakeKind.sealed.rawValue)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(self.senderIndex)
        buffer.writeInteger(self.receiverIndex)
    }

    static func decode(_ datagram: ByteBuffer) -> ResponseMessage? {
        var buffer = datagram
        guard
            buffer.readableBytes >= minimumSize,
            buffer.readInteger(as: UInt8.self) == PacketType.response.rawValue,
            let version = buffer.readInteger(as: UInt8.self),
            buffer.readInteger(as: UInt8.self) == HandshakeKind.sealed.rawValue,
            buffer.readInteger(as: UInt8.self) != nil,
            let sender = buffer.readInteger(as: UInt32.self),
            let receiver = buffer.readInteger(as: UInt32.self),
            let sealed = buffer.readSlice(length: buffer.readableBytes)
        else { return nil }
        return ResponseMessage(version: version, senderIndex: sender, receiverIndex: receiver, sealed: sealed)
    }
}

/// Why a responder refused an initiation.
enum RejectReason: UInt8, Sendable {
    /// The request did not open: the two sides hold different passwords.
    case authenticationFailed = 1
    /// The responder's application denied the request; `code` says why.
    case denied = 2
    /// The responder does not speak the initiation's version.
    case unsupportedVersion = 3

    /// Reasons a later version may add are read as a denial, so that the initiator fails at once
    /// instead of waiting for its timeout.
    init(wireValue: UInt8) {
        self = RejectReason(rawValue: wireValue) ?? .denied
    }
}

/// Responder → initiator: refuses. Never larger than the initiation it answers.
struct RejectMessage: Equatable {
    static let size = 28

    var version: UInt8
    var reason: RejectReason
    var receiverIndex: UInt32
    var code: UInt16
    /// Bytes 8..<24 of the initiation, so that only someone who saw it can forge the reject.
    var echo: ByteBuffer

    func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(PacketType.reject.rawValue)
        buffer.writeInteger(self.version)
        buffer.writeInteger(self.reason.rawValue)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(self.receiverIndex)
        buffer.writeInteger(self.code)
        buffer.writeInteger(UInt16(0))
        buffer.writeImmutableBuffer(self.echo)
    }

    static func decode(_ datagram: ByteBuffer) -> RejectMessage? {
        var buffer = datagram
        guard
            buffer.readableBytes == size,
            buffer.readInteger(as: UInt8.self) == PacketType.reject.rawValue,
            let version = buffer.readInteger(as: UInt8.self),
            let reasonByte = buffer.readInteger(as: UInt8.self),
            buffer.readInteger(as: UInt8.self) != nil,
            let receiver = buffer.readInteger(as: UInt32.self),
            let code = buffer.readInteger(as: UInt16.self),
            buffer.readInteger(as: UInt16.self) != nil,
            let echo = buffer.readSlice(length: WireSize.echo)
        else { return nil }
        return RejectMessage(version: version, reason: RejectReason(wireValue: reasonByte), receiverIndex: receiver, code: code, echo: echo)
    }
}

/// Responder → initiator under load: "prove you can receive at your address, then ask again".
struct CookieMessage: Equatable {
    static let size = 40

    var version: UInt8
    var receiverIndex: UInt32
    var echo: ByteBuffer
    var cookie: ByteBuffer

    func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(PacketType.cookie.rawValue)
        buffer.writeInteger(self.version)
        buffer.writeInteger(UInt16(0))
        buffer.writeInteger(self.receiverIndex)
        buffer.writeImmutableBuffer(self.echo)
        buffer.writeImmutableBuffer(self.cookie)
    }

    static func decode(_ datagram: ByteBuffer) -> CookieMessage? {
        var buffer = datagram
        guard
            buffer.readableBytes == size,
            buffer.readInteger(as: UInt8.self) == PacketType.cookie.rawValue,
            let version = buffer.readInteger(as: UInt8.self),
            buffer.readInteger(as: UInt16.self) != nil,
            let receiver = buffer.readInteger(as: UInt32.self),
            let echo = buffer.readSlice(length: WireSize.echo),
            let cookie = buffer.readSlice(length: WireSize.cookie)
        else { return nil }
        return CookieMessage(version: version, receiverIndex: receiver, echo: echo, cookie: cookie)
    }
}

/// Initiator → responder: withdraws an initiation (or an accepted but unconfirmed link).
struct CancelMessage: Equatable {
    static let size = 40
    /// The bytes the MAC covers.
    static let authenticatedSize = 24

    var version: UInt8
    /// A ``CancelReason`` raw value.
    var reason: UInt8
    var senderIndex: UInt32
    var echo: ByteBuffer
    var mac: ByteBuffer

    /// Writes the bytes the MAC covers (everything but the MAC).
    func encodeWithoutMAC(into buffer: inout ByteBuffer) {
        buffer.writeInteger(PacketType.cancel.rawValue)
        buffer.writeInteger(self.version)
        buffer.writeInteger(self.reason)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(self.senderIndex)
        buffer.writeImmutableBuffer(self.echo)
    }

    static func decode(_ datagram: ByteBuffer) -> CancelMessage? {
        var buffer = datagram
        guard
            buffer.readableBytes == size,
            buffer.readInteger(as: UInt8.self) == PacketType.cancel.rawValue,
            let version = buffer.readInteger(as: UInt8.self),
            let reason = buffer.readInteger(as: UInt8.self),
            buffer.readInteger(as: UInt8.self) != nil,
            let sender = buffer.readInteger(as: UInt32.self),
            let echo = buffer.readSlice(length: WireSize.echo),
            let mac = buffer.readSlice(length: WireSize.mac)
        else { return nil }
        return CancelMessage(version: version, reason: reason, senderIndex: sender, echo: echo, mac: mac)
    }
}
