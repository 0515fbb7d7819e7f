import Foundation
import NetworkImpairment
import Testing

/// Our responder's packets as an independent parser reads them: `gk-mdns register` processes
/// run next to Tests/Peers/mdns_capture.py, which joins 224.0.0.251:5353 on the sandbox's
/// loopback and decodes every packet with python-zeroconf's DNSIncoming (plus a minimal parser
/// of its own for sections and raw rdata). The checks are protocol facts (RFC 6762, RFC 6763):
/// probe and announcement spacing, no QU bit on a shared port, the cache-flush bit, TTLs, the empty TXT record,
/// goodbyes and known-answer suppression. Times are compared only with the protocol's own
/// spacing, with room for a busy machine (``WireTiming``).
///
/// One sandbox run (about 10 s) serves every test of the suite: two responders, "Empty"
/// (`_confa._udp`, no TXT entries) and "Full" (`_confb._udp`, three TXT entries), and three
/// PTR queries for `_confa._udp` sent by the capture, timed from Empty's first announcement
/// (A1; the next announcements come at A1 + 1 s and A1 + 3 s):
///
/// | when | known answer | expected |
/// |---|---|---|
/// | A1 + 2.2 s | Empty's PTR, TTL 4500 (full) | no answer (§7.1) |
/// | A1 + 4.2 s | none | an answer after 20–120 ms (§6), SRV/TXT/A as additionals (RFC 6763 §12) |
/// | A1 + 5.5 s | Empty's PTR, TTL 2000 (< half of 4500) | an answer (§7.1) |
///
/// Each query comes more than a second after the PTR was last multicast, so the responder's
/// once-a-second limit (§6) cannot be what keeps the first one unanswered.
@Suite("Our responder's packets through python-zeroconf's parser", .serialized)
struct CaptureConformanceTests {

    static let emptyInstance = "Empty._confa._udp.local."
    static let fullInstance = "Full._confb._udp.local."
    /// `a=1`, `flag`, `empty=` as length-prefixed strings.
    static let fullTXT = "03613d31" + "04666c6167" + "06656d7074793d"

    struct Run: Sendable {
        var capture: Capture
        var lines: [String]
        var status: Int32
    }

    static let shared = Task<Run, any Error> {
        let result = try await SandboxScript.run(
            """
            cap=$(mktemp)
            "$PEER_PYTHON" "$PEERS/mdns_capture.py" --seconds 10 \\
              --query announce+2.2 PTR _confa._udp.local. \(Self.emptyInstance) 4500 \\
              --query announce+4.2 PTR _confa._udp.local. \\
              --query announce+5.5 PTR _confa._udp.local. \(Self.emptyInstance) 2000 \\
              | tee "$cap" | sed -u 's/^/C /' &
            \(SandboxScript.awaitListening("\"$cap\""))
            gk-mdns register --type _confa._udp --name Empty --port 7020 --seconds 8 --ignore-stdin | sed -u 's/^/A /' &
            gk-mdns register --type _confb._udp --name Full --port 7021 --txt a=1 --txt flag --txt empty= --seconds 8 --ignore-stdin | sed -u 's/^/B /' &
            wait
            rm -f "$cap"
            """, timeout: 60)
        return Run(capture: Capture(result, tag: "C"), lines: result.lines, status: result.status)
    }

    /// The run, and both responders as the capture saw them.
    static func fixture() async throws -> (capture: Capture, empty: CapturedResponder, full: CapturedResponder) {
        let run = try await Self.shared.value
        let capture = run.capture
        let empty = try #require(CapturedResponder(instance: Self.emptyInstance, in: capture), "no probe of \(Self.emptyInstance); output:\n\(run.lines.joined(separator: "\n"))")
        let full = try #require(CapturedResponder(instance: Self.fullInstance, in: capture), "no probe of \(Self.fullInstance)")
        return (capture, empty, full)
    }

    // MARK: - The capture itself

