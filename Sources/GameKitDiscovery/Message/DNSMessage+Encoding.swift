import NIOCore

extension DNSMessage {
    /// Appends the message in wire form to `buffer`, compressing repeated names (RFC 1035
    /// §4.1.4) in owner names, question names, and the names inside PTR, SRV and NSEC data
    /// (RFC 6762 §18.14). Compression matches names without regard to case, so a later spelling
    /// of a name may be sent as a pointer to an earlier spelling that differs only in case.
    ///
    /// The opcode and response code are sent in their low four bits; the other header bits
    /// (RD, RA, Z, AD, CD) are zero. A TXT string longer than 255 bytes is cut to 255.
    ///
    /// - Precondition: each section holds at most 65,535 entries, and each record's data fits
    ///   in 65,535 bytes.
    public func encode(into buffer: inout ByteBuffer) {
        precondition(
            max(self.questions.count, self.answers.count, self.authorities.count, self.additionals.count)
                <= Int(UInt16.max),
            "a DNS message section holds at most 65535 entries"
        )
        var compressor = DNSNameCompressor(messageStart: buffer.writerIndex)
        var flags: UInt16 = 0
        if self.isResponse { flags |= 0x8000 }
        flags |= UInt16(self.opcode & 0x0F) << 11
        if self.isAuthoritative { flags |= 0x0400 }
        if self.isTruncated { flags |= 0x0200 }
        flags |= UInt16(self.responseCode & 0x0F)
        buffer.writeMultipleIntegers(
            self.id,
            flags,
            UInt16(self.questions.count),
            UInt16(self.answers.count),
            UInt16(self.authorities.count),
            UInt16(self.additionals.count)
        )

        for question in self.questions {
            compressor.write(question.name, into: &buffer)
            let rawClass = question.questionClass & 0x7FFF | (question.unicastResponse ? 0x8000 : 0)
            buffer.writeMultipleIntegers(question.type.rawValue, rawClass)
        }
        for record in self.answers { record.encode(into: &buffer, compressor: &compressor) }
        for record in self.authorities { record.encode(into: &buffer, compressor: &compressor) }
        for record in self.additionals { record.encode(into: &buffer, compressor: &compressor) }
    }

    /// The message in wire form, in a new buffer. See `encode(into:)`.
    public func encoded() -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: self.encodedSizeEstimate)
        self.encode(into: &buffer)
        return buffer
    }

    /// An upper bound of the encoded size (every name uncompressed).
    var encodedSizeEstimate: Int {
        var size = DNSMessageReader.headerLength
        for question in self.questions { size += question.name.wireLength + 4 }
        for record in self.answers { size += record.encodedSizeEstimate }
        for record in self.authorities { size += record.encodedSizeEstimate }
        for record in self.additionals { size += record.encodedSizeEstimate }
        return size
    }
}

extension DNSResourceRecord {
    /// An upper bound of the bytes this record takes in a message: owner name and data names
    /// uncompressed, plus type, class, TTL and data length. Callers add records to a message
    /// while the sum stays under their size limit.
    var encodedSizeEstimate: Int {
        self.name.wireLength + 10 + self.data.uncompressedLength
    }

    /// Appends the record, compressing its names through `compressor`.
    func encode(into buffer: inout ByteBuffer, compressor: inout DNSNameCompressor) {
        compressor.write(self.name, into: &buffer)
        let rawClass = self.recordClass & 0x7FFF | (self.cacheFlush ? 0x8000 : 0)
        buffer.writeMultipleIntegers(self.type.rawValue, rawClass, self.ttl)
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(UInt16(0))
        let dataStart = buffer.writerIndex
        self.data.write(into: &buffer) { name, buffer in compressor.write(name, into: &buffer) }
        let dataLength = buffer.writerIndex - dataStart
        precondition(dataLength <= Int(UInt16.max), "DNS record data longer than 65535 bytes")
        buffer.setInteger(UInt16(dataLength), at: lengthIndex)
    }
}

