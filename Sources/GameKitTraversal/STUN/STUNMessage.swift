@_spi(Machine) import GameKitMachine
import Crypto

/// A STUN message (RFC 8489 §5): the 20-byte header (type, length, magic cookie, transaction ID)
/// and its attributes, in order. Used for binding requests to STUN servers, TURN (RFC 8656)
/// requests and indications, and ICE connectivity checks.
struct STUNMessage: Sendable, Equatable {
    /// The magic cookie every RFC 5389/8489 message carries in bytes 4..<8.
    static let magicCookie: UInt32 = 0x2112_A442
    static let headerSize = 20
    /// Messages longer than this are refused (a STUN message must fit one unfragmented datagram).
    static let maximumSize = 1500

    enum Class: UInt8, Sendable {
        case request = 0, indication = 1, success = 2, error = 3
    }

    /// A 12-bit STUN method.
    struct Method: RawRepresentable, Hashable, Sendable {
        let rawValue: UInt16
        init(rawValue: UInt16) { self.rawValue = rawValue & 0x0FFF }
        static let binding = Method(rawValue: 0x001)
        static let allocate = Method(rawValue: 0x003)
        static let refresh = Method(rawValue: 0x004)
        static let send = Method(rawValue: 0x006)
        static let data = Method(rawValue: 0x007)
        static let createPermission = Method(rawValue: 0x008)
        static let channelBind = Method(rawValue: 0x009)
    }

    var method: Method
    var messageClass: Class
    /// 12 random bytes matching a response to its request.
    var transactionID: [UInt8]
    var attributes: [STUNAttribute]

    init(_ method: Method, _ messageClass: Class, transactionID: [UInt8], attributes: [STUNAttribute] = []) {
        precondition(transactionID.count == 12)
        self.method = method
        self.messageClass = messageClass
        self.transactionID = transactionID
        self.attributes = attributes
    }

    /// 12 random bytes from `random` (the system's cryptographic generator outside tests: an
    /// off-path attacker must not guess them, RFC 8489 §6).
    static func randomTransactionID(using random: inout MachineRandom) -> [UInt8] {
        random.bytes(12)
    }

    /// The 14-bit message type: method bits interleaved with the two class bits (§5).
    var messageType: UInt16 {
        let m = self.method.rawValue
        let c = UInt16(self.messageClass.rawValue)
        return (m & 0x000F) | ((c & 0x1) << 4) | ((m & 0x0070) << 1) | ((c & 0x2) << 7) | ((m & 0x0F80) << 2)
    }

    static func split(messageType t: UInt16) -> (Method, Class) {
        let method = (t & 0x000F) | ((t & 0x00E0) >> 1) | ((t & 0x3E00) >> 2)
        let messageClass = ((t & 0x0010) >> 4) | ((t & 0x0100) >> 7)
        return (Method(rawValue: method), Class(rawValue: UInt8(messageClass))!)
    }

    // MARK: - Attribute access

    /// The first attribute of `type`.
    func attribute(_ type: STUNAttribute.Kind) -> STUNAttribute? {
        self.attributes.first { $0.type == type.rawValue }
    }

    func contains(_ type: STUNAttribute.Kind) -> Bool { self.attribute(type) != nil }

    // MARK: - Encoding