    @Test func theCaptureRanAndBothParsersReadEveryPacketAlike() async throws {
        let run = try await Self.shared.value
        let capture = run.capture
        #expect(run.status == 0)
        #expect(capture.errors.isEmpty, "\(capture.errors)")
        #expect(capture.stopped)
        #expect(capture.queries.count == 3)
        #expect(capture.skippedQueries.isEmpty, "\(capture.skippedQueries)")
        #expect(!capture.received.isEmpty)
        for packet in capture.packets {
            #expect(packet.parsersAgree, "\(packet.disagreements)\n\(packet)")
        }
        // Both processes ran to the end and said goodbye.
        #expect(run.lines.filter { $0.hasPrefix("A ") && $0.contains("\"unregistered\"") }.count == 1)
        #expect(run.lines.filter { $0.hasPrefix("B ") && $0.contains("\"unregistered\"") }.count == 1)
    }

    @Test func headersAreThoseOfMulticastDNS() async throws {
        let (capture, empty, full) = try await Self.fixture()
        for responder in [empty, full] {
            for packet in capture.packets(of: responder) {
                // §18.1: ID zero in multicast messages; §18.3, §18.11: opcode and rcode zero.
                #expect(packet.id == 0, "\(packet)")
                #expect(packet.opcode == 0 && packet.responseCode == 0, "\(packet)")
                #expect(!packet.isTruncated, "\(packet)")
                // A source address on the link (RFC 6762 §11), not 0.0.0.0.
                #expect(packet.source.hasPrefix("127.0.0.1"), "\(packet)")
                if packet.isResponse {
                    // §18.4: responses are authoritative; §6: no questions in a response.
                    #expect(packet.isAuthoritative, "\(packet)")
                    #expect(packet.questions.isEmpty, "\(packet)")
                }
            }
        }
    }

    // MARK: - Probing (RFC 6762 §8.1)

    /// The capture shares port 5353 with the responders, so none of their probes asks for a
    /// unicast reply (RFC 6762 §15.1); the QU of a first probe with the port to itself is seen
    /// from another namespace in `AvahiInteropTests`.
    @Test func threeProbes250msApartAllQMBecauseTheCaptureSharesThePort() async throws {
        let (capture, empty, full) = try await Self.fixture()
        for (responder, txt) in [(empty, "00"), (full, Self.fullTXT)] {
            let probes = responder.probes(in: capture)
            try #require(probes.count == 3, "\(responder.instance): \(probes)")
            for (earlier, later) in zip(probes, probes.dropFirst()) {
                let gap = later.milliseconds(since: earlier.time)
                #expect(WireTiming.fits(gap, 250), "\(responder.instance): probes \(gap) ms apart")
            }
            for (index, probe) in probes.enumerated() {
                // Both names are probed together, with questions of type ANY.
                #expect(Set(probe.questions.map(\.name)) == [responder.instance, responder.host], "\(probe)")
                #expect(probe.questions.allSatisfy { $0.type == "ANY" }, "\(probe)")
                #expect(probe.questions.allSatisfy { !$0.unicastResponse }, "probe \(index + 1): \(probe)")
                #expect(probe.answers.isEmpty, "\(probe)")
                // The proposed records, in the authority section (§8.2).
                let srv = probe.authorities.filter { $0.name == responder.instance && $0.type == "SRV" }
                #expect(srv.count == 1 && srv.first?.target == responder.host && srv.first?.ttl == 120, "\(probe)")
                let text = probe.authorities.filter { $0.name == responder.instance && $0.type == "TXT" }
                #expect(text.count == 1 && text.first?.rdataHex == txt && text.first?.ttl == 4500, "\(probe)")
                #expect(probe.authorities.contains { $0.name == responder.host && $0.type == "A" && $0.address == "127.0.0.1" && $0.ttl == 120 }, "\(probe)")
                #expect(!probe.authorities.contains { $0.type == "PTR" }, "\(probe)")
                // The cache-flush bit is for responses (§10.2), not for proposed records.
                #expect(probe.authorities.allSatisfy { !$0.cacheFlush }, "\(probe)")
            }
            // §8.1: the name is ours 250 ms after the third probe; then the first announcement.
            let first = try #require(responder.announcements(in: capture).first)
            let wait = first.milliseconds(since: probes[2].time)
            #expect(WireTiming.fits(wait, 250), "\(responder.instance): first announcement \(wait) ms after the third probe")
        }
    }

    // MARK: - Announcing (RFC 6762 §8.3)

