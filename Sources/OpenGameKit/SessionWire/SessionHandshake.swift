import Crypto
import GameKitDiscovery
import NIOCore

/// What a session puts in the transport's handshake: who is asking, for which session.
///
/// The initiator's `SessionHello` rides in the transport's request payload (sealed under keys of
/// the handshake's password-authenticated exchange), the responder's `SessionWelcome` in the accept
/// payload. A hello is padded to a fixed size that leaves room for any welcome (version 1 of the
/// transport never let a reply outgrow the request it answered). Layouts: docs/PROTOCOL.md §13.
struct SessionHello: Equatable, Sendable {
    /// The session protocol version this code speaks.
    static let currentVersion: UInt8 = 1
    /// Every hello is padded to this many bytes: room for the largest welcome.
    static let paddedSize = 300

    var version: UInt8 = Self.currentVersion
    /// The first 8 bytes of SHA-256 of the session ID: peers of other sessions sharing a service
    /// type (case, hash collisions) are told apart.
    var sessionKey: UInt64
    var peerID: UInt32
    var mode: UInt8
    /// Names one connection attempt: the same in every hello it sends, one per address of the
    /// responder, so the responder can tell a second path of one attempt from a new attempt.
    var attempt: UInt32 = 0
    var displayName: String

    /// The session key of a session ID.
    static func sessionKey(for sessionID: String) -> UInt64 {
        let digest = Array(SHA256.hash(data: Array(sessionID.utf8)))
        return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    func encode() -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(self.version)
        buffer.writeInteger(self.sessionKey)
        buffer.writeInteger(self.peerID)
        buffer.writeInteger(self.mode)
        buffer.writeInteger(self.attempt)
        SessionWireText.write(self.displayName, into: &buffer)
        buffer.writeRepeatingByte(0, count: max(0, Self.paddedSize - buffer.readableBytes))
        return buffer
    }

    /// Reads a hello; padding and any bytes a later version appends are ignored.
    static func decode(_ buffer: ByteBuffer) throws(SessionWireError) -> SessionHello {
        var buffer = buffer
        guard let version = buffer.readInteger(as: UInt8.self) else { throw .truncated }
        guard version == Self.currentVersion else { throw .unsupportedVersion(version) }
        guard let key = buffer.readInteger(as: UInt64.self),
            let peerID = buffer.readInteger(as: UInt32.self),
            let mode = buffer.readInteger(as: UInt8.self),
            let attempt = buffer.readInteger(as: UInt32.self)
        else { throw .truncated }
        let name = try SessionWireText.read(from: &buffer)
        return SessionHello(version: version, sessionKey: key, peerID: peerID, mode: mode, attempt: attempt, displayName: name)
    }
}

/// The responder's answer to a hello it accepts: its own identity.
struct SessionWelcome: Equatable, Sendable {
    var version: UInt8 = SessionHello.currentVersion
    var peerID: UInt32
    var displayName: String

    /// The largest encoded welcome (a 255-byte display name): within a padded hello.
    static let maximumSize = 1 + 4 + 1 + 255

    func encode() -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(self.version)
        buffer.writeInteger(self.peerID)
        SessionWireText.write(self.displayName, into: &buffer)
        return buffer
    }

    static func decode(_ buffer: ByteBuffer) throws(SessionWireError) -> SessionWelcome {
        var buffer = buffer
        guard let version = buffer.readInteger(as: UInt8.self) else { throw .truncated }
        guard version == SessionHello.currentVersion else { throw .unsupportedVersion(version) }
        guard let peerID = buffer.readInteger(as: UInt32.self) else { throw .truncated }
        return SessionWelcome(version: version, peerID: peerID, displayName: try SessionWireText.read(from: &buffer))
    }
}

/// Why a responder refused a hello: the transport's deny code.
enum SessionDenyReason: UInt16, Sendable, CaseIterable {
    /// The application declined (`denyConnection(fromPeer:)`).
    case declined = 1
    /// The hello names another session (its session key differs).
    case wrongSession = 2
    /// Both peers asked each other at once; the other request goes ahead (§13.3).
    case inProgress = 3
    /// The session is not accepting connections (unavailable, or a client).
    case notAccepting = 4
    /// The hello could not be read, or its version is not spoken here.
    case malformed = 5
    /// The requester cancelled (sent by the requester's side when a request is withdrawn).
    case cancelled = 6
    /// The request timed out before the application answered.
    case timedOut = 7
    /// Another path of the same attempt (another of our addresses) was answered instead: the
    /// initiator drops this path quietly.
    case duplicate = 8
}

/// Length-prefixed UTF-8 text (one length byte, at most 255 bytes, cut at a character
/// boundary when writing). Reading replaces invalid UTF-8 with U+FFFD and keeps what fits in 255
/// bytes, so a name read from a peer is written on (rosters, `joined`) exactly as it was read.
enum SessionWireText {
    static func write(_ text: String, into buffer: inout ByteBuffer) {
        let bytes = Array(text.utf8Prefix(maximumBytes: 255).utf8)
        buffer.writeInteger(UInt8(bytes.count))
        buffer.writeBytes(bytes)
    }

    static func read(from buffer: inout ByteBuffer) throws(SessionWireError) -> String {
        guard let length = buffer.readInteger(as: UInt8.self), let bytes = buffer.readBytes(length: Int(length)) else { throw .truncated }
        // Each replacement is 3 bytes in UTF-8, so 255 invalid bytes would read as 765 bytes of
        // text, which writing would cut (fuzzing found the name changing between peers).
        return String(decoding: bytes, as: UTF8.self).utf8Prefix(maximumBytes: 255)
    }
}

/// Why a session message could not be read. Nothing a peer sends can do more than produce one
/// of these: the message is dropped and counted.
enum SessionWireError: Error, Equatable, Sendable {
    case truncated
    case unsupportedVersion(UInt8)
    case unknownType(UInt8)
    case tooManyPeers(Int)
    case invalidMode(UInt8)
    /// A channel message naming the application's channel (0), which has messages of its own.
    case invalidChannel
}
