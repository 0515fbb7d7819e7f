import Foundation
import NIOCore
import Testing

@testable import GameKitDiscovery

/// The DNS message codec: round trips, name compression, byte-exact packets written by hand
/// from RFC 1035 §4.1 and RFC 6762 §18, names, and hostile inputs (each rejected with its own
/// error, none crashing).
@Suite("DNS codec")
struct DNSCodecTests {
    // MARK: - Round trips

    @Test func everyRecordTypeRoundTripsWithCacheFlushQUAndTruncation() throws {
        let host = try DNSName("Host-7.local")
        let instance = try DNSName(instance: "Bob's Mac.Chat", in: DNSName("_chat._udp.local"))
        let message = DNSMessage(
            id: 0x1234,
            isResponse: false,
            isTruncated: true,
            questions: [
                DNSQuestion(name: instance, type: .any, unicastResponse: true),
                DNSQuestion(name: try DNSName("_chat._udp.local"), type: .ptr),
            ],
            answers: [
                DNSResourceRecord(name: host, data: .a(IPv4Bytes(192, 168, 1, 7)), ttl: 120, cacheFlush: true),
                DNSResourceRecord(name: host, data: .aaaa(Self.linkLocal), ttl: 120, cacheFlush: true),
                DNSResourceRecord(name: try DNSName("_chat._udp.local"), data: .ptr(instance), ttl: 4500),
                DNSResourceRecord(
                    name: instance, data: .srv(priority: 1, weight: 2, port: 54321, target: host), ttl: 120,
                    cacheFlush: true),
                DNSResourceRecord(name: instance, data: .txt([Array("v=1".utf8), [], Array("n=bob".utf8)]), ttl: 4500),
                DNSResourceRecord(name: instance, data: .txt([]), ttl: 4500, cacheFlush: true),
            ],
            authorities: [
                DNSResourceRecord(name: host, data: .nsec(next: host, types: [.a, .aaaa, .txt, .srv, .any]), ttl: 120)
            ],
            additionals: [
                DNSResourceRecord(
                    name: host, data: .other(type: DNSRecordType(rawValue: 99), bytes: [1, 2, 3]), ttl: 7),
                DNSResourceRecord(name: .root, data: .other(type: DNSRecordType(rawValue: 41), bytes: []), ttl: 0),
            ]
        )
        let decoded = try DNSMessage(decoding: message.encoded())
        #expect(decoded == message)
        #expect(decoded.questions[0].unicastResponse && !decoded.questions[1].unicastResponse)
        #expect(decoded.answers.map(\.cacheFlush) == [true, true, false, true, false, true])
        #expect(decoded.isTruncated && !decoded.isResponse && !decoded.isAuthoritative)
        // Equality ignores case, so check that the spelling survived too.
        #expect(decoded.answers[0].name.labels[0] == Array("Host-7".utf8))
    }

    @Test func headerFieldsOpcodeAndResponseCodeRoundTrip() throws {
        var message = DNSMessage(id: 0xBEEF, isResponse: true, isAuthoritative: false)
        message.opcode = 5
        message.responseCode = 3
        let bytes = Array(message.encoded().readableBytesView)
        // QR | opcode 5 << 11 | rcode 3 (AA clear): 1010 1000 0000 0011.
        #expect(bytes == [0xBE, 0xEF, 0xA8, 0x03, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(try DNSMessage(decoding: message.encoded()) == message)
    }

    @Test func decodingReadsFromTheReaderIndexAndDoesNotConsumeTheBuffer() throws {
        let message = Self.announcement()
        var buffer = ByteBuffer(bytes: [0xAA, 0xBB, 0xCC])
        message.encode(into: &buffer)  // pointers count from the message's first byte
        buffer.moveReaderIndex(forwardBy: 3)
        let before = buffer
        #expect(try DNSMessage(decoding: buffer) == message)
        #expect(buffer == before && buffer.readerIndex == 3)
    }

    // MARK: - Compression

