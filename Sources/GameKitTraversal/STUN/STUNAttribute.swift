/// One STUN attribute: a 16-bit type and its value (padding to four bytes is added on the wire
/// and dropped on decoding). Typed constructors and readers below cover the attributes of STUN
/// (RFC 8489 §14), TURN (RFC 8656 §18) and ICE (RFC 8445 §16).
struct STUNAttribute: Sendable, Equatable {
    enum Kind: UInt16, Sendable {
        case mappedAddress = 0x0001
        case username = 0x0006
        case messageIntegrity = 0x0008
        case errorCode = 0x0009
        case unknownAttributes = 0x000A
        case channelNumber = 0x000C
        case lifetime = 0x000D
        case xorPeerAddress = 0x0012
        case data = 0x0013
        case realm = 0x0014
        case nonce = 0x0015
        case xorRelayedAddress = 0x0016
        case requestedTransport = 0x0019
        case xorMappedAddress = 0x0020
        case priority = 0x0024
        case useCandidate = 0x0025
        case software = 0x8022
        case fingerprint = 0x8028
        case iceControlled = 0x8029
        case iceControlling = 0x802A
    }

    let type: UInt16
    let value: [UInt8]

    init(type: UInt16, value: [UInt8]) {
        self.type = type
        self.value = value
    }

    init(_ kind: Kind, _ value: [UInt8] = []) {
        self.init(type: kind.rawValue, value: value)
    }

    func write(into out: inout [UInt8]) {
        out.appendBigEndian(self.type)
        out.appendBigEndian(UInt16(self.value.count))
        out.append(contentsOf: self.value)
        out.append(contentsOf: repeatElement(0, count: (4 - self.value.count % 4) % 4))
    }

    // MARK: - Typed constructors

    static func text(_ kind: Kind, _ string: String) -> STUNAttribute { STUNAttribute(kind, Array(string.utf8)) }

    static func uint32(_ kind: Kind, _ value: UInt32) -> STUNAttribute { STUNAttribute(kind, value.bigEndianBytes) }

    static func uint64(_ kind: Kind, _ value: UInt64) -> STUNAttribute { STUNAttribute(kind, value.bigEndianBytes) }

    /// An XOR-…-ADDRESS attribute (§14.2): port XOR the cookie's top half, address XOR the cookie
    /// (IPv4) or the cookie and the transaction ID (IPv6).
    static func xorAddress(_ kind: Kind, _ address: TraversalAddress, transactionID: [UInt8]) -> STUNAttribute {
        var value: [UInt8] = [0, address.isIPv4 ? 0x01 : 0x02]
        value.appendBigEndian(address.port ^ UInt16(STUNMessage.magicCookie >> 16))
        let mask = STUNMessage.magicCookie.bigEndianBytes + transactionID
        value.append(contentsOf: zip(address.bytes, mask).map { $0 ^ $1 })
        return STUNAttribute(kind, value)
    }

    /// An ERROR-CODE attribute (§14.8).
    static func errorCode(_ code: Int, reason: String) -> STUNAttribute {
        STUNAttribute(.errorCode, [0, 0, UInt8(code / 100), UInt8(code % 100)] + Array(reason.utf8))
    }

    // MARK: - Typed readers

    var stringValue: String? { String(validating: self.value, as: UTF8.self) }

    var uint32Value: UInt32? {
        guard self.value.count == 4 else { return nil }
        return self.value.reduce(0) { $0 << 8 | UInt32($1) }
    }

    var uint64Value: UInt64? {
        guard self.value.count == 8 else { return nil }
        return self.value.reduce(0) { $0 << 8 | UInt64($1) }
    }

    func xorAddressValue(transactionID: [UInt8]) -> TraversalAddress? {
        guard self.value.count >= 4 else { return nil }
        let length: Int
        switch self.value[1] {
        case 0x01: length = 4
        case 0x02: length = 16
        default: return nil
        }
        guard self.value.count == 4 + length else { return nil }
        let port = (UInt16(self.value[2]) << 8 | UInt16(self.value[3])) ^ UInt16(STUNMessage.magicCookie >> 16)
        let mask = STUNMessage.magicCookie.bigEndianBytes + transactionID
        return TraversalAddress(bytes: zip(self.value[4...], mask).map { $0 ^ $1 }, port: port)
    }

    /// (code, reason) of an ERROR-CODE attribute.
    var errorCodeValue: (code: Int, reason: String)? {
        guard self.value.count >= 4 else { return nil }
        let code = Int(self.value[2] & 0x07) * 100 + Int(self.value[3])
        return (code, String(decoding: self.value[4...], as: UTF8.self))
    }
}

extension STUNMessage {
    func xorAddress(_ kind: STUNAttribute.Kind) -> TraversalAddress? {
        self.attribute(kind)?.xorAddressValue(transactionID: self.transactionID)
    }

    var errorCode: Int? { self.attribute(.errorCode)?.errorCodeValue?.code }
}
