/// A domain name as a list of labels, compared the way DNS compares names.
///
/// Labels are raw bytes, not dotted text: a DNS-SD instance name such as `Bob's Mac.Chat` is one
/// label that contains a dot and a space. Comparison and hashing ignore ASCII case (RFC 1035
/// §2.3.3, RFC 6762 §16); the original spelling is kept for display and on the wire.
public struct DNSName: Sendable, CustomStringConvertible {
    /// Longest label (RFC 1035 §2.3.4).
    public static let maximumLabelLength = 63
    /// Longest name in wire form, length bytes and terminating zero included (RFC 1035 §2.3.4).
    public static let maximumWireLength = 255

    /// The labels, most specific first, without the empty root label.
    public let labels: [[UInt8]]

    /// The case-folded hash of the labels, computed once: names are looked up in the record
    /// cache and the browser's tables many times for each time one is made.
    private let foldedHash: Int

    /// The root name (no labels).
    public static let root = DNSName(validatedLabels: [])

    /// A name from its labels.
    ///
    /// - Throws: `DNSNameError` when a label is empty or longer than 63 bytes, or when the whole
    ///   name would exceed 255 bytes on the wire.
    public init(labels: [[UInt8]]) throws(DNSNameError) {
        var wireLength = 1
        for label in labels {
            guard !label.isEmpty else { throw .emptyLabel }
            guard label.count <= Self.maximumLabelLength else { throw .labelTooLong(label.count) }
            wireLength += 1 + label.count
        }
        guard wireLength <= Self.maximumWireLength else { throw .nameTooLong(wireLength) }
        self.init(validatedLabels: labels)
    }

    init(validatedLabels: [[UInt8]]) {
        self.labels = validatedLabels
        // Hasher's per-process seed keeps the value unpredictable to senders of crafted names.
        var hasher = Hasher()
        for label in validatedLabels {
            hasher.combine(label.count)
            for byte in label { hasher.combine(Self.lowercase(byte)) }
        }
        self.foldedHash = hasher.finalize()
    }

    /// A name from dotted text, such as `_chat._udp.local`. A backslash escapes the next
    /// character (`\.` is a dot inside a label, `\\` a backslash), and `\DDD` is a decimal byte,
    /// as in RFC 1035 master files. A trailing dot is allowed, and `.` alone is the root (as
    /// `description` writes it).
    public init(_ text: String) throws(DNSNameError) {
        if text == "." {
            self = .root
            return
        }
        var labels: [[UInt8]] = []
        var current: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            switch byte {
            case UInt8(ascii: "."):
                guard !current.isEmpty else { throw .emptyLabel }
                labels.append(current)
                current = []
            case UInt8(ascii: "\\"):
                guard let next = bytes.popFirst() else { throw .badEscape }
                if next >= UInt8(ascii: "0"), next <= UInt8(ascii: "9") {
                    guard bytes.count >= 2,
                        let d2 = bytes.popFirst(), let d3 = bytes.popFirst(),
                        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d2),
                        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d3)
                    else { throw .badEscape }
                    let value = Int(next - 48) * 100 + Int(d2 - 48) * 10 + Int(d3 - 48)
                    guard value <= 255 else { throw .badEscape }
                    current.append(UInt8(value))
                } else {
                    current.append(next)
                }
            default:
                current.append(byte)
            }
        }
        if !current.isEmpty { labels.append(current) }
        try self.init(labels: labels)
    }

    /// `instance` as one label in front of `domain`: how DNS-SD names a service instance
    /// (RFC 6763 §4.1). The instance text may hold any characters, dots included.
    public init(instance: String, in domain: DNSName) throws(DNSNameError) {
        try self.init(labels: [Array(instance.utf8)] + domain.labels)
    }

    /// The name with its first label removed (the root stays the root).
    public var parent: DNSName {
        DNSName(validatedLabels: Array(self.labels.dropFirst()))
    }

    /// The first label as text (lossy for bytes that are not UTF-8), or "" for the root.
    public var firstLabel: String {
        self.labels.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// Whether this name is `domain` with one label in front (an instance of a service type),
    /// compared without case; no name is made (``parent`` makes one, and hashes it).
    public func isChild(of domain: DNSName) -> Bool {
        self.labels.count == domain.labels.count + 1 && self.isSubdomain(of: domain)
    }

    /// Whether this name ends with all the labels of `suffix`, compared without case.
    public func isSubdomain(of suffix: DNSName) -> Bool {
        guard suffix.labels.count <= self.labels.count else { return false }
        return zip(self.labels.suffix(suffix.labels.count), suffix.labels).allSatisfy { Self.labelsEqual($0, $1) }
    }

    /// The number of bytes the name takes on the wire without compression.
    public var wireLength: Int {
        self.labels.reduce(1) { $0 + 1 + $1.count }
    }

    /// Dotted text with a trailing dot; dots and backslashes inside labels are escaped, and
    /// labels are shown as UTF-8 text.
    public var description: String {
        if self.labels.isEmpty { return "." }
        var text = ""
        for label in self.labels {
            for character in String(decoding: label, as: UTF8.self) {
                if character == "." || character == "\\" { text.append("\\") }
                text.append(character)
            }
            text += "."
        }
        return text
    }

    /// The name in lower case (ASCII letters only), as used for comparisons and keys.
    var canonical: [[UInt8]] {
        self.labels.map { $0.map(Self.lowercase) }
    }

    static func lowercase(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    static func labelsEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { lowercase($0) == lowercase($1) }
    }
}

extension DNSName: Hashable {
    public static func == (lhs: DNSName, rhs: DNSName) -> Bool {
        lhs.foldedHash == rhs.foldedHash && lhs.labels.count == rhs.labels.count
            && zip(lhs.labels, rhs.labels).allSatisfy { labelsEqual($0, $1) }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.foldedHash)
    }
}

/// Why a name could not be built.
public enum DNSNameError: Error, Hashable, Sendable {
    /// Two dots in a row, a leading dot, or an empty label.
    case emptyLabel
    /// A label longer than 63 bytes (its length).
    case labelTooLong(Int)
    /// A name longer than 255 bytes on the wire (its length).
    case nameTooLong(Int)
    /// A backslash at the end, or a `\DDD` escape that is not three digits up to 255.
    case badEscape
}