    @Test func compressionShrinksRepeatedNamesAndDecodesBack() throws {
        let message = Self.announcement()
        let encoded = message.encoded()
        #expect(encoded.readableBytes < message.encodedSizeEstimate - 60)
        #expect(try DNSMessage(decoding: encoded) == message)

        // The PTR record's owner takes 21 bytes from offset 12 and its data starts at 43 with the
        // instance label (12 bytes) and a pointer to the service name; the SRV record's owner
        // at 57 is then just a pointer to that instance name.
        let bytes = Array(encoded.readableBytesView)
        #expect(bytes[55...56] == [0xC0, 0x0C])
        #expect(bytes[57...58] == [0xC0, 43])
    }

    @Test func compressionMatchesNamesIgnoringCase() throws {
        let message = DNSMessage(
            isResponse: true,
            answers: [
                DNSResourceRecord(name: try DNSName("MyHost.local"), data: .a(IPv4Bytes(10, 0, 0, 1)), ttl: 120),
                DNSResourceRecord(name: try DNSName("myhost.LOCAL"), data: .a(IPv4Bytes(10, 0, 0, 2)), ttl: 120),
            ])
        let bytes = Array(message.encoded().readableBytesView)
        // Name at 12 (14 bytes), 14 bytes of type/class/TTL/length/address, then a pointer.
        #expect(bytes[40...41] == [0xC0, 0x0C])
        #expect(bytes.count == 12 + 14 + 14 + 2 + 14)
        #expect(try DNSMessage(decoding: message.encoded()) == message)
    }

    // MARK: - Byte-exact packets

    /// A DNS-SD browse answer (RFC 6763 §4.1) as RFC 1035 §4.1 lays it out: header, then the
    /// record `_http._tcp.local PTR My Printer._http._tcp.local`, whose data repeats the owner
    /// name through a pointer to offset 12 (0xC00C).
    static let printerAnswer: [UInt8] =
        [
            0x00, 0x00,  // ID 0 (RFC 6762 §18.1)
            0x84, 0x00,  // QR, AA; opcode 0, rcode 0
            0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,  // QD 0, AN 1, NS 0, AR 0
        ] + label("_http") + label("_tcp") + label("local") + [0x00]  // owner name at offset 12
        + [
            0x00, 0x0C,  // type PTR
            0x00, 0x01,  // class IN, shared record: no cache-flush bit
            0x00, 0x00, 0x11, 0x94,  // TTL 4500 s
            0x00, 0x0D,  // 13 bytes of data:
        ] + label("My Printer") + [0xC0, 0x0C]  // one label, then a pointer to the owner name

    @Test func browseAnswerEncodesByteExact() throws {
        let service = try DNSName("_http._tcp.local")
        let message = DNSMessage(
            isResponse: true,
            answers: [
                DNSResourceRecord(
                    name: service, data: .ptr(try DNSName(instance: "My Printer", in: service)), ttl: 4500)
            ])
        #expect(Array(message.encoded().readableBytesView) == Self.printerAnswer)
        #expect(try Self.decode(Self.printerAnswer) == message)
    }

