import NIOCore

/// Why a received datagram is not a DNS message this module accepts.
///
/// Every malformed input maps to exactly one case, so tests and logs can tell a truncated packet
/// from a hostile one. Bytes after the last record are not an error: they are ignored.
public enum DNSDecodingError: Error, Hashable, Sendable {
    /// Fewer than the 12 bytes of the header (RFC 1035 §4.1.1).
    case truncatedHeader
    /// A question's name, type or class runs past the end of the message.
    case truncatedQuestion
    /// A record's owner name or fixed fields (type, class, TTL, data length) run past the end of
    /// the message.
    case truncatedRecord
    /// The section counts promise more questions and records than the bytes after the header
    /// could hold even at their smallest (5 bytes a question, 11 a record).
    case countExceedsMessageSize
    /// A compression pointer that does not point strictly before the labels it continues
    /// (RFC 1035 §4.1.4 only ever points backwards): a forward pointer, a pointer to itself, or
    /// one of a pair pointing at each other.
    case compressionPointerNotBackwards
    /// More than 128 compression pointers followed in one name.
    case tooManyCompressionPointers
    /// A label whose top two bits are 01 or 10 (extended or reserved label types, RFC 6891 §5),
    /// which includes every length byte from 64 to 191.
    case reservedLabelType
    /// A name longer than 255 bytes once decompressed (RFC 1035 §2.3.4).
    case nameTooLong
    /// A record's data length runs past the end of the message.
    case recordDataOverrun
    /// An A record whose data is not 4 bytes, or an AAAA record whose data is not 16.
    case invalidAddressLength
    /// An SRV record too short for its priority, weight, port and target.
    case truncatedServiceRecord
    /// A name inside record data (PTR, SRV, NSEC) runs past the record's data length.
    case nameOverrunsRecordData
    /// PTR or SRV data that goes on after the name that should end it.
    case trailingRecordData
    /// A TXT character string whose length byte runs past the record's data.
    case textStringOverrun
    /// An NSEC type bitmap with a window of length 0 or over 32, or one running past the
    /// record's data (RFC 4034 §4.1.2).
    case invalidTypeBitmap
}

extension DNSMessage {
    /// Decodes a message from the readable bytes of `buffer` (the caller's buffer is not
    /// consumed).
    ///
    /// Opcode and response code are kept as received; mDNS callers drop messages where either is
    /// non-zero. Names may be compressed anywhere, including inside PTR, SRV and NSEC data
    /// (RFC 6762 §18.14). Bytes after the last record are ignored.
    ///
    /// - Throws: `DNSDecodingError` naming the first problem found.
    public init(decoding buffer: ByteBuffer) throws(DNSDecodingError) {
        let reader = DNSMessageReader(buffer)
        guard reader.length >= DNSMessageReader.headerLength,
            let id = reader.uint16(at: 0),
            let flags = reader.uint16(at: 2),
            let questionCount = reader.uint16(at: 4),
            let answerCount = reader.uint16(at: 6),
            let authorityCount = reader.uint16(at: 8),
            let additionalCount = reader.uint16(at: 10)
        else { throw .truncatedHeader }

        // Refuse counts the bytes cannot back before reserving anything for them.
        let recordCount = Int(answerCount) + Int(authorityCount) + Int(additionalCount)
        let smallest =
            Int(questionCount) * DNSMessageReader.smallestQuestion + recordCount * DNSMessageReader.smallestRecord
        guard smallest <= reader.length - DNSMessageReader.headerLength else { throw .countExceedsMessageSize }

        self.init(
            id: id,
            isResponse: flags & 0x8000 != 0,
            isAuthoritative: flags & 0x0400 != 0,
            isTruncated: flags & 0x0200 != 0
        )
        self.opcode = UInt8(truncatingIfNeeded: flags >> 11) & 0x0F
        self.responseCode = UInt8(truncatingIfNeeded: flags) & 0x0F

        var offset = DNSMessageReader.headerLength
        self.questions.reserveCapacity(Int(questionCount))
        for _ in 0..<questionCount {
            self.questions.append(try reader.readQuestion(at: &offset))
        }
        self.answers = try reader.readRecords(Int(answerCount), at: &offset)
        self.authorities = try reader.readRecords(Int(authorityCount), at: &offset)
        self.additionals = try reader.readRecords(Int(additionalCount), at: &offset)
    }
}

// MARK: - Reader

