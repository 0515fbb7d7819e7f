import Foundation
import NetworkImpairment

/// The output of Tests/Peers/mdns_capture.py (one JSON line per mDNS packet, decoded by
/// python-zeroconf's parser and a minimal parser of the script's own), as typed values.
struct CapturedQuestion: Sendable, Equatable {
    var name: String
    var type: String
    var unicastResponse: Bool
}

struct CapturedRecord: Sendable, Equatable, CustomStringConvertible {
    var name: String
    var type: String
    var cacheFlush: Bool
    var ttl: Int
    /// The raw rdata, lowercase hex.
    var rdataHex: String
    var alias: String?
    var port: Int?
    var target: String?
    var address: String?
    var next: String?
    var types: [String]

    init(_ object: [String: Any]) {
        self.name = object["name"] as? String ?? ""
        self.type = object["type"] as? String ?? ""
        self.cacheFlush = object["flush"] as? Bool ?? false
        self.ttl = (object["ttl"] as? NSNumber)?.intValue ?? -1
        self.rdataHex = object["rdata_hex"] as? String ?? ""
        self.alias = object["alias"] as? String
        self.port = (object["port"] as? NSNumber)?.intValue
        self.target = object["target"] as? String
        self.address = object["address"] as? String
        self.next = object["next"] as? String
        self.types = object["types"] as? [String] ?? []
    }

    var description: String {
        let data = self.alias ?? self.address ?? self.target.map { "\(self.port ?? -1) \($0)" } ?? self.next.map { "\($0) \(self.types)" } ?? self.rdataHex
        return "\(self.name) \(self.type)\(self.cacheFlush ? " flush" : "") ttl=\(self.ttl) \(data)"
    }
}

struct CapturedPacket: Sendable, CustomStringConvertible {
    /// Monotonic receive time (CLOCK_MONOTONIC), nanoseconds.
    var time: Int64
    var source: String
    var id: Int
    var opcode: Int
    var responseCode: Int
    var isResponse: Bool
    var isAuthoritative: Bool
    var isTruncated: Bool
    /// A query the capture itself sent (looped back).
    var isOwn: Bool
    /// python-zeroconf and the capture's own parser read the same packet.
    var parsersAgree: Bool
    var disagreements: [String]
    var questions: [CapturedQuestion]
    var answers: [CapturedRecord]
    var authorities: [CapturedRecord]
    var additionals: [CapturedRecord]

    init?(_ object: [String: Any]) {
        guard object["event"] as? String == "packet", let time = (object["mono_ns"] as? NSNumber)?.int64Value else { return nil }
        self.time = time
        self.source = object["source"] as? String ?? ""
        self.id = (object["id"] as? NSNumber)?.intValue ?? -1
        self.opcode = (object["opcode"] as? NSNumber)?.intValue ?? -1
        self.responseCode = (object["rcode"] as? NSNumber)?.intValue ?? -1
        self.isResponse = object["qr"] as? Bool ?? false
        self.isAuthoritative = object["aa"] as? Bool ?? false
        self.isTruncated = object["tc"] as? Bool ?? false
        self.isOwn = object["own"] as? Bool ?? false
        self.parsersAgree = object["agree"] as? Bool ?? false
        self.disagreements = object["disagreements"] as? [String] ?? []
        self.questions = (object["questions"] as? [[String: Any]] ?? []).map {
            CapturedQuestion(name: $0["name"] as? String ?? "", type: $0["type"] as? String ?? "", unicastResponse: $0["qu"] as? Bool ?? false)
        }
        self.answers = (object["answers"] as? [[String: Any]] ?? []).map(CapturedRecord.init)
        self.authorities = (object["authorities"] as? [[String: Any]] ?? []).map(CapturedRecord.init)
        self.additionals = (object["additionals"] as? [[String: Any]] ?? []).map(CapturedRecord.init)
    }

    var records: [CapturedRecord] { self.answers + self.authorities + self.additionals }

    /// Whether any question or record names one of `names` (or points to it).
    func mentions(_ names: Set<String>) -> Bool {
        self.questions.contains { names.contains($0.name) }
            || self.records.contains { names.contains($0.name) || $0.alias.map(names.contains) == true || $0.target.map(names.contains) == true }
    }

    /// Milliseconds from `other` to this packet.
    func milliseconds(since other: Int64) -> Double { Double(self.time - other) / 1e6 }

    var description: String {
        var lines = ["\(self.isResponse ? "response" : "query") t=\(self.time / 1_000_000)ms from \(self.source) id=\(self.id)\(self.isAuthoritative ? " aa" : "")"]
        lines += self.questions.map { "  q \($0.name) \($0.type)\($0.unicastResponse ? " QU" : "")" }
        lines += self.answers.map { "  an \($0)" } + self.authorities.map { "  ns \($0)" } + self.additionals.map { "  ar \($0)" }
        return lines.joined(separator: "\n")
    }
}