extension DNSRecordData {
    /// The data as it goes on the wire, but with every name uncompressed and spelled as given.
    /// RFC 6762 §8.2 breaks simultaneous-probe ties by comparing these bytes as unsigned
    /// values, lexicographically.
    var uncompressedBytes: [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: self.uncompressedLength)
        self.write(into: &buffer) { name, buffer in DNSNameCompressor.writeUncompressed(name, into: &buffer) }
        return Array(buffer.readableBytesView)
    }

    /// The length of `uncompressedBytes`, without building them.
    var uncompressedLength: Int {
        switch self {
        case .a: 4
        case .aaaa: 16
        case .ptr(let name): name.wireLength
        case .srv(_, _, _, let target): 6 + target.wireLength
        case .txt(let strings):
            Self.isEmptyText(strings) ? 1 : strings.reduce(0) { $0 + 1 + min($1.count, Self.maximumStringLength) }
        case .nsec(let next, let types): next.wireLength + Self.typeBitmap(types).count
        case .other(_, let bytes): bytes.count
        }
    }

    /// Longest TXT character string (its length is one byte).
    static let maximumStringLength = 255

    /// Whether `strings` is an empty TXT record: no strings or a single empty one, both sent as
    /// a single zero byte (RFC 6763 §6.1).
    static func isEmptyText(_ strings: [[UInt8]]) -> Bool {
        strings.isEmpty || (strings.count == 1 && strings[0].isEmpty)
    }

    /// The window 0 bitmap of an NSEC record (RFC 4034 §4.1.2): window number 0, the length of
    /// the bitmap up to the byte holding the highest type, then the bits, most significant bit
    /// first. Types of 256 and above cannot be expressed in mDNS's restricted form (RFC 6762
    /// §6.1) and are left out; with no type below 256 there is no window at all.
    static func typeBitmap(_ types: Set<DNSRecordType>) -> [UInt8] {
        let values = types.map(\.rawValue).filter { $0 < 256 }
        guard let highest = values.max() else { return [] }
        var bitmap = [UInt8](repeating: 0, count: Int(highest) / 8 + 1)
        for value in values {
            bitmap[Int(value) / 8] |= 0x80 >> (value % 8)
        }
        return [0, UInt8(bitmap.count)] + bitmap
    }

    /// Appends the data, writing each name inside it with `writeName`.
    func write(into buffer: inout ByteBuffer, writeName: (DNSName, inout ByteBuffer) -> Void) {
        switch self {
        case .a(let address):
            buffer.writeMultipleIntegers(address.bytes.0, address.bytes.1, address.bytes.2, address.bytes.3)
        case .aaaa(let address):
            buffer.writeBytes(address.array)
        case .ptr(let name):
            writeName(name, &buffer)
        case .srv(let priority, let weight, let port, let target):
            buffer.writeMultipleIntegers(priority, weight, port)
            writeName(target, &buffer)
        case .txt(let strings):
            if Self.isEmptyText(strings) {
                buffer.writeInteger(UInt8(0))
            } else {
                for string in strings {
                    let kept = string.prefix(Self.maximumStringLength)
                    buffer.writeInteger(UInt8(kept.count))
                    buffer.writeBytes(kept)
                }
            }
        case .nsec(let next, let types):
            writeName(next, &buffer)
            buffer.writeBytes(Self.typeBitmap(types))
        case .other(_, let bytes):
            buffer.writeBytes(bytes)
        }
    }
}

// MARK: - Name compression

/// Remembers where each name suffix was written in the message being encoded, so a later name
/// that ends the same way is sent as its own distinct labels plus a pointer (RFC 1035 §4.1.4).
///
/// Suffixes are keyed by `DNSName`, whose equality ignores ASCII case: the canonical
/// (lowercased) form is what is matched. Only offsets below 0x4000 fit in a pointer's 14 bits;
/// suffixes written later are not remembered.
struct DNSNameCompressor {
    /// The buffer index of the message's first byte; offsets count from it.
    let messageStart: Int
    private var offsets: [DNSName: Int] = [:]

    init(messageStart: Int) {
        self.messageStart = messageStart
    }

    /// Appends `name`, replacing its longest already written suffix with a pointer.
    mutating func write(_ name: DNSName, into buffer: inout ByteBuffer) {
        let labels = name.labels
        for index in labels.indices {
            let suffix = index == 0 ? name : DNSName(validatedLabels: Array(labels[index...]))
            if let offset = self.offsets[suffix] {
                buffer.writeInteger(UInt16(0xC000) | UInt16(offset))
                return
            }
            let offset = buffer.writerIndex - self.messageStart
            if offset < 0x4000 { self.offsets[suffix] = offset }
            buffer.writeInteger(UInt8(labels[index].count))
            buffer.writeBytes(labels[index])
        }
        buffer.writeInteger(UInt8(0))
    }

    /// Appends `name` with no compression, as given.
    static func writeUncompressed(_ name: DNSName, into buffer: inout ByteBuffer) {
        for label in name.labels {
            buffer.writeInteger(UInt8(label.count))
            buffer.writeBytes(label)
        }
        buffer.writeInteger(UInt8(0))
    }
}
