/// A room's *nameplate*: 30 random bits written as six characters of Crockford's base32
/// (`0-9`, `A-Z` without `I`, `L`, `O`, `U`), what the rendezvous knows a room by. Players see it
/// as the first six characters of the room's whole code (``RoomInvitation``).
///
/// Parsing forgives what people do when they type a code they were told: lower case, the
/// look-alikes `I`/`L` for `1` and `O` for `0`, and hyphens or spaces anywhere (PROTOCOL §18.2).
public struct RoomCode: Hashable, Sendable, CustomStringConvertible, Codable {
    /// The code's 30 bits.
    public let value: UInt32

    /// Characters in a code.
    public static let length = 6
    /// Codes are `length × 5` bits.
    public static let bits = 30

    /// The code with these 30 bits (higher bits are refused).
    public init?(value: UInt32) {
        guard value < 1 << Self.bits else { return nil }
        self.value = value
    }

    /// Parses a code as a person typed it; nil unless exactly six symbols remain.
    public init?(_ text: String) {
        guard let value = CrockfordBase32.decode(text, symbols: Self.length) else { return nil }
        self.value = UInt32(value)
    }

    /// A random code.
    public static func random(using generator: inout some RandomNumberGenerator) -> RoomCode {
        RoomCode(value: UInt32.random(in: 0..<(1 << Self.bits), using: &generator))!
    }

    /// The six symbols, without a separator (`7K3QXM`).
    public var description: String {
        CrockfordBase32.encode(UInt64(self.value), symbols: Self.length)
    }

    /// The nameplate in two groups of three (`7K3-QXM`), as the rendezvous's logs show it.
    public var displayed: String {
        let text = self.description
        return "\(text.prefix(3))-\(text.suffix(3))"
    }

    /// Reads a code written as text.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let code = RoomCode(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a room code: \(text)"))
        }
        self = code
    }

    /// Writes the code as its six symbols.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.description)
    }
}

/// Crockford's base32 (https://www.crockford.com/base32.html): 32 symbols, `0-9A-Z` without the
/// easily confused `I`, `L`, `O` and `U`. Room codes and links' verification codes are written in it.
public enum CrockfordBase32 {
    /// The 32 symbols, in value order.
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    /// The low `symbols × 5` bits of `value`, most significant first.
    public static func encode(_ value: UInt64, symbols: Int) -> String {
        precondition(symbols * 5 <= 64)
        var characters = [UInt8](repeating: 0, count: symbols)
        var rest = value
        for index in (0..<symbols).reversed() {
            characters[index] = Self.alphabet[Int(rest & 31)]
            rest >>= 5
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// Exactly `symbols` symbols as a person typed them (any case; `I`/`L` read as `1`, `O` as
    /// `0`; hyphens and spaces skipped), or nil.
    public static func decode(_ text: String, symbols: Int) -> UInt64? {
        var value: UInt64 = 0
        var count = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: "-") || byte == UInt8(ascii: " ") { continue }
            guard let symbol = Self.symbol(for: byte), count < symbols else { return nil }
            value = value << 5 | UInt64(symbol)
            count += 1
        }
        return count == symbols ? value : nil
    }

    /// The value of one typed character (forgiving case, `I`, `L` and `O`), or nil.
    static func symbol(for byte: UInt8) -> UInt8? {
        var byte = byte
        if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { byte -= 32 }
        switch byte {
        case UInt8(ascii: "O"): return 0
        case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
        default: return self.alphabet.firstIndex(of: byte).map(UInt8.init)
        }
    }
}
