/// Simultaneous probe tie-breaking (RFC 6762 §8.2).
///
/// Each side's proposed records for the contested name are sorted; records compare by class
/// (cache-flush bit cleared), then type, then rdata as raw uncompressed bytes, and the sets
/// compare record by record, a set that runs out first being the earlier. The later set wins.
enum ProbeTieBreak {
    enum Outcome: Equatable { case oursWins, theirsWins, tie }

    static func compare(ours: [DNSResourceRecord], theirs: [DNSResourceRecord]) -> Outcome {
        let a = ours.map(key).sorted(by: lexicographicallyPrecedes)
        let b = theirs.map(key).sorted(by: lexicographicallyPrecedes)
        for (x, y) in zip(a, b) where x != y {
            return lexicographicallyPrecedes(x, y) ? .theirsWins : .oursWins
        }
        if a.count == b.count { return .tie }
        return a.count < b.count ? .theirsWins : .oursWins
    }

    /// Class and type as big-endian bytes, then the rdata.
    private static func key(_ record: DNSResourceRecord) -> [UInt8] {
        let recordClass = record.recordClass & 0x7FFF
        let type = record.type.rawValue
        return [UInt8(recordClass >> 8), UInt8(recordClass & 0xFF), UInt8(type >> 8), UInt8(type & 0xFF)] + record.data.uncompressedBytes
    }

    private static func lexicographicallyPrecedes(_ x: [UInt8], _ y: [UInt8]) -> Bool {
        x.lexicographicallyPrecedes(y)
    }
}