    /// The wire form. With `integrityKey`, a MESSAGE-INTEGRITY (HMAC-SHA1, §14.5) is appended;
    /// with `fingerprint`, a FINGERPRINT (§14.7) after it. Attributes already named so are
    /// ignored, so a decoded message can be re-signed.
    func encoded(integrityKey: [UInt8]? = nil, fingerprint: Bool = false) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(Self.headerSize + 64)
        out.appendBigEndian(self.messageType)
        out.appendBigEndian(UInt16(0))
        out.appendBigEndian(Self.magicCookie)
        out.append(contentsOf: self.transactionID)
        for attribute in self.attributes {
            guard attribute.type != STUNAttribute.Kind.messageIntegrity.rawValue,
                attribute.type != STUNAttribute.Kind.fingerprint.rawValue
            else { continue }
            attribute.write(into: &out)
        }
        if let integrityKey {
            Self.setLength(&out, to: out.count - Self.headerSize + 24)
            let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: out, using: SymmetricKey(data: integrityKey)))
            STUNAttribute(.messageIntegrity, mac).write(into: &out)
        }
        if fingerprint {
            Self.setLength(&out, to: out.count - Self.headerSize + 8)
            STUNAttribute(.fingerprint, Self.fingerprintValue(of: out).bigEndianBytes).write(into: &out)
        }
        Self.setLength(&out, to: out.count - Self.headerSize)
        return out
    }

    private static func setLength(_ bytes: inout [UInt8], to length: Int) {
        bytes[2] = UInt8(length >> 8)
        bytes[3] = UInt8(length & 0xFF)
    }

    static func fingerprintValue(of bytes: some Collection<UInt8>) -> UInt32 {
        CRC32.checksum(bytes) ^ 0x5354_554E
    }

    // MARK: - Decoding

    /// Whether `bytes` looks like a STUN message (two zero bits, magic cookie), without
    /// decoding it: the demultiplexing test of RFC 7983.
    static func isSTUN(_ bytes: some RandomAccessCollection<UInt8>) -> Bool {
        guard bytes.count >= Self.headerSize else { return false }
        let start = bytes.startIndex
        func at(_ offset: Int) -> UInt8 { bytes[bytes.index(start, offsetBy: offset)] }
        return at(0) & 0xC0 == 0 && at(4) == 0x21 && at(5) == 0x12 && at(6) == 0xA4 && at(7) == 0x42
    }

    /// Decodes a whole datagram. Refuses anything that is not exactly one well-formed message.
    static func decode(_ bytes: [UInt8]) throws(STUNDecodingError) -> DecodedSTUNMessage {
        guard bytes.count >= Self.headerSize, bytes.count <= Self.maximumSize else { throw .badLength }
        guard Self.isSTUN(bytes) else { throw .notSTUN }
        let length = Int(bytes[2]) << 8 | Int(bytes[3])
        guard length % 4 == 0, Self.headerSize + length == bytes.count else { throw .badLength }
        let type = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let (method, messageClass) = Self.split(messageType: type)
        var message = STUNMessage(method, messageClass, transactionID: Array(bytes[8..<20]))
        var offset = Self.headerSize
        var integrityOffset: Int?
        var fingerprintOffset: Int?
        while offset < bytes.count {
            guard offset + 4 <= bytes.count else { throw .truncatedAttribute }
            let attributeType = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let valueLength = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            let padded = (valueLength + 3) & ~3
            guard offset + 4 + padded <= bytes.count else { throw .truncatedAttribute }
            if fingerprintOffset != nil { throw .attributeAfterFingerprint }
            let value = Array(bytes[(offset + 4)..<(offset + 4 + valueLength)])
            if attributeType == STUNAttribute.Kind.messageIntegrity.rawValue {
                guard valueLength == 20 else { throw .badAttribute(attributeType) }
                if integrityOffset == nil { integrityOffset = offset }
            } else if attributeType == STUNAttribute.Kind.fingerprint.rawValue {
                guard valueLength == 4 else { throw .badAttribute(attributeType) }
                fingerprintOffset = offset
            } else if integrityOffset != nil {
                // Attributes after MESSAGE-INTEGRITY (other than FINGERPRINT) are ignored (§14.5).
                offset += 4 + padded
                continue
            }
            message.attributes.append(STUNAttribute(type: attributeType, value: value))
            offset += 4 + padded
        }
        if let fingerprintOffset {
            var covered = Array(bytes[..<fingerprintOffset])
            Self.setLength(&covered, to: fingerprintOffset + 8 - Self.headerSize)
            let carried = bytes[(fingerprintOffset + 4)..<(fingerprintOffset + 8)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard carried == Self.fingerprintValue(of: covered) else { throw .badFingerprint }
        }
        return DecodedSTUNMessage(message: message, raw: bytes, integrityOffset: integrityOffset)
    }
}

/// A decoded STUN message with what checking its MESSAGE-INTEGRITY needs.
struct DecodedSTUNMessage: Sendable {
    let message: STUNMessage
    let raw: [UInt8]
    /// Where MESSAGE-INTEGRITY starts, if present.
    let integrityOffset: Int?

    /// Whether the message carries a MESSAGE-INTEGRITY that `key` verifies (§14.5).
    func hasValidIntegrity(key: [UInt8]) -> Bool {
        guard let offset = self.integrityOffset else { return false }
        var covered = Array(self.raw[..<offset])
        let length = offset + 24 - STUNMessage.headerSize
        covered[2] = UInt8(length >> 8)
        covered[3] = UInt8(length & 0xFF)
        let carried = self.raw[(offset + 4)..<(offset + 24)]
        return HMAC<Insecure.SHA1>.isValidAuthenticationCode(
            Array(carried), authenticating: covered, using: SymmetricKey(data: key))
    }
}

/// Why bytes did not decode as a STUN message.
enum STUNDecodingError: Error, Equatable, Sendable {
    case notSTUN
    case badLength
    case truncatedAttribute
    case attributeAfterFingerprint
    case badAttribute(UInt16)
    case badFingerprint
}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), as STUN's FINGERPRINT uses it.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 != 0 ? (value >> 1) ^ 0xEDB8_8320 : value >> 1 }
        return value
    }

    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = Self.table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { self.append(contentsOf: $0) }
    }
}

extension FixedWidthInteger {
    var bigEndianBytes: [UInt8] { withUnsafeBytes(of: self.bigEndian) { Array($0) } }
}
