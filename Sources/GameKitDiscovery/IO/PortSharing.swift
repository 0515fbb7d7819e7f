import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether another mDNS stack on this host (Avahi, another process of ours, a capture) has a
/// socket on the mDNS port: RFC 6762 §15.1 says a unicast reply reaches only one of the sockets
/// bound to a shared port, so a querier that shares it must not ask for one (no QU questions).
///
/// Linux lists every UDP socket of the network namespace in `/proc/net/udp` and `/proc/net/udp6`;
/// the sockets on the port, less the ones this process opened (``MulticastSocket`` counts them),
/// are someone else's. A socket being opened while the files are read can make the port look
/// shared for one check, which only costs a multicast reply.
enum PortSharing {
    /// Sockets this process has open on the mDNS port.
    private static let own = NIOLockedValueBox(0)

    static func opened() { self.own.withLockedValue { $0 += 1 } }
    static func closed() { self.own.withLockedValue { $0 -= 1 } }

    /// Whether a socket not of this process is bound to `port`; false when /proc cannot be read
    /// (not Linux, or no procfs), the case RFC 6762 leaves to the implementation.
    static func isShared(port: Int) -> Bool {
        let tables = ["/proc/net/udp", "/proc/net/udp6"].compactMap(Self.read)
        guard !tables.isEmpty else { return false }
        let bound = tables.reduce(0) { $0 + Self.socketCount(inTable: $1, port: port) }
        return bound > self.own.withLockedValue { $0 }
    }

    /// The number of sockets whose local port is `port` in a `/proc/net/udp{,6}` table.
    static func socketCount(inTable table: String, port: Int) -> Int {
        var count = 0
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 1, let colon = fields[1].lastIndex(of: ":"),
                let local = Int(fields[1][fields[1].index(after: colon)...], radix: 16)
            else { continue }
            if local == port { count += 1 }
        }
        return count
    }

    private static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk.prefix(count)
            if bytes.count > 16 << 20 { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
