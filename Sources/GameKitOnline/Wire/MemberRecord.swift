import NIOCore

/// What a room's member tells the others through the rendezvous (PROTOCOL §18.3): who it is,
/// the key its transport's liveness is watched with, and where it may be reached directly.
public struct MemberRecord: Equatable, Sendable {
    /// A connection candidate: an address the member may be reached at without the relay.
    public struct Candidate: Equatable, Sendable {
        /// How the candidate was learnt.
        public enum Kind: UInt8, Sendable {
            /// An address of one of the member's own interfaces.
            case host = 1
            /// The member's address as the rendezvous (or a STUN server) saw it (its NAT's
            /// mapping).
            case serverReflexive = 2
            /// An address on a TURN server that relays to the member (its allocation).
            case relayed = 3
        }

        /// How it was learnt.
        public var kind: Kind
        /// Where.
        public var address: SocketAddress

        /// A candidate.
        public init(kind: Kind, address: SocketAddress) {
            self.kind = kind
            self.address = address
        }
    }

    /// Longest display name carried, in bytes of UTF-8 (longer names are cut at a character).
    public static let maximumNameBytes = 100
    /// Longest key share, in bytes.
    public static let maximumKeyBytes = 32
    /// Most candidates carried.
    public static let maximumCandidates = 8
    /// Longest ICE username fragment, in bytes.
    public static let maximumUfragBytes = 32
    /// Longest ICE password, in bytes.
    public static let maximumPasswordBytes = 64

    /// The member's peer ID (Game Kit's 32-bit number).
    public var peerID: UInt32
    /// Grows by one each time the member changes its record, so others know to fetch it again.
    public var version: UInt16
    /// The member's Game Kit display name.
    public var displayName: String
    /// The member's transport liveness key (empty when it has none).
    public var keyShare: [UInt8]
    /// Whether the member shows itself to others (a Game Kit server or peer; a client does not,
    /// as on the LAN, where clients browse and do not advertise).
    public var isVisible: Bool
    /// Whether the member is busy (connecting to a peer, as the LAN advertisement says).
    public var isBusy: Bool
    /// Where the member may be reached directly (at most ``maximumCandidates``).
    public var candidates: [Candidate]
    /// The short-term credentials others check a direct path to the member with (ICE's
    /// username fragment and password, RFC 8445 §5.3); empty when it takes no direct path.
    public var iceUfrag: String
    /// The member's ICE password (see ``iceUfrag``).
    public var icePassword: String

    /// A record.
    public init(
        peerID: UInt32, version: UInt16 = 1, displayName: String, keyShare: [UInt8] = [], isVisible: Bool = true, isBusy: Bool = false,
        candidates: [Candidate] = [], iceUfrag: String = "", icePassword: String = ""
    ) {
        self.peerID = peerID
        self.version = version
        self.displayName = displayName
        self.keyShare = keyShare
        self.isVisible = isVisible
        self.isBusy = isBusy
        self.candidates = candidates
        self.iceUfrag = iceUfrag
        self.icePassword = icePassword
    }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeInteger(self.peerID)
        buffer.writeInteger(self.version)
        buffer.writeShortText(self.displayName, limit: Self.maximumNameBytes)
        let key = self.keyShare.prefix(Self.maximumKeyBytes)
        buffer.writeInteger(UInt8(key.count))
        buffer.writeBytes(key)
        buffer.writeInteger(UInt8((self.isVisible ? 1 : 0) | (self.isBusy ? 2 : 0)))
        let candidates = self.candidates.filter { $0.address.packedBytes != nil }.prefix(Self.maximumCandidates)
        buffer.writeInteger(UInt8(candidates.count))
        for candidate in candidates {
            buffer.writeInteger(candidate.kind.rawValue)
            WireAddress.write(candidate.address, into: &buffer)
        }
        buffer.writeShortText(self.iceUfrag, limit: Self.maximumUfragBytes)
        buffer.writeShortText(self.icePassword, limit: Self.maximumPasswordBytes)
    }

    static func read(from buffer: inout ByteBuffer) throws(OnlineDecodingError) -> MemberRecord {
        let peerID: UInt32 = try buffer.readValue()
        let version: UInt16 = try buffer.readValue()
        let name = try buffer.readShortText(limit: Self.maximumNameBytes)
        let keyLength: UInt8 = try buffer.readValue()
        guard keyLength <= Self.maximumKeyBytes else { throw .tooLarge }
        let key = try buffer.readExactly(Int(keyLength))
        let flags: UInt8 = try buffer.readValue()
        guard flags & ~3 == 0 else { throw .invalidValue("member flags \(flags)") }
        let count: UInt8 = try buffer.readValue()
        guard count <= Self.maximumCandidates else { throw .tooLarge }
        var candidates: [Candidate] = []
        for _ in 0..<count {
            let kindByte: UInt8 = try buffer.readValue()
            guard let kind = Candidate.Kind(rawValue: kindByte) else { throw .invalidValue("candidate kind \(kindByte)") }
            guard let address = try WireAddress.read(from: &buffer) else { throw .invalidValue("candidate without address") }
            candidates.append(Candidate(kind: kind, address: address))
        }
        let ufrag = try buffer.readShortText(limit: Self.maximumUfragBytes)
        let password = try buffer.readShortText(limit: Self.maximumPasswordBytes)
        return MemberRecord(
            peerID: peerID, version: version, displayName: name, keyShare: key, isVisible: flags & 1 != 0, isBusy: flags & 2 != 0,
            candidates: candidates, iceUfrag: ufrag, icePassword: password)
    }
}