/// Random access to the bytes of one received message, by offset from its first byte.
///
/// Compression pointers are offsets from the start of the message, so decoding needs to jump
/// around rather than read front to back; this reader never moves the buffer's reader index and
/// answers `nil` for any byte outside the message instead of trapping.
struct DNSMessageReader {
    /// Bytes in the fixed header (RFC 1035 §4.1.1).
    static let headerLength = 12
    /// The smallest question: the root name (1 byte), type and class.
    static let smallestQuestion = 5
    /// The smallest record: the root name, type, class, TTL and data length.
    static let smallestRecord = 11
    /// Pointers followed in one name at most. Backwards-only pointers already rule out loops;
    /// this bounds the work a chain of pointers can cause.
    static let maximumPointerJumps = 128

    private let buffer: ByteBuffer
    private let base: Int
    /// The message's length in bytes.
    let length: Int

    init(_ buffer: ByteBuffer) {
        self.buffer = buffer
        self.base = buffer.readerIndex
        self.length = buffer.readableBytes
    }

    func uint8(at offset: Int) -> UInt8? {
        self.buffer.getInteger(at: self.base + offset, as: UInt8.self)
    }

    func uint16(at offset: Int) -> UInt16? {
        self.buffer.getInteger(at: self.base + offset, as: UInt16.self)
    }

    func uint32(at offset: Int) -> UInt32? {
        self.buffer.getInteger(at: self.base + offset, as: UInt32.self)
    }

    func bytes(at offset: Int, count: Int) -> [UInt8]? {
        self.buffer.getBytes(at: self.base + offset, length: count)
    }

    // MARK: Names

    /// Reads a name that starts at `start`, following compression pointers.
    ///
    /// The labels and pointer found before the first jump must lie before `limit` (the end of the
    /// message, or of the record data holding the name); after a jump they may extend to the end
    /// of the message. Every pointer must point strictly before the first byte of the labels it
    /// continues (the name's start, or the previous pointer's target), so each jump goes further
    /// back and no sequence of pointers can loop.
    ///
    /// - Parameter overrun: the error for a name that runs past its limit.
    /// - Returns: the name, and the offset just past its bytes at `start` (past the root label
    ///   or the first pointer).
    func readName(
        at start: Int,
        limit: Int,
        overrun: DNSDecodingError
    ) throws(DNSDecodingError) -> (name: DNSName, end: Int) {
        var labels: [[UInt8]] = []
        var wireLength = 1
        var position = start
        var segmentStart = start
        var limit = limit
        var end: Int?
        var jumps = 0
        while true {
            guard position < limit, let lengthByte = self.uint8(at: position) else { throw overrun }
            switch lengthByte & 0xC0 {
            case 0x00:
                let count = Int(lengthByte)
                if count == 0 {
                    return (DNSName(validatedLabels: labels), end ?? position + 1)
                }
                guard position + 1 + count <= limit, let label = self.bytes(at: position + 1, count: count) else {
                    throw overrun
                }
                wireLength += 1 + count
                guard wireLength <= DNSName.maximumWireLength else { throw .nameTooLong }
                labels.append(label)
                position += 1 + count
            case 0xC0:
                guard position + 2 <= limit, let low = self.uint8(at: position + 1) else { throw overrun }
                let target = Int(lengthByte & 0x3F) << 8 | Int(low)
                guard target < segmentStart else { throw .compressionPointerNotBackwards }
                jumps += 1
                guard jumps <= Self.maximumPointerJumps else { throw .tooManyCompressionPointers }
                if end == nil { end = position + 2 }
                position = target
                segmentStart = target
                limit = self.length
            default:
                throw .reservedLabelType
            }
        }
    }

    // MARK: Questions and records

    /// Reads the question at `offset` and moves `offset` past it.
    func readQuestion(at offset: inout Int) throws(DNSDecodingError) -> DNSQuestion {
        let (name, end) = try self.readName(at: offset, limit: self.length, overrun: .truncatedQuestion)
        guard let type = self.uint16(at: end), let rawClass = self.uint16(at: end + 2) else {
            throw .truncatedQuestion
        }
        offset = end + 4
        return DNSQuestion(
            name: name,
            type: DNSRecordType(rawValue: type),
            unicastResponse: rawClass & 0x8000 != 0,
            questionClass: rawClass & 0x7FFF
        )
    }

    /// Reads `count` records from `offset` on and moves `offset` past them. The caller has
    /// checked that `count` records could fit in the message.
    func readRecords(_ count: Int, at offset: inout Int) throws(DNSDecodingError) -> [DNSResourceRecord] {
        var records: [DNSResourceRecord] = []
        records.reserveCapacity(count)
        for _ in 0..<count {
            records.append(try self.readRecord(at: &offset))
        }
        return records
    }

