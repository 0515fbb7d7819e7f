extension DNSMessage {
    /// A one-line account of the message for trace logs: its kind and each question and record
    /// as name and type (TTL 0 marked as a goodbye).
    var logSummary: String {
        var parts: [String] = []
        if !self.questions.isEmpty {
            parts.append("questions: " + self.questions.map { "\($0.name) \($0.type)\($0.unicastResponse ? " QU" : "")" }.joined(separator: ", "))
        }
        for (title, records) in [("answers", self.answers), ("authorities", self.authorities), ("additionals", self.additionals)] where !records.isEmpty {
            parts.append("\(title): " + records.map { "\($0.name) \($0.type)\($0.ttl == 0 ? " goodbye" : "")" }.joined(separator: ", "))
        }
        return (self.isResponse ? "response" : "query") + (parts.isEmpty ? "" : "; " + parts.joined(separator: "; "))
    }
}
