/// Splits records into messages small enough for one unfragmented datagram.
///
/// RFC 6762 §17 allows up to 9000 bytes, but a datagram larger than the link MTU is fragmented,
/// and a lost fragment loses the whole message. Responses are split into several complete
/// messages; a query's known answers continue in further packets with the TC bit set on all but
/// the last (RFC 6762 §7.2). Sizes are estimated without compression, so messages stay under the
/// limit whatever the encoder compresses.
enum MessagePacker {
    /// Payload bytes per message: fits a 1500-byte Ethernet MTU with IPv6 and UDP headers.
    static let limit = 1440
    static let headerSize = 12

    /// Responses carrying `answers` (all of them, each in some message) and as many
    /// `additionals` as fit after them.
    static func responses(id: UInt16 = 0, questions: [DNSQuestion] = [], answers: [DNSResourceRecord], additionals: [DNSResourceRecord]) -> [DNSMessage] {
        var messages: [DNSMessage] = []
        let questionSize = questions.reduce(0) { $0 + $1.name.wireLength + 4 }
        var current = DNSMessage(id: id, isResponse: true, questions: questions)
        var size = headerSize + questionSize
        for record in answers {
            let recordSize = record.encodedSizeEstimate
            if size + recordSize > limit, !current.answers.isEmpty {
                messages.append(current)
                current = DNSMessage(id: id, isResponse: true, questions: questions)
                size = headerSize + questionSize
            }
            current.answers.append(record)
            size += recordSize
        }
        for record in additionals where !answers.contains(where: { $0.isSameRecord(as: record) }) {
            let recordSize = record.encodedSizeEstimate
            guard size + recordSize <= limit else { continue }
            current.additionals.append(record)
            size += recordSize
        }
        if !current.answers.isEmpty { messages.append(current) }
        return messages
    }

    /// Queries for `questions` with `authorities` (probes) in the first message and
    /// `knownAnswers` spread over as many messages as needed, TC set on every message whose
    /// known answers continue in the next (RFC 6762 §7.2). Questions that do not fit one message
    /// are spread over several queries.
    static func queries(questions: [DNSQuestion], knownAnswers: [DNSResourceRecord], authorities: [DNSResourceRecord] = []) -> [DNSMessage] {
        var messages: [DNSMessage] = []
        var current = DNSMessage(isResponse: false, authorities: authorities)
        var size = headerSize + authorities.reduce(0) { $0 + $1.encodedSizeEstimate }
        for question in questions {
            let questionSize = question.name.wireLength + 4
            if size + questionSize > limit, !current.questions.isEmpty {
                messages.append(current)
                current = DNSMessage(isResponse: false)
                size = headerSize
            }
            current.questions.append(question)
            size += questionSize
        }
        for record in knownAnswers {
            let recordSize = record.encodedSizeEstimate
            if size + recordSize > limit, !(current.answers.isEmpty && current.questions.isEmpty) {
                current.isTruncated = true
                messages.append(current)
                current = DNSMessage(isResponse: false)
                size = headerSize
            }
            current.answers.append(record)
            size += recordSize
        }
        messages.append(current)
        return messages
    }
}