    /// Reads the record at `offset` and moves `offset` past it.
    func readRecord(at offset: inout Int) throws(DNSDecodingError) -> DNSResourceRecord {
        let (name, end) = try self.readName(at: offset, limit: self.length, overrun: .truncatedRecord)
        guard let rawType = self.uint16(at: end),
            let rawClass = self.uint16(at: end + 2),
            let ttl = self.uint32(at: end + 4),
            let dataLength = self.uint16(at: end + 8)
        else { throw .truncatedRecord }
        let dataStart = end + 10
        let dataEnd = dataStart + Int(dataLength)
        guard dataEnd <= self.length else { throw .recordDataOverrun }
        let data = try self.readRecordData(type: DNSRecordType(rawValue: rawType), from: dataStart, to: dataEnd)
        offset = dataEnd
        return DNSResourceRecord(
            name: name,
            data: data,
            ttl: ttl,
            cacheFlush: rawClass & 0x8000 != 0,
            recordClass: rawClass & 0x7FFF
        )
    }

    // MARK: Record data

    /// Interprets the record data in `start..<end` (already checked to lie inside the message).
    func readRecordData(type: DNSRecordType, from start: Int, to end: Int) throws(DNSDecodingError) -> DNSRecordData {
        let count = end - start
        switch type {
        case .a:
            guard count == 4, let b = self.bytes(at: start, count: 4) else { throw .invalidAddressLength }
            return .a(IPv4Bytes(b[0], b[1], b[2], b[3]))
        case .aaaa:
            guard count == 16, let b = self.bytes(at: start, count: 16), let address = IPv6Bytes(b) else {
                throw .invalidAddressLength
            }
            return .aaaa(address)
        case .ptr:
            let (name, nameEnd) = try self.readName(at: start, limit: end, overrun: .nameOverrunsRecordData)
            guard nameEnd == end else { throw .trailingRecordData }
            return .ptr(name)
        case .srv:
            // Priority, weight and port, then a target of at least the root label.
            guard count >= 7, let priority = self.uint16(at: start), let weight = self.uint16(at: start + 2),
                let port = self.uint16(at: start + 4)
            else { throw .truncatedServiceRecord }
            let (target, nameEnd) = try self.readName(at: start + 6, limit: end, overrun: .nameOverrunsRecordData)
            guard nameEnd == end else { throw .trailingRecordData }
            return .srv(priority: priority, weight: weight, port: port, target: target)
        case .txt:
            return .txt(try self.readTextStrings(from: start, to: end))
        case .nsec:
            let (next, nameEnd) = try self.readName(at: start, limit: end, overrun: .nameOverrunsRecordData)
            return .nsec(next: next, types: try self.readTypeBitmaps(from: nameEnd, to: end))
        default:
            return .other(type: type, bytes: self.bytes(at: start, count: count) ?? [])
        }
    }

    /// TXT data: length-prefixed strings. No data, or a single empty string, is the canonical
    /// empty TXT record (RFC 6763 §6.1) and reads as no strings; otherwise every string is kept
    /// as sent, empty ones included.
    func readTextStrings(from start: Int, to end: Int) throws(DNSDecodingError) -> [[UInt8]] {
        if end - start == 0 || (end - start == 1 && self.uint8(at: start) == 0) { return [] }
        var strings: [[UInt8]] = []
        var position = start
        while position < end {
            guard let count = self.uint8(at: position).map(Int.init), position + 1 + count <= end,
                let string = self.bytes(at: position + 1, count: count)
            else { throw .textStringOverrun }
            strings.append(string)
            position += 1 + count
        }
        return strings
    }

    /// NSEC type bitmaps (RFC 4034 §4.1.2): windows of (number, length 1–32, bits). Only window 0
    /// (types below 256) is kept, as in mDNS's restricted form (RFC 6762 §6.1); other windows are
    /// checked and skipped. No bitmap at all means no types.
    func readTypeBitmaps(from start: Int, to end: Int) throws(DNSDecodingError) -> Set<DNSRecordType> {
        var types = Set<DNSRecordType>()
        var position = start
        while position < end {
            guard position + 2 <= end, let window = self.uint8(at: position),
                let count = self.uint8(at: position + 1).map(Int.init),
                (1...32).contains(count), position + 2 + count <= end
            else { throw .invalidTypeBitmap }
            if window == 0 {
                for index in 0..<count {
                    guard let bits = self.uint8(at: position + 2 + index), bits != 0 else { continue }
                    for bit in 0..<8 where bits & (0x80 >> bit) != 0 {
                        types.insert(DNSRecordType(rawValue: UInt16(index * 8 + bit)))
                    }
                }
            }
            position += 2 + count
        }
        return types
    }
}
