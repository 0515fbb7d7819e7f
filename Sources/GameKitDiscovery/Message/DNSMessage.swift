/// A DNS message as multicast DNS uses it (RFC 1035 §4.1, RFC 6762 §18).
public struct DNSMessage: Hashable, Sendable {
    /// Query ID; zero in multicast messages (RFC 6762 §18.1), echoed in unicast replies.
    public var id: UInt16
    /// QR: a response rather than a query.
    public var isResponse: Bool
    /// AA: set in every mDNS response (RFC 6762 §18.4).
    public var isAuthoritative: Bool
    /// TC: in a query, more known answers follow in later packets (RFC 6762 §7.2).
    public var isTruncated: Bool
    /// Opcode (bits 11–14); mDNS only uses 0 and ignores messages with any other (§18.3).
    public var opcode: UInt8
    /// Response code (low four bits); mDNS ignores messages with a non-zero one (§18.11).
    public var responseCode: UInt8

    public var questions: [DNSQuestion]
    public var answers: [DNSResourceRecord]
    public var authorities: [DNSResourceRecord]
    public var additionals: [DNSResourceRecord]

    public init(
        id: UInt16 = 0,
        isResponse: Bool,
        isAuthoritative: Bool? = nil,
        isTruncated: Bool = false,
        questions: [DNSQuestion] = [],
        answers: [DNSResourceRecord] = [],
        authorities: [DNSResourceRecord] = [],
        additionals: [DNSResourceRecord] = []
    ) {
        self.id = id
        self.isResponse = isResponse
        self.isAuthoritative = isAuthoritative ?? isResponse
        self.isTruncated = isTruncated
        self.opcode = 0
        self.responseCode = 0
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    /// The largest datagram this module reads: RFC 6762 §17's 9000 bytes, which include the IP
    /// and UDP headers, so any legal mDNS payload fits. Messages it sends stay far smaller
    /// (`MessagePacker.limit`).
    public static let maximumSize = 9000
}
