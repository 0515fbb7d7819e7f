/// The strings of a DNS-SD TXT record (RFC 6763 §6), with key/value access.
///
/// Each string is at most 255 bytes; `key=value` pairs, a bare `key` meaning "present, no
/// value". Keys compare without case, and the first occurrence of a key wins (§6.4).
public struct TXTRecord: Sendable, Hashable, CustomStringConvertible {
    /// The strings as sent, in order.
    public private(set) var strings: [[UInt8]]

    /// An empty TXT record (sent as a single zero byte).
    public init() { self.strings = [] }

    /// The given strings; empty strings are dropped (an empty record is the canonical form).
    ///
    /// - Throws: `TXTRecordError.stringTooLong` for a string over 255 bytes.
    public init(strings: [[UInt8]]) throws(TXTRecordError) {
        for string in strings where string.count > 255 { throw .stringTooLong(string.count) }
        self.strings = strings.filter { !$0.isEmpty }
    }

    /// `key=value` pairs in the order given.
    ///
    /// - Throws: `TXTRecordError` for an empty key, a key containing `=`, or a pair over 255 bytes.
    public init(_ pairs: KeyValuePairs<String, String?>) throws(TXTRecordError) {
        self.init()
        for (key, value) in pairs { try self.set(key, value) }
    }

    /// Sets `key` to `value` (nil: the bare key), replacing an earlier value in place.
    public mutating func set(_ key: String, _ value: String?) throws(TXTRecordError) {
        try self.set(key, bytes: value.map { Array($0.utf8) })
    }

    /// Sets `key` to raw bytes (nil: the bare key), replacing an earlier value in place.
    public mutating func set(_ key: String, bytes value: [UInt8]?) throws(TXTRecordError) {
        let keyBytes = Array(key.utf8)
        guard !keyBytes.isEmpty, !keyBytes.contains(UInt8(ascii: "=")) else { throw .invalidKey(key) }
        var string = keyBytes
        if let value { string += [UInt8(ascii: "=")] + value }
        guard string.count <= 255 else { throw .stringTooLong(string.count) }
        if let index = self.strings.firstIndex(where: { Self.key(of: $0).map { Self.keysEqual($0, keyBytes) } ?? false }) {
            self.strings[index] = string
        } else {
            self.strings.append(string)
        }
    }

    /// The value of `key` as bytes: nil if absent, `[]` for a bare key or an empty value.
    public func bytes(for key: String) -> [UInt8]? {
        let keyBytes = Array(key.utf8)
        for string in self.strings {
            guard let found = Self.key(of: string), Self.keysEqual(found, keyBytes) else { continue }
            return found.count < string.count ? Array(string[(found.count + 1)...]) : []
        }
        return nil
    }

    /// The value of `key` as UTF-8 text (lossy), or nil if absent.
    public subscript(key: String) -> String? {
        self.bytes(for: key).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The largest TXT record a service may carry: it must fit one packet with the service's
    /// other records (RFC 6763 §6.2 advises staying under 1300 bytes; 8900 is the hard limit here).
    public static let maximumWireLength = 8900

    /// The number of bytes of the record's data on the wire (one zero byte when empty).
    public var wireLength: Int {
        self.strings.isEmpty ? 1 : self.strings.reduce(0) { $0 + 1 + $1.count }
    }

    public var description: String {
        "[" + self.strings.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ", ") + "]"
    }

    private static func key(of string: [UInt8]) -> [UInt8]? {
        let key = string.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false).first.map(Array.init) ?? []
        return key.isEmpty ? nil : key
    }

    private static func keysEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        DNSName.labelsEqual(a, b)
    }
}

/// Why a TXT record could not be built.
public enum TXTRecordError: Error, Hashable, Sendable {
    /// A string longer than 255 bytes (its length).
    case stringTooLong(Int)
    /// An empty key or one containing `=`.
    case invalidKey(String)
}