    @Test func announcementsRepeatWithTheGapDoubling() async throws {
        let (capture, empty, full) = try await Self.fixture()
        for responder in [empty, full] {
            let announcements = responder.announcements(in: capture)
            #expect(announcements.count >= 2, "§8.3: at least two announcements")
            // The responder sends three (the run is long enough for all of them).
            #expect(announcements.count == 3, "\(responder.instance): \(announcements.count) announcements")
            for (index, (earlier, later)) in zip(announcements, announcements.dropFirst()).enumerated() {
                let gap = later.milliseconds(since: earlier.time)
                let expected = 1000.0 * Double(1 << index)
                #expect(WireTiming.fits(gap, expected), "\(responder.instance): announcement gap \(index + 1) is \(gap) ms, not \(expected)")
            }
        }
    }

    @Test func announcementsCarryEveryRecordOfTheServiceAndHost() async throws {
        let (capture, empty, full) = try await Self.fixture()
        for (responder, type, port) in [(empty, "_confa._udp.local.", 7020), (full, "_confb._udp.local.", 7021)] {
            for packet in responder.announcements(in: capture) {
                let answers = packet.answers
                #expect(answers.contains { $0.name == type && $0.type == "PTR" && $0.alias == responder.instance }, "\(packet)")
                #expect(answers.contains { $0.name == "_services._dns-sd._udp.local." && $0.type == "PTR" && $0.alias == type }, "\(packet)")
                #expect(answers.contains { $0.name == responder.instance && $0.type == "SRV" && $0.port == port && $0.target == responder.host }, "\(packet)")
                #expect(answers.contains { $0.name == responder.instance && $0.type == "TXT" }, "\(packet)")
                #expect(answers.contains { $0.name == responder.host && $0.type == "A" && $0.address == "127.0.0.1" }, "\(packet)")
                // NSEC (§6.1): next name is the record's own name, the bitmap lists the types
                // that exist.
                let instanceNSEC = answers.filter { $0.name == responder.instance && $0.type == "NSEC" }
                #expect(instanceNSEC.count == 1 && instanceNSEC.first?.next == responder.instance && Set(instanceNSEC.first?.types ?? []) == ["SRV", "TXT"], "\(packet)")
                let hostNSEC = answers.filter { $0.name == responder.host && $0.type == "NSEC" }
                let addressTypes = Set(answers.filter { $0.name == responder.host && ($0.type == "A" || $0.type == "AAAA") }.map(\.type))
                #expect(hostNSEC.count == 1 && hostNSEC.first?.next == responder.host && Set(hostNSEC.first?.types ?? []) == addressTypes, "\(packet)")
            }
        }
    }

    // MARK: - Record bits and TTLs (RFC 6762 §10, §10.2)

    @Test func cacheFlushOnUniqueRecordsOnlyAndTTLsOf120And4500() async throws {
        let (capture, empty, full) = try await Self.fixture()
        for responder in [empty, full] {
            let responses = capture.packets(of: responder).filter(\.isResponse)
            #expect(!responses.isEmpty)
            for packet in responses {
                let isGoodbye = responder.goodbyes(in: capture).contains { $0.time == packet.time }
                for record in packet.answers + packet.additionals {
                    switch record.type {
                    case "PTR":
                        #expect(!record.cacheFlush, "shared record with cache-flush: \(record)")
                    case "SRV", "TXT", "A", "AAAA", "NSEC":
                        #expect(record.cacheFlush, "unique record without cache-flush: \(record)")
                    default:
                        Issue.record("unexpected record \(record)")
                    }
                    if isGoodbye { continue }
                    switch record.type {
                    case "SRV", "A", "AAAA": #expect(record.ttl == 120, "\(record)")
                    case "PTR", "TXT": #expect(record.ttl == 4500, "\(record)")
                    default: #expect(record.ttl > 0, "\(record)")
                    }
                }
            }
        }
    }

    // MARK: - TXT (RFC 6763 §6.1)

    @Test func txtRdataIsExactlyTheStringsAndAnEmptyRecordIsOneZeroByte() async throws {
        let (capture, empty, full) = try await Self.fixture()
        for (responder, txt) in [(empty, "00"), (full, Self.fullTXT)] {
            let records = capture.packets(of: responder).flatMap(\.records).filter { $0.name == responder.instance && $0.type == "TXT" }
            #expect(records.count >= 3 + 3 + 1, "\(responder.instance): probes, announcements and goodbye each carry the TXT")
            for record in records {
                #expect(record.rdataHex == txt, "\(record)")
            }
        }
    }

    // MARK: - Goodbyes (RFC 6762 §10.1)

