/// The code a player reads to friends (PROTOCOL §18.2): twelve symbols of Crockford's base32,
/// written `XXXX-XXXX-XXXX`. The first six are the room's ``RoomCode`` (the *nameplate*: what the
/// rendezvous knows the room by); the next five are the room's *secret* (25 bits) that never
/// leaves the members' machines; the last is a check symbol over the other eleven, so that a
/// mistyped code is caught on the keyboard instead of reaching the rendezvous or failing a
/// handshake.
///
/// Members prove the secret to each other in every handshake (``secretBytes`` are part of the password
/// of the transport's CPace exchange): a rendezvous or relay
/// that answers a handshake in a member's name, knowing the nameplate only, fails it unless it
/// guessed the secret (one chance in 2²⁵ per handshake), and the member reports why.
public struct RoomInvitation: Hashable, Sendable, CustomStringConvertible {
    /// What the rendezvous knows the room by: the first six symbols.
    public let nameplate: RoomCode
    /// The 25 secret bits: the next five symbols.
    public let secret: UInt32

    /// Symbols in a code.
    public static let length = 12
    /// Bits of the secret part.
    public static let secretBits = 25
    static let secretSymbols = 5

    /// The invitation with `nameplate` and the low 25 bits of `secret` (nil when higher bits
    /// are set).
    public init?(nameplate: RoomCode, secret: UInt32) {
        guard secret < 1 << Self.secretBits else { return nil }
        self.nameplate = nameplate
        self.secret = secret
    }

    /// A fresh secret from the system's generator, for a room this session creates.
    public static func randomSecret() -> UInt32 {
        var generator = SystemRandomNumberGenerator()
        return UInt32.random(in: 0..<(1 << Self.secretBits), using: &generator)
    }

    /// Why typed text is not a room code.
    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// A character that is not a symbol, a hyphen or a space.
        case notASymbol(Character)
        /// Other than twelve symbols (how many there were).
        case wrongLength(Int)
        /// The check symbol does not match the others: a symbol was mistyped or two were swapped.
        case typo

        /// What is wrong, as the second half of a sentence.
        public var description: String {
            switch self {
            case .notASymbol(let character): "'\(character)' is not one of its letters and digits"
            case .wrongLength(let count): "it has twelve letters and digits, not \(count)"
            case .typo: "one letter or digit is mistyped, or two are swapped"
            }
        }

        /// The whole sentence for the person who typed `text`.
        public func sentence(typed text: String) -> String {
            "'\(text)' is not a room code: \(self). A code looks like 7K3Q-XM4F-9ABR."
        }
    }

    /// Parses a code as a person typed it: case is ignored, `I` and `L` read as `1` and `O` as
    /// `0`, hyphens and spaces are skipped.
    public init(parsing text: String) throws(ParseError) {
        var symbols: [UInt8] = []
        for character in text {
            if character == "-" || character == " " { continue }
            guard let byte = character.asciiValue, let symbol = CrockfordBase32.symbol(for: byte) else {
                throw .notASymbol(character)
            }
            symbols.append(symbol)
        }
        guard symbols.count == Self.length else { throw .wrongLength(symbols.count) }
        guard Self.check(symbols.prefix(Self.length - 1)) == symbols[Self.length - 1] else { throw .typo }
        let value = symbols.prefix(Self.length - 1).reduce(UInt64(0)) { $0 << 5 | UInt64($1) }
        self.nameplate = RoomCode(value: UInt32(value >> Self.secretBits))!
        self.secret = UInt32(value & (1 << Self.secretBits - 1))
    }

    /// What is wrong with `text` as a code, in a sentence; nil when it is one.
    public static func problem(typed text: String) -> String? {
        do {
            _ = try RoomInvitation(parsing: text)
            return nil
        } catch {
            return error.sentence(typed: text)
        }
    }

    /// Parses a typed code; nil when ``init(parsing:)`` would throw.
    public init?(_ text: String) {
        guard let invitation = try? RoomInvitation(parsing: text) else { return nil }
        self = invitation
    }

    /// The twelve symbols, without separators.
    public var description: String {
        let value = UInt64(self.nameplate.value) << Self.secretBits | UInt64(self.secret)
        let symbols = (0..<(Self.length - 1)).map { UInt8(truncatingIfNeeded: value >> (5 * (Self.length - 2 - $0))) & 31 }
        return CrockfordBase32.encode(value, symbols: Self.length - 1) + CrockfordBase32.encode(UInt64(Self.check(symbols)), symbols: 1)
    }

    /// The code as shown to a person: three groups of four (`7K3Q-XM4F-9ABR`).
    public var displayed: String {
        let text = Array(self.description)
        return "\(String(text[0..<4]))-\(String(text[4..<8]))-\(String(text[8..<12]))"
    }

    /// The secret as four bytes, most significant first: with the session's password, what the
    /// members' transport handshakes prove (the session composes them).
    public var secretBytes: [UInt8] { Self.bytes(ofSecret: self.secret) }

    /// A secret as four bytes, most significant first.
    public static func bytes(ofSecret secret: UInt32) -> [UInt8] {
        [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: secret >> $0) }
    }

    // MARK: - The check symbol

    /// Σ αⁱ⁺¹·sᵢ in GF(2⁵) (α a root of x⁵ + x² + 1): the powers of α are distinct and nonzero,
    /// so changing any one symbol, or swapping two different neighbours, changes the sum.
    static func check<S: Sequence>(_ symbols: S) -> UInt8 where S.Element == UInt8 {
        var sum: UInt8 = 0
        var weight: UInt8 = 1
        for symbol in symbols {
            weight = Self.multiply(weight, 2)
            sum ^= Self.multiply(weight, symbol)
        }
        return sum
    }

    /// Multiplication in GF(2⁵) modulo x⁵ + x² + 1.
    static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        var (a, b, product) = (a, b, UInt8(0))
        while b != 0 {
            if b & 1 != 0 { product ^= a }
            b >>= 1
            a <<= 1
            if a & 0x20 != 0 { a ^= 0x25 }
        }
        return product
    }
}