    /// A probe (RFC 6762 §8.1): a QU question of type ANY for the host name, with the proposed
    /// record in the authority section, its owner compressed to the question name.
    @Test func probeWithAuthoritySectionEncodesByteExact() throws {
        let packet: [UInt8] =
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]  // QD 1, NS 1
            + label("gk") + label("local") + [0x00]  // offset 12
            + [0x00, 0xFF, 0x80, 0x01]  // type ANY, class IN with the QU bit
            + [0xC0, 0x0C, 0x00, 0x01, 0x00, 0x01]  // pointer to 12, type A, class IN (no flush in probes)
            + [0x00, 0x00, 0x00, 0x78, 0x00, 0x04, 169, 254, 3, 4]  // TTL 120, 4 bytes of address
        let host = try DNSName("gk.local")
        let message = DNSMessage(
            isResponse: false,
            questions: [DNSQuestion(name: host, type: .any, unicastResponse: true)],
            authorities: [DNSResourceRecord(name: host, data: .a(IPv4Bytes(169, 254, 3, 4)), ttl: 120)])
        #expect(Array(message.encoded().readableBytesView) == packet)
        #expect(try Self.decode(packet) == message)
    }

    /// An announcement's SRV record with the cache-flush bit (class 0x8001), its target compressed
    /// into the instance name's data, and an NSEC whose bitmap is as short as its highest type.
    @Test func srvAndNSECEncodeByteExact() throws {
        let packet: [UInt8] =
            [0x00, 0x00, 0x84, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00]
            + label("pc") + label("local") + [0x00]  // offset 12: "pc", offset 15: "local"
            + [0x00, 0x21, 0x80, 0x01, 0x00, 0x00, 0x00, 0x78, 0x00, 0x08]  // SRV, flush|IN, 120, 8 bytes
            + [0x00, 0x00, 0x00, 0x00, 0x1F, 0x90, 0xC0, 0x0C]  // priority 0, weight 0, port 8080, target ↑
            + [0xC0, 0x0C, 0x00, 0x2F, 0x80, 0x01, 0x00, 0x00, 0x00, 0x78, 0x00, 0x08]  // NSEC, 8 bytes
            + [0xC0, 0x0C, 0x00, 0x04, 0x40, 0x00, 0x00, 0x08]  // next ↑, window 0, 4 bytes: A (1), AAAA (28)
        let host = try DNSName("pc.local")
        let message = DNSMessage(
            isResponse: true,
            answers: [
                DNSResourceRecord(
                    name: host, data: .srv(priority: 0, weight: 0, port: 8080, target: host), ttl: 120,
                    cacheFlush: true),
                DNSResourceRecord(name: host, data: .nsec(next: host, types: [.aaaa, .a]), ttl: 120, cacheFlush: true),
            ])
        #expect(Array(message.encoded().readableBytesView) == packet)
        #expect(try Self.decode(packet) == message)
    }

    @Test func namesInsideRecordDataDecompressThroughEarlierData() throws {
        // The SRV record's owner and target point into the PTR record's data: "box" at offset
        // 34, then a pointer to the owner's "local" at 17.
        let packet: [UInt8] =
            [0x00, 0x00, 0x84, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00]
            + label("_svc") + label("local") + [0x00]  // offset 12; "local" at 17
            + [0x00, 0x0C, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0A, 0x00, 0x06]  // PTR, 10 s, 6 bytes
            + label("box") + [0xC0, 0x11]  // offset 34: box → local (17)
            + [0xC0, 0x22, 0x00, 0x21, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0A, 0x00, 0x08]  // box._svc.local SRV
            + [0x00, 0x01, 0x00, 0x02, 0x00, 0x03, 0xC0, 0x22]  // 1, 2, port 3, target box.local
        let decoded = try Self.decode(packet)
        #expect(decoded.answers[0].data == .ptr(try DNSName("box.local")))
        #expect(decoded.answers[1].name == (try DNSName("box.local")))
        #expect(decoded.answers[1].data == .srv(priority: 1, weight: 2, port: 3, target: try DNSName("box.local")))
    }

    // MARK: - TXT, NSEC and uncompressed data

    @Test func emptyTextRecordIsExactlyOneZeroByte() throws {
        #expect(DNSRecordData.txt([]).uncompressedBytes == [0])
        #expect(DNSRecordData.txt([[]]).uncompressedBytes == [0])
        let record = DNSResourceRecord(name: try DNSName("a.local"), data: .txt([]), ttl: 1)
        let bytes = Array(DNSMessage(isResponse: true, answers: [record]).encoded().readableBytesView)
        #expect(bytes.suffix(3) == [0x00, 0x01, 0x00])  // data length 1, one empty string
        // No data, one empty string: both the canonical empty TXT. Two empty strings are kept.
        #expect(try Self.decodeRecordData(type: .txt, []) == .txt([]))
        #expect(try Self.decodeRecordData(type: .txt, [0]) == .txt([]))
        #expect(try Self.decodeRecordData(type: .txt, [0, 0]) == .txt([[], []]))
        #expect(try Self.decodeRecordData(type: .txt, [1, 65, 0, 1, 66]) == .txt([[65], [], [66]]))
    }

    @Test func textStringsLongerThan255BytesAreCut() {
        let data = DNSRecordData.txt([[UInt8](repeating: 7, count: 300)])
        #expect(data.uncompressedBytes == [255] + [UInt8](repeating: 7, count: 255))
        #expect(data.uncompressedLength == 256)
    }

    @Test func nsecKeepsOnlyWindowZeroAndEncodesNoWindowForNoTypes() throws {
        #expect(DNSRecordData.typeBitmap([]) == [])
        #expect(DNSRecordData.typeBitmap([DNSRecordType(rawValue: 300)]) == [])
        #expect(DNSRecordData.typeBitmap([.a]) == [0, 1, 0x40])
        #expect(DNSRecordData.typeBitmap([.nsec, DNSRecordType(rawValue: 255)]).count == 2 + 32)
        // Window 1 (types 256–511) is parsed and dropped; the name alone means no types.
        let name: [UInt8] = label("x") + [0]
        let twoWindows = name + [0, 1, 0x40, 1, 2, 0xFF, 0xFF]
        #expect(try Self.decodeRecordData(type: .nsec, twoWindows) == .nsec(next: try DNSName("x"), types: [.a]))
        #expect(try Self.decodeRecordData(type: .nsec, name) == .nsec(next: try DNSName("x"), types: []))
    }

    @Test func uncompressedBytesSpellNamesInFullAsGiven() throws {
        let target = try DNSName("My-PC.local")
        let srv = DNSRecordData.srv(priority: 0, weight: 0, port: 0x1234, target: target)
        #expect(srv.uncompressedBytes == [0, 0, 0, 0, 0x12, 0x34] + label("My-PC") + label("local") + [0])
        #expect(DNSRecordData.a(IPv4Bytes(1, 2, 3, 4)).uncompressedBytes == [1, 2, 3, 4])
        // Every record's estimate is at least what it takes on the wire.
        for record in Self.announcement().answers {
            let alone = DNSMessage(isResponse: true, answers: [record]).encoded().readableBytes - 12
            #expect(record.encodedSizeEstimate >= alone)
            #expect(record.data.uncompressedBytes.count == record.data.uncompressedLength)
        }
    }

    // MARK: - Names

    @Test func namesParseEscapesAndCompareWithoutCase() throws {
        let name = try DNSName(#"My\.Printer\\1\065._http._tcp.local."#)
        #expect(name.labels.count == 4)
        #expect(name.labels[0] == Array(#"My.Printer\1A"#.utf8))
        #expect(name.description == #"My\.Printer\\1A._http._tcp.local."#)
        #expect(try DNSName(name.description) == name)
        #expect(try DNSName("FOO.Local") == DNSName("foo.local"))
        #expect(try DNSName("FOO.Local").hashValue == DNSName("foo.local").hashValue)
        #expect(try DNSName("foo.local") != DNSName("foo.local.x"))
        #expect(try DNSName("a.b") != DNSName(labels: [Array("a.b".utf8)]))
        #expect(try DNSName(".") == .root)
        #expect(try DNSName("") == .root)
        #expect(DNSName.root.description == ".")
        #expect(try DNSName("Host.local").isSubdomain(of: DNSName("LOCAL")))
    }

    @Test func badNamesAreRejected() {
        #expect(throws: DNSNameError.emptyLabel) { try DNSName("a..b") }
        #expect(throws: DNSNameError.emptyLabel) { try DNSName(".a") }
        #expect(throws: DNSNameError.badEscape) { try DNSName(#"a\"#) }
        #expect(throws: DNSNameError.badEscape) { try DNSName(#"a\25"#) }
        #expect(throws: DNSNameError.badEscape) { try DNSName(#"a\256"#) }
        #expect(throws: DNSNameError.labelTooLong(64)) { try DNSName(String(repeating: "x", count: 64)) }
        let long = Array(repeating: String(repeating: "x", count: 63), count: 4).joined(separator: ".")
        #expect(throws: DNSNameError.nameTooLong(257)) { try DNSName(long) }
    }

    // MARK: - Hostile inputs

    @Test func compressionPointersMustPointStrictlyBackwards() {
        // A question whose name is a pointer to itself.
        #expect(throws: DNSDecodingError.compressionPointerNotBackwards) {
            try Self.decode(Self.header(questions: 1) + [0xC0, 0x0C, 0x00, 0x01, 0x00, 0x01])
        }
        // Two names pointing at each other: the first one read points forward.
        #expect(throws: DNSDecodingError.compressionPointerNotBackwards) {
            try Self.decode(
                Self.header(questions: 2) + [0xC0, 0x12, 0x00, 0x01, 0x00, 0x01] + [0xC0, 0x0C, 0x00, 0x01, 0x00, 0x01])
        }
        // A forward pointer to a well-formed name.
        #expect(throws: DNSDecodingError.compressionPointerNotBackwards) {
            try Self.decode(
                Self.header(questions: 2) + [0xC0, 0x12, 0x00, 0x01, 0x00, 0x01] + [0x00, 0x00, 0x01, 0x00, 0x01])
        }
        // A pointer past the end of the message.
        #expect(throws: DNSDecodingError.compressionPointerNotBackwards) {
            try Self.decode(Self.header(questions: 1) + [0xFF, 0xFF, 0x00, 0x01, 0x00, 0x01])
        }
        // A pointer back into the labels of its own name: "a" then a pointer to "a" again.
        #expect(throws: DNSDecodingError.compressionPointerNotBackwards) {
            try Self.decode(Self.header(questions: 1) + label("a") + [0xC0, 0x0C, 0x00, 0x01, 0x00, 0x01])
        }
    }

    @Test func pointerChainsAreCapped() throws {
        // A record whose opaque data is the root label then pointers, each to the one before;
        // a second record's owner enters the chain at its end.
        func chain(_ pointers: Int) -> [UInt8] {
            var data: [UInt8] = [0x00]  // at offset 23
            for index in 0..<pointers {
                let target = index == 0 ? 23 : 24 + 2 * (index - 1)
                data += [0xC0 | UInt8(target >> 8), UInt8(target & 0xFF)]
            }
            let last = 24 + 2 * (pointers - 1)
            return Self.header(answers: 2) + [0x00, 0x00, 0x63, 0x00, 0x01, 0, 0, 0, 0]
                + [UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
                + [0xC0 | UInt8(last >> 8), UInt8(last & 0xFF), 0x00, 0x01, 0x00, 0x01, 0, 0, 0, 0]
                + [0x00, 0x04, 1, 2, 3, 4]
        }
        #expect(try Self.decode(chain(DNSMessageReader.maximumPointerJumps - 1)).answers[1].name == .root)
        #expect(throws: DNSDecodingError.tooManyCompressionPointers) {
            try Self.decode(chain(DNSMessageReader.maximumPointerJumps))
        }
    }

    @Test func reservedLabelTypesAndLongLabelsAreRejected() {
        for first: UInt8 in [0x40, 0x80, 0xBF] {
            #expect(throws: DNSDecodingError.reservedLabelType) {
                _ = try Self.decode(
                    Self.header(questions: 1) + [first] + [UInt8](repeating: 0x61, count: 70) + [0, 0, 1, 0, 1])
            }
        }
    }

    @Test func namesOver255BytesThroughPointersAreRejected() throws {
        // Each question adds a 63-byte label in front of the previous question's name.
        var packet = Self.header(questions: 4) + label(String(repeating: "a", count: 63)) + [0, 0, 1, 0, 1]
        var previous = 12
        for letter in ["b", "c", "d"] {
            let start = packet.count
            packet += label(String(repeating: letter, count: 63)) + [0xC0, UInt8(previous)] + [0, 1, 0, 1]
            previous = start
        }
        let threeQuestions = Array(packet[0..<5]) + [3] + Array(packet[6..<(packet.count - 70)])
        #expect(try Self.decode(threeQuestions).questions[2].name.wireLength == 193)
        #expect(throws: DNSDecodingError.nameTooLong) { try Self.decode(packet) }
    }

    @Test func truncatedMessagesAreRejected() {
        #expect(throws: DNSDecodingError.truncatedHeader) { try Self.decode([UInt8](repeating: 0, count: 11)) }
        #expect(throws: DNSDecodingError.truncatedQuestion) {
            try Self.decode(Self.header(questions: 1) + label("hello") + [0, 0x00, 0x01])
        }
        #expect(throws: DNSDecodingError.truncatedQuestion) {
            try Self.decode(Self.header(questions: 1) + label("hello") + label("x") + [0xC0])
        }
        #expect(throws: DNSDecodingError.truncatedRecord) {
            try Self.decode(Self.header(answers: 1) + label("host") + label("local") + [0, 0, 1, 0, 1, 0, 0])
        }
        #expect(throws: DNSDecodingError.recordDataOverrun) {
            try Self.decode(Self.header(answers: 1) + [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 10, 1, 2, 3, 4])
        }
    }

    @Test func countsTheBytesCannotHoldFailBeforeAnyParsing() {
        #expect(throws: DNSDecodingError.countExceedsMessageSize) {
            try Self.decode([0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        }
        #expect(throws: DNSDecodingError.countExceedsMessageSize) { try Self.decode(Self.header(additionals: 1)) }
        // Ten bytes hold two root questions but not one record (11 bytes).
        #expect(throws: DNSDecodingError.countExceedsMessageSize) {
            try Self.decode(Self.header(answers: 1) + [UInt8](repeating: 0, count: 10))
        }
        #expect(throws: DNSDecodingError.truncatedQuestion) {
            try Self.decode(Self.header(questions: 2) + [0, 0, 1, 0, 1, 0xC0, 0x0C, 0, 1, 0])
        }
    }

    @Test func malformedRecordDataIsRejectedByType() {
        #expect(throws: DNSDecodingError.invalidAddressLength) { try Self.decodeRecordData(type: .a, [1, 2, 3, 4, 5]) }
        #expect(throws: DNSDecodingError.invalidAddressLength) { try Self.decodeRecordData(type: .aaaa, [1, 2, 3, 4]) }
        #expect(throws: DNSDecodingError.textStringOverrun) {
            try Self.decodeRecordData(type: .txt, [5, 0x61, 0x62])
        }
        #expect(throws: DNSDecodingError.truncatedServiceRecord) {
            try Self.decodeRecordData(type: .srv, [0, 0, 0, 0, 0x1F])
        }
        #expect(throws: DNSDecodingError.nameOverrunsRecordData) {
            try Self.decodeRecordData(type: .srv, [0, 0, 0, 0, 0x1F, 0x90, 3, 0x61])
        }
        #expect(throws: DNSDecodingError.nameOverrunsRecordData) {
            try Self.decodeRecordData(type: .ptr, label("abc"))  // no root label before the data ends
        }
        #expect(throws: DNSDecodingError.trailingRecordData) { try Self.decodeRecordData(type: .ptr, [0, 0]) }
        let name: [UInt8] = label("x") + [0]
        for bitmap: [UInt8] in [[0, 33] + [UInt8](repeating: 0xFF, count: 33), [0, 0], [0, 4, 0x40], [0]] {
            #expect(throws: DNSDecodingError.invalidTypeBitmap) {
                try Self.decodeRecordData(type: .nsec, name + bitmap)
            }
        }
    }

    // MARK: - Fuzzing seeds

    /// The fuzzer's seeds (Fuzz/Corpus/dns, written by Fuzz/make-dns-corpus.py with its own
    /// encoder): the realistic ones decode and round-trip, each hostile one fails as named.
    @Test func fuzzingSeedsDecodeOrFailAsTheirNamesSay() throws {
        let expected: [String: DNSDecodingError] = [
            "bad-a-length": .invalidAddressLength, "bad-counts": .countExceedsMessageSize,
            "bad-cut-short": .recordDataOverrun, "bad-mutual-pointers": .compressionPointerNotBackwards,
            "bad-name-too-long": .nameTooLong, "bad-nsec-window": .invalidTypeBitmap,
            "bad-pointer-chain": .tooManyCompressionPointers, "bad-pointer-past-end": .compressionPointerNotBackwards,
            "bad-reserved-label": .reservedLabelType, "bad-self-pointer": .compressionPointerNotBackwards,
            "bad-txt-overrun": .textStringOverrun,
        ]
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/Corpus/dns").standardized
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(names.count >= 20)
        var decoded: [String: DNSMessage] = [:]
        for name in names {
            let bytes = [UInt8](try Data(contentsOf: directory.appendingPathComponent(name)))
            if let error = expected[name] {
                #expect(throws: error, "\(name)") { try Self.decode(bytes) }
            } else {
                let message = try Self.decode(bytes)
                #expect(try DNSMessage(decoding: message.encoded()) == message, "\(name)")
                decoded[name] = message
            }
        }
        #expect(Set(expected.keys).isSubset(of: names))
        #expect(decoded["announcement"] == decoded["announcement-uncompressed"])
        let alice = try DNSName(instance: "Alice's Mac.Chess", in: DNSName("_gamekit._udp.local"))
        #expect(decoded["announcement"]?.additionals.first?.data == .nsec(next: alice, types: [.txt, .srv]))
        #expect(decoded["probe"]?.questions.allSatisfy(\.unicastResponse) == true)
        #expect(decoded["probe"]?.authorities.count == 4)
        #expect(decoded["query-known-answers"]?.isTruncated == true)
        #expect(decoded["goodbye"]?.answers.allSatisfy { $0.ttl == 0 } == true)
        #expect(decoded["txt-empty-and-unknown-type"]?.answers.map(\.data.uncompressedBytes) == [[0], [0], [1, 2, 3]])
    }

    // MARK: - Random mutations

    /// 20,000 mutations of valid messages (bit flips, interesting bytes, insertions, deletions,
    /// cuts) from a fixed xorshift seed: decoding never traps, and whatever decodes re-encodes
    /// and decodes again to an equal message.
    @Test func mutatedMessagesNeverCrashAndDecodedOnesRoundTrip() throws {
        let originals =
            [Self.announcement(), Self.queryWithKnownAnswers()].map { Array($0.encoded().readableBytesView) }
            + [Self.printerAnswer]
        var random = XorShift(seed: 0x9E37_79B9_7F4A_7C15)
        let interesting: [UInt8] = [0x00, 0x01, 0x3F, 0x40, 0x80, 0xC0, 0xC0, 0xFF]
        var decodedCount = 0
        var mismatches: [[UInt8]] = []
        for _ in 0..<20_000 {
            var bytes = originals[random.next(below: originals.count)]
            for _ in 0...random.next(below: 4) {
                let index = random.next(below: max(bytes.count, 1))
                switch random.next(below: 6) {
                case 0 where !bytes.isEmpty: bytes[index] ^= 1 << UInt8(random.next(below: 8))
                case 1 where !bytes.isEmpty: bytes[index] = interesting[random.next(below: interesting.count)]
                case 2 where !bytes.isEmpty: bytes[index] = UInt8(truncatingIfNeeded: random.next(below: 256))
                case 3: bytes.insert(UInt8(truncatingIfNeeded: random.next(below: 256)), at: min(index, bytes.count))
                case 4 where !bytes.isEmpty: bytes.remove(at: index)
                default: bytes = Array(bytes.prefix(index))
                }
            }
            guard let message = try? Self.decode(bytes) else { continue }
            decodedCount += 1
            if (try? DNSMessage(decoding: message.encoded())) != message, mismatches.count < 3 {
                mismatches.append(bytes)
            }
        }
        #expect(mismatches.isEmpty, "re-encoding changed these inputs' messages: \(mismatches)")
        #expect(decodedCount > 1_000)  // the mutations reach past the header often enough
    }

    // MARK: - Helpers

    static let linkLocal = IPv6Bytes([0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x55])!

    /// An announcement (RFC 6762 §8.3) of a service instance and its host.
    static func announcement() -> DNSMessage {
        let service = try! DNSName("_gamekit._udp.local")
        let instance = try! DNSName(instance: "Alice's Mac", in: service)
        let host = try! DNSName("alice-mac.local")
        return DNSMessage(
            isResponse: true,
            answers: [
                DNSResourceRecord(name: service, data: .ptr(instance), ttl: 4500),
                DNSResourceRecord(
                    name: instance, data: .srv(priority: 0, weight: 0, port: 5353, target: host), ttl: 120,
                    cacheFlush: true),
                DNSResourceRecord(
                    name: instance, data: .txt([Array("txtvers=1".utf8), Array("session=Chess".utf8)]), ttl: 4500,
                    cacheFlush: true),
                DNSResourceRecord(name: host, data: .a(IPv4Bytes(192, 168, 0, 20)), ttl: 120, cacheFlush: true),
                DNSResourceRecord(name: host, data: .aaaa(linkLocal), ttl: 120, cacheFlush: true),
            ],
            additionals: [
                DNSResourceRecord(name: host, data: .nsec(next: host, types: [.a, .aaaa]), ttl: 120, cacheFlush: true)
            ])
    }

    /// A browse query with a known answer (RFC 6762 §7.1) and more to come (TC).
    static func queryWithKnownAnswers() -> DNSMessage {
        let service = try! DNSName("_gamekit._udp.local")
        return DNSMessage(
            isResponse: false,
            isTruncated: true,
            questions: [DNSQuestion(name: service, type: .ptr)],
            answers: [
                DNSResourceRecord(name: service, data: .ptr(try! DNSName(instance: "Bob", in: service)), ttl: 3000)
            ])
    }

    static func header(questions: UInt8 = 0, answers: UInt8 = 0, additionals: UInt8 = 0) -> [UInt8] {
        [0, 0, 0x84, 0, 0, questions, 0, answers, 0, 0, 0, additionals]
    }

    static func decode(_ bytes: [UInt8]) throws(DNSDecodingError) -> DNSMessage {
        try DNSMessage(decoding: ByteBuffer(bytes: bytes))
    }

    /// Decodes `data` as the data of one record of `type` owned by the root.
    static func decodeRecordData(type: DNSRecordType, _ data: [UInt8]) throws(DNSDecodingError) -> DNSRecordData {
        let fixed: [UInt8] = [0, UInt8(type.rawValue >> 8), UInt8(type.rawValue & 0xFF), 0, 1, 0, 0, 0, 0]
        let packet = header(answers: 1) + fixed + [UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
        return try decode(packet).answers[0].data
    }
}

/// A label in wire form: its length, then its bytes.
private func label(_ text: String) -> [UInt8] {
    [UInt8(text.utf8.count)] + Array(text.utf8)
}

/// Marsaglia's xorshift64: a fixed sequence from a fixed seed, so a failure reproduces.
private struct XorShift {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }

    mutating func next(below bound: Int) -> Int {
        self.state ^= self.state << 13
        self.state ^= self.state >> 7
        self.state ^= self.state << 17
        return Int(self.state % UInt64(bound))
    }
}