    @Test func goodbyesWithdrawEveryRecordWithTTLZero() async throws {
        let (capture, empty, full) = try await Self.fixture()
        for responder in [empty, full] {
            let goodbyes = responder.goodbyes(in: capture)
            try #require(!goodbyes.isEmpty, "\(responder.instance): no goodbye")
            let lastAnnouncement = try #require(responder.announcements(in: capture).last)
            for packet in goodbyes {
                #expect(packet.time > lastAnnouncement.time)
                #expect(packet.records.allSatisfy { $0.ttl == 0 }, "\(packet)")
                for type in ["PTR", "SRV", "TXT"] {
                    #expect(packet.answers.contains { $0.type == type && ($0.name == responder.instance || $0.alias == responder.instance) }, "no \(type) goodbye: \(packet)")
                }
                // The last service going: the host's addresses go too.
                #expect(packet.answers.contains { $0.name == responder.host && $0.type == "A" }, "\(packet)")
            }
            // Nothing of this responder's after its goodbye.
            let last = capture.packets(of: responder).last
            #expect(last?.time == goodbyes.last?.time)
        }
    }

    // MARK: - Known-answer suppression (RFC 6762 §7.1) and answer delay (§6)

    @Test func knownAnswersAtHalfTheTTLOrMoreSuppressTheAnswer() async throws {
        let (capture, empty, full) = try await Self.fixture()
        let queries = capture.queries.sorted { $0.time < $1.time }
        try #require(queries.count == 3)
        let (fullKnown, noKnown, lowKnown) = (queries[0], queries[1], queries[2])
        #expect(fullKnown.spec.last == "4500" && noKnown.spec.count == 3 && lowKnown.spec.last == "2000")
        let answers = empty.queryAnswers(in: capture)

        // Preconditions: each query comes more than a second after the PTR was last multicast,
        // and the response window (120 ms) closes before the next announcement.
        let multicasts = (empty.announcements(in: capture) + answers).map(\.time).sorted()
        for query in queries {
            if let previous = multicasts.last(where: { $0 < query.time }) {
                #expect(Double(query.time - previous) / 1e6 > 1000, "query \(query.spec) only \(Double(query.time - previous) / 1e6) ms after the PTR was multicast")
            }
            if let next = empty.announcements(in: capture).first(where: { $0.time > query.time }) {
                #expect(next.milliseconds(since: query.time) > 120 + WireTiming.late(120))
            }
        }

        func replies(between start: Int64, and end: Int64?) -> [CapturedPacket] {
            answers.filter { $0.time > start && $0.time < (end ?? .max) }
        }
        // The full-TTL known answer: silence.
        #expect(replies(between: fullKnown.time, and: noKnown.time).isEmpty, "answered despite the known answer: \(replies(between: fullKnown.time, and: noKnown.time))")

        // No known answer: one answer, 20–120 ms later, with the instance's records attached.
        let plain = replies(between: noKnown.time, and: lowKnown.time)
        try #require(plain.count == 1, "\(plain)")
        let reply = plain[0]
        let delay = reply.milliseconds(since: noKnown.time)
        #expect(WireTiming.fits(delay, within: 20...120), "answer after \(delay) ms")
        #expect(reply.answers.count == 1 && reply.answers.first?.type == "PTR" && reply.answers.first?.ttl == 4500, "\(reply)")
        #expect(reply.additionals.contains { $0.name == empty.instance && $0.type == "SRV" && $0.port == 7020 && $0.target == empty.host }, "\(reply)")
        #expect(reply.additionals.contains { $0.name == empty.instance && $0.type == "TXT" && $0.rdataHex == "00" }, "\(reply)")
        #expect(reply.additionals.contains { $0.name == empty.host && $0.type == "A" && $0.address == "127.0.0.1" }, "\(reply)")

        // A known answer below half the TTL does not suppress (the querier's copy needs renewing).
        let renewed = replies(between: lowKnown.time, and: nil)
        #expect(renewed.count == 1, "\(renewed)")
        if let renewal = renewed.first {
            let delay = renewal.milliseconds(since: lowKnown.time)
            #expect(WireTiming.fits(delay, within: 20...120), "answer after \(delay) ms")
        }

        // The other responder has no record of that type and stays quiet.
        #expect(full.queryAnswers(in: capture).isEmpty)
    }
}
