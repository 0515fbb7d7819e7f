/// A transport address one side offers the other for media (RFC 8445 §5.1): where it can be
/// reached, how the address was learnt, and how much it is preferred.
public struct ICECandidate: Hashable, Sendable, CustomStringConvertible {
    /// How the address was learnt.
    public enum Kind: UInt8, Sendable, CaseIterable {
        /// An address of one of this host's interfaces.
        case host = 0
        /// This host's address as a STUN server saw it (the outside of a NAT).
        case serverReflexive = 1
        /// An address learnt from a connectivity check that arrived from it.
        case peerReflexive = 2
        /// An address on a TURN server that relays to this host.
        case relayed = 3

        /// RFC 8445 §5.1.2.2's recommended type preferences.
        var typePreference: UInt32 {
            switch self {
            case .host: return 126
            case .peerReflexive: return 110
            case .serverReflexive: return 100
            case .relayed: return 0
            }
        }
    }

    /// How the address was learnt.
    public let kind: Kind
    /// Where the candidate can be reached.
    public let address: TraversalAddress
    /// RFC 8445 §5.1.2 priority: higher is preferred.
    public let priority: UInt32

    /// A candidate with a given priority.
    public init(kind: Kind, address: TraversalAddress, priority: UInt32) {
        self.kind = kind
        self.address = address
        self.priority = priority
    }

    /// A candidate with the priority RFC 8445 §5.1.2.1 gives it (component 1).
    public init(kind: Kind, address: TraversalAddress, localPreference: UInt16 = 65535) {
        self.init(kind: kind, address: address, priority: Self.priority(kind, localPreference: localPreference))
    }

    static func priority(_ kind: Kind, localPreference: UInt16) -> UInt32 {
        (kind.typePreference << 24) | (UInt32(localPreference) << 8) | 255
    }

    /// E.g. "srflx 203.0.113.9:61000".
    public var description: String {
        let name: String
        switch self.kind {
        case .host: name = "host"
        case .serverReflexive: name = "srflx"
        case .peerReflexive: name = "prflx"
        case .relayed: name = "relay"
        }
        return "\(name) \(self.address)"
    }

    // MARK: - Wire form

    /// Appends the compact wire form: kind (1 byte), family (4 or 6), port (2), priority (4),
    /// then 4 or 16 address bytes.
    public func encode(into out: inout [UInt8]) {
        out.append(self.kind.rawValue)
        out.append(self.address.isIPv4 ? 4 : 6)
        out.appendBigEndian(self.address.port)
        out.appendBigEndian(self.priority)
        out.append(contentsOf: self.address.bytes)
    }

    /// Reads one candidate at `offset`, advancing it; nil if the bytes are not a candidate.
    public static func decode(_ bytes: [UInt8], at offset: inout Int) -> ICECandidate? {
        guard offset + 8 <= bytes.count, let kind = Kind(rawValue: bytes[offset]) else { return nil }
        let length: Int
        switch bytes[offset + 1] {
        case 4: length = 4
        case 6: length = 16
        default: return nil
        }
        guard offset + 8 + length <= bytes.count else { return nil }
        let port = UInt16(bytes[offset + 2]) << 8 | UInt16(bytes[offset + 3])
        let priority = bytes[(offset + 4)..<(offset + 8)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard port != 0, let address = TraversalAddress(bytes: Array(bytes[(offset + 8)..<(offset + 8 + length)]), port: port) else {
            return nil
        }
        offset += 8 + length
        return ICECandidate(kind: kind, address: address, priority: priority)
    }
}
