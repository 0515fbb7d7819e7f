/// The data of a resource record, by type.
public enum DNSRecordData: Hashable, Sendable {
    /// An IPv4 address, four bytes in network order.
    case a(IPv4Bytes)
    /// An IPv6 address, sixteen bytes in network order.
    case aaaa(IPv6Bytes)
    /// A pointer to another name.
    case ptr(DNSName)
    /// A service's host and port (RFC 2782).
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// Character strings of up to 255 bytes each. An empty list is sent as one empty string
    /// (a single zero byte), as RFC 6763 §6.1 requires.
    case txt([[UInt8]])
    /// The types that exist for `next`'s owner name (RFC 4034 §4, restricted form of RFC 6762
    /// §6.1: only types below 256 are kept).
    case nsec(next: DNSName, types: Set<DNSRecordType>)
    /// Any other type, kept as raw bytes.
    case other(type: DNSRecordType, bytes: [UInt8])

    /// The record type this data belongs to.
    public var type: DNSRecordType {
        switch self {
        case .a: .a
        case .aaaa: .aaaa
        case .ptr: .ptr
        case .srv: .srv
        case .txt: .txt
        case .nsec: .nsec
        case .other(let type, _): type
        }
    }
}

/// Four address bytes, network order.
public struct IPv4Bytes: Hashable, Sendable, CustomStringConvertible {
    public var bytes: (UInt8, UInt8, UInt8, UInt8)
    public init(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) { self.bytes = (b0, b1, b2, b3) }

    /// The four bytes as an array.
    public var array: [UInt8] { [self.bytes.0, self.bytes.1, self.bytes.2, self.bytes.3] }

    public static func == (lhs: IPv4Bytes, rhs: IPv4Bytes) -> Bool { lhs.array == rhs.array }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.array) }
    public var description: String { self.array.map(String.init).joined(separator: ".") }
}

/// Sixteen address bytes, network order.
public struct IPv6Bytes: Hashable, Sendable, CustomStringConvertible {
    /// Exactly sixteen bytes.
    public let array: [UInt8]

    /// Nil unless `bytes` holds exactly sixteen bytes.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.array = bytes
    }

    /// Whether this is a link-local address (fe80::/10), usable only with an interface.
    public var isLinkLocal: Bool { self.array[0] == 0xFE && self.array[1] & 0xC0 == 0x80 }

    /// RFC 5952 text: lower-case hex, leading zeros dropped, the longest run of two or more
    /// zero groups (the first of equal runs) written as `::`.
    public var description: String {
        let groups = stride(from: 0, to: 16, by: 2).map { UInt16(self.array[$0]) << 8 | UInt16(self.array[$0 + 1]) }
        var best = (start: -1, length: 0)
        var index = 0
        while index < 8 {
            guard groups[index] == 0 else {
                index += 1
                continue
            }
            var end = index
            while end < 8, groups[end] == 0 { end += 1 }
            if end - index > best.length, end - index >= 2 { best = (index, end - index) }
            index = end
        }
        let text = { (range: ArraySlice<UInt16>) in range.map { String($0, radix: 16) }.joined(separator: ":") }
        guard best.start >= 0 else { return text(groups[...]) }
        return text(groups[..<best.start]) + "::" + text(groups[(best.start + best.length)...])
    }
}

/// A resource record as mDNS uses it.
public struct DNSResourceRecord: Hashable, Sendable, CustomStringConvertible {
    /// The owner name.
    public var name: DNSName
    /// The record data; its case gives the type.
    public var data: DNSRecordData
    /// Class, normally `DNSClass.internet`.
    public var recordClass: UInt16
    /// The mDNS cache-flush bit (top bit of the class field in answers, RFC 6762 §10.2): this
    /// record replaces all others of its name and type, it is not one of a shared set.
    public var cacheFlush: Bool
    /// Time to live in seconds; 0 is a goodbye (RFC 6762 §10.1).
    public var ttl: UInt32

    public init(name: DNSName, data: DNSRecordData, ttl: UInt32, cacheFlush: Bool = false, recordClass: UInt16 = DNSClass.internet) {
        self.name = name
        self.data = data
        self.ttl = ttl
        self.cacheFlush = cacheFlush
        self.recordClass = recordClass
    }

    /// The record type.
    public var type: DNSRecordType { self.data.type }

    /// Whether two records are the same record: name, type, class and data, ignoring TTL and
    /// the cache-flush bit (RFC 6762 §7.1 compares records this way).
    public func isSameRecord(as other: DNSResourceRecord) -> Bool {
        self.name == other.name && self.recordClass == other.recordClass && self.data == other.data
    }

    public var description: String {
        "\(self.name) \(self.ttl) \(self.cacheFlush ? "IN-flush" : "IN") \(self.type) \(self.data)"
    }
}

/// A question: which records of a name and type the asker wants.
public struct DNSQuestion: Hashable, Sendable, CustomStringConvertible {
    public var name: DNSName
    public var type: DNSRecordType
    /// Class, normally `DNSClass.internet`.
    public var questionClass: UInt16
    /// The mDNS unicast-response ("QU") bit, top bit of the class field (RFC 6762 §5.4).
    public var unicastResponse: Bool

    public init(name: DNSName, type: DNSRecordType, unicastResponse: Bool = false, questionClass: UInt16 = DNSClass.internet) {
        self.name = name
        self.type = type
        self.unicastResponse = unicastResponse
        self.questionClass = questionClass
    }

    /// Whether `record` answers this question (name, type or ANY, class or ANY).
    public func isAnswered(by record: DNSResourceRecord) -> Bool {
        record.name == self.name
            && (self.type == .any || self.type == record.type)
            && (self.questionClass == DNSClass.any || self.questionClass == record.recordClass)
    }

    public var description: String { "\(self.name) \(self.unicastResponse ? "QU" : "QM") \(self.type)" }
}
