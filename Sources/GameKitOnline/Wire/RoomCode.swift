/// A room's short code: 30 random bits written as six characters of Crockford's base32
/// (`0-9`, `A-Z` without `I`, `L`, `O`, `U`), e.g. `7K3-QXM` as shown to players.
///
/// Parsing forgives what people do when they type a code they were told: lower case, the
/// look-alikes `I`/`L` for `1` and `O` for `0`, and hyphens or spaces anywhere (PROTOCOL §19.2).
public struct RoomCode: Hashable, Sendable, CustomStringConvertible, Codable {
    /// The code's 30 bits.
    public let value: UInt32

    /// The 32 symbols, in value order.
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
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
        var value: UInt32 = 0
        var count = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: "-") || byte == UInt8(ascii: " ") { continue }
            guard let symbol = Self.symbol(for: byte), count < Self.length else { return nil }
            value = value << 5 | UInt32(symbol)
            count += 1
        }
        guard count == Self.length else { return nil }
        self.value = value
    }

    /// A random code.
    public static func random(using generator: inout some RandomNumberGenerator) -> RoomCode {
        RoomCode(value: UInt32.random(in: 0..<(1 << Self.bits), using: &generator))!
    }

    /// The six symbols, without a separator (`7K3QXM`).
    public var description: String {
        var characters = [UInt8](repeating: 0, count: Self.length)
        var rest = self.value
        for index in (0..<Self.length).reversed() {
            characters[index] = Self.alphabet[Int(rest & 31)]
            rest >>= 5
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// The code as shown to a person: two groups of three (`7K3-QXM`).
    public var displayed: String {
        let text = self.description
        return "\(text.prefix(3))-\(text.suffix(3))"
    }

    private static func symbol(for byte: UInt8) -> UInt8? {
        var byte = byte
        if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { byte -= 32 }
        switch byte {
        case UInt8(ascii: "O"): return 0
        case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
        default: return self.alphabet.firstIndex(of: byte).map(UInt8.init)
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let code = RoomCode(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a room code: \(text)"))
        }
        self = code
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.description)
    }
}
