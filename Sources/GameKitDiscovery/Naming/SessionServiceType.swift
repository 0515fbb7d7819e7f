import Crypto

extension ServiceType {
    /// The service type a session advertises under, derived from its session identifier.
    ///
    /// A session identifier that is itself a valid DNS-SD service name (1–15 ASCII letters,
    /// digits and hyphens with at least one letter, no hyphen at either end or twice in a row) is
    /// used as it is: `chat` → `_chat._udp`. Any other identifier (longer, with other
    /// characters, empty) is hashed: `gk` followed by the first 65 bits of its UTF-8 SHA-256
    /// in lower-case base32 (RFC 4648 alphabet, 13 characters), e.g.
    /// `com.example.chess` → `_gkxxxxxxxxxxxxx._udp`. Both sides derive the same type from the
    /// same identifier; DNS compares names without case, so identifiers that differ only in case
    /// share a type.
    public init(sessionIdentifier: String) {
        if let type = try? ServiceType(name: sessionIdentifier) {
            self = type
            return
        }
        let digest = Array(SHA256.hash(data: Array(sessionIdentifier.utf8)))
        self = try! ServiceType(name: "gk" + Self.base32(digest, characters: 13))
    }

    /// The first `characters` base32 characters (RFC 4648 §6 alphabet, lower case) of `bytes`.
    static func base32(_ bytes: [UInt8], characters: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        var output = ""
        var buffer = 0
        var bits = 0
        var index = 0
        while output.count < characters {
            if bits < 5 {
                buffer = buffer << 8 | Int(index < bytes.count ? bytes[index] : 0)
                index += 1
                bits += 8
            }
            output.append(alphabet[(buffer >> (bits - 5)) & 31])
            bits -= 5
        }
        return output
    }
}
