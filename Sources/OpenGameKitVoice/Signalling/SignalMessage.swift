import GameKitTransport
import GameKitTraversal

/// One call-signalling message (PROTOCOL §17.1), carried opaquely by the client's
/// `voiceChatService(_:send:toParticipantID:)`: an 8-byte header (magic "GK", version, kind,
/// call ID) and, for invite and accept, the sender's X25519 key share and candidates; for failed,
/// the sender's error code and its reason in words. Every message fits in ``maximumSize`` bytes.
struct SignalMessage: Equatable, Sendable {
    static let magic: [UInt8] = [0x47, 0x4B]
    /// The version this implementation speaks.
    static let version: UInt8 = 1
    static let headerSize = 8
    static let maximumSize = 512
    /// Invite and accept carry at most this many candidates (the best ones).
    static let maximumCandidates = 16
    /// A failed message's reason holds at most this many bytes of UTF-8 (its length is one byte).
    static let maximumReasonLength = 255

    enum Kind: UInt8, Sendable, CaseIterable {
        case invite = 1, accept = 2, deny = 3, busy = 4, cancel = 5, hangUp = 6
        /// "I do not speak the version of your message": the body is the highest version the
        /// sender speaks. Always sent in version 1's framing.
        case unsupportedVersion = 7
        /// No media path could be set up, or media stopped arriving.
        case noPath = 8
        /// More of the sender's candidates, learnt after its invite or accept (trickle).
        case candidates = 9
        /// The sender could not set the chat up or keep it going, and says why: its error code
        /// and a sentence. Always followed by the message a version-1 receiver that predates this
        /// kind understands (deny, cancel, no path or hang-up).
        case failed = 10
        /// The sender's audio devices are open: it runs its audio once it knows the other side's
        /// are open too (this message, or the other side's media).
        case ready = 11
    }

    var kind: Kind
    var callID: UInt32
    var keyShare: [UInt8] = []
    var candidates: [ICECandidate] = []
    var supportedVersion: UInt8 = SignalMessage.version
    /// A failed message's error code (a `GKVoiceChatServiceError` code, 32000…).
    var failureCode: UInt16 = 0
    /// A failed message's reason, valid UTF-8.
    var reason: [UInt8] = []

    static func invite(_ callID: UInt32, keyShare: [UInt8], candidates: [ICECandidate]) -> SignalMessage {
        SignalMessage(kind: .invite, callID: callID, keyShare: keyShare, candidates: candidates)
    }

    static func accept(_ callID: UInt32, keyShare: [UInt8], candidates: [ICECandidate]) -> SignalMessage {
        SignalMessage(kind: .accept, callID: callID, keyShare: keyShare, candidates: candidates)
    }

    static func bare(_ kind: Kind, _ callID: UInt32) -> SignalMessage { SignalMessage(kind: kind, callID: callID) }

    static func candidates(_ callID: UInt32, _ candidates: [ICECandidate]) -> SignalMessage {
        SignalMessage(kind: .candidates, callID: callID, candidates: candidates)
    }

    /// A failed message; `reason` is cut, at a character boundary, to ``maximumReasonLength`` bytes.
    static func failed(_ callID: UInt32, code: Int, reason: String) -> SignalMessage {
        var kept: [UInt8] = []
        for character in reason {
            let bytes = Array(character.utf8)
            guard kept.count + bytes.count <= Self.maximumReasonLength else { break }
            kept += bytes
        }
        return SignalMessage(kind: .failed, callID: callID, failureCode: UInt16(clamping: code), reason: kept)
    }

    func encoded() -> [UInt8] {
        var out = Self.magic + [Self.version, self.kind.rawValue]
        out.append(contentsOf: self.callID.bigEndianBytes)
        switch self.kind {
        case .invite, .accept, .candidates:
            if self.kind != .candidates { out.append(contentsOf: self.keyShare) }
            let chosen = self.candidates.sorted { $0.priority > $1.priority }.prefix(Self.maximumCandidates)
            out.append(UInt8(chosen.count))
            for candidate in chosen { candidate.encode(into: &out) }
        case .unsupportedVersion:
            out.append(self.supportedVersion)
        case .failed:
            out += [UInt8(self.failureCode >> 8), UInt8(self.failureCode & 0xFF), UInt8(self.reason.count)]
            out += self.reason
        case .deny, .busy, .cancel, .hangUp, .noPath, .ready:
            break
        }
        return out
    }

    /// Decodes one message. A message of another version is reported with its header (which
    /// every version keeps), so the sender can be told which version is spoken here.
    static func decode(_ bytes: [UInt8]) throws(SignalDecodingError) -> SignalMessage {
        guard bytes.count >= Self.headerSize, bytes.count <= Self.maximumSize, Array(bytes[0..<2]) == Self.magic else {
            throw .notSignalling
        }
        let callID = bytes[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard bytes[2] == Self.version else { throw .unsupportedVersion(bytes[2], callID: callID, kind: bytes[3]) }
        guard let kind = Kind(rawValue: bytes[3]), callID != 0 else { throw .malformed(callID: callID) }
        var message = SignalMessage(kind: kind, callID: callID)
        var offset = Self.headerSize
        switch kind {
        case .invite, .accept, .candidates:
            let keyLength = kind == .candidates ? 0 : 32
            guard bytes.count >= offset + keyLength + 1 else { throw .malformed(callID: callID) }
            message.keyShare = Array(bytes[offset..<(offset + keyLength)])
            let count = Int(bytes[offset + keyLength])
            offset += keyLength + 1
            guard count <= Self.maximumCandidates else { throw .malformed(callID: callID) }
            for _ in 0..<count {
                guard let candidate = ICECandidate.decode(bytes, at: &offset) else { throw .malformed(callID: callID) }
                message.candidates.append(candidate)
            }
        case .unsupportedVersion:
            guard bytes.count > offset else { throw .malformed(callID: callID) }
            message.supportedVersion = bytes[offset]
            offset += 1
        case .failed:
            guard bytes.count >= offset + 3 else { throw .malformed(callID: callID) }
            message.failureCode = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let length = Int(bytes[offset + 2])
            offset += 3
            guard length <= Self.maximumReasonLength, bytes.count >= offset + length else { throw .malformed(callID: callID) }
            message.reason = Array(bytes[offset..<(offset + length)])
            guard String(validating: message.reason, as: UTF8.self) != nil else { throw .malformed(callID: callID) }
            offset += length
        case .deny, .busy, .cancel, .hangUp, .noPath, .ready:
            break
        }
        guard offset == bytes.count else { throw .malformed(callID: callID) }
        return message
    }
}

/// Why a blob was not a signalling message this side understands.
enum SignalDecodingError: Error, Equatable, Sendable {
    /// Not a signalling message at all (wrong magic, too short or too long).
    case notSignalling
    /// A message of a version not spoken here.
    case unsupportedVersion(UInt8, callID: UInt32, kind: UInt8)
    /// A version-1 message whose body does not decode.
    case malformed(callID: UInt32)
}

extension UInt32 {
    /// The four bytes, most significant first (call IDs on the wire and in key derivation).
    var bigEndianBytes: [UInt8] { withUnsafeBytes(of: self.bigEndian) { Array($0) } }
}