/// A query the capture sent (`--query`).
struct CapturedQuery: Sendable {
    var time: Int64
    var spec: [String]
}

struct Capture: Sendable {
    var packets: [CapturedPacket]
    var queries: [CapturedQuery]
    var skippedQueries: [[String]]
    var errors: [String]
    var stopped: Bool

    /// The capture's lines in `result`, each prefixed with `tag` and a space.
    init(_ result: SandboxScript.Result, tag: String) {
        let objects = result.objects(tagged: tag)
        self.packets = objects.compactMap(CapturedPacket.init)
        self.queries = objects.compactMap { object in
            guard object["event"] as? String == "sent", let time = (object["mono_ns"] as? NSNumber)?.int64Value else { return nil }
            return CapturedQuery(time: time, spec: object["spec"] as? [String] ?? [])
        }
        self.skippedQueries = objects.filter { $0["event"] as? String == "query-skipped" }.map { $0["spec"] as? [String] ?? [] }
        self.errors = objects.filter { $0["event"] as? String == "error" }.map { $0["message"] as? String ?? "" }
        self.stopped = objects.contains { $0["event"] as? String == "stopped" }
    }

    /// Packets that others sent (not the capture's own queries).
    var received: [CapturedPacket] { self.packets.filter { !$0.isOwn } }

    /// The packets of one responder: those naming its instance or host.
    func packets(of responder: CapturedResponder) -> [CapturedPacket] {
        self.received.filter { $0.mentions([responder.instance, responder.host]) }
    }
}

/// One responder process as seen on the wire: its instance name and the host name its probes
/// proposed as SRV target.
struct CapturedResponder: Sendable {
    var instance: String
    var host: String

    /// Finds the host name in the first probe for `instance` (its SRV's target).
    init?(instance: String, in capture: Capture) {
        let srv = capture.received.lazy.flatMap(\.authorities).first { $0.name == instance && $0.type == "SRV" }
        guard let host = srv?.target else { return nil }
        self.instance = instance
        self.host = host
    }

    /// Probes: queries asking about the instance name with proposed records in the authority
    /// section.
    func probes(in capture: Capture) -> [CapturedPacket] {
        capture.received.filter { !$0.isResponse && !$0.authorities.isEmpty && $0.questions.contains { $0.name == self.instance } }
    }

    /// Announcements: unsolicited responses with the instance's SRV in the answer section, TTL > 0.
    func announcements(in capture: Capture) -> [CapturedPacket] {
        capture.received.filter { $0.isResponse && $0.answers.contains { $0.name == self.instance && $0.type == "SRV" && $0.ttl > 0 } }
    }

    /// Goodbyes: responses whose answers withdraw the instance's PTR (TTL 0).
    func goodbyes(in capture: Capture) -> [CapturedPacket] {
        capture.received.filter { $0.isResponse && $0.answers.contains { $0.type == "PTR" && $0.alias == self.instance && $0.ttl == 0 } }
    }

    /// Answers to PTR queries: responses with the instance's PTR (TTL > 0) as an answer and its
    /// SRV not among the answers (that is an announcement).
    func queryAnswers(in capture: Capture) -> [CapturedPacket] {
        capture.received.filter {
            $0.isResponse && $0.answers.contains { $0.type == "PTR" && $0.alias == self.instance && $0.ttl > 0 }
                && !$0.answers.contains { $0.name == self.instance && $0.type == "SRV" }
        }
    }
}

/// How gaps measured on the wire are compared with the protocol's intervals.
///
/// The machines' schedules are checked exactly, in virtual time (ResponderMachineTests,
/// BrowserTests). On the wire a packet leaves late by however long its sender's event loop was
/// busy, and the suite shares two cores with every other test: a gap comes out shorter than its
/// interval by the earlier packet's delay and longer by the later one's. The bounds still tell
/// the schedules apart (250 ms from 0 or 500 ms, 1 s from 2 s, 20–120 ms from at once).
enum WireTiming {
    /// How much earlier than its interval a gap may end (the earlier packet left late).
    static let early = 60.0
    /// How much later than its interval a gap may end.
    static func late(_ interval: Double) -> Double { max(100, interval / 4) }

    /// Whether a measured gap (ms) fits an interval (ms).
    static func fits(_ gap: Double, _ interval: Double) -> Bool {
        gap >= interval - Self.early && gap <= interval + Self.late(interval)
    }

    /// Whether a measured delay (ms) fits a random delay drawn from `range` (ms).
    static func fits(_ delay: Double, within range: ClosedRange<Double>) -> Bool {
        delay >= range.lowerBound - Self.early && delay <= range.upperBound + Self.late(range.upperBound)
    }
}
