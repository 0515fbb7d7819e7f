import GameKitTraversal
import NIOCore

/// First bytes of the online layer's datagrams, inside the range RFC 7983 leaves unassigned
/// (the transport has 4…12, STUN 0…3): PROTOCOL §18.1.
public enum OnlinePacketType: UInt8, Sendable {
    /// Rendezvous requests and answers (§18.3).
    case rendezvous = 13
    /// Relay allocation (§18.5).
    case relayControl = 14
    /// A transport datagram carried by the relay (§18.5).
    case relayData = 15

    /// Whether a datagram starting with `byte` belongs to STUN (RFC 7983: 0…3).
    public static func isSTUN(firstByte byte: UInt8) -> Bool { byte <= 3 }
}

/// Why a datagram of the online layer could not be read.
public enum OnlineDecodingError: Error, Equatable, Sendable {
    case truncated
    case unknownKind(UInt8)
    case invalidValue(String)
    case tooLarge
}

/// One end-point address in a message: family (4 or 6, or 0 for none), address, port.
enum WireAddress {
    static func write(_ address: SocketAddress?, into buffer: inout ByteBuffer) {
        switch address {
        case .v4(let v4)?:
            buffer.writeInteger(UInt8(4))
            _ = withUnsafeBytes(of: v4.address.sin_addr) { buffer.writeBytes($0) }
            buffer.writeInteger(UInt16(address!.port ?? 0))
        case .v6(let v6)?:
            buffer.writeInteger(UInt8(6))
            _ = withUnsafeBytes(of: v6.address.sin6_addr) { buffer.writeBytes($0) }
            buffer.writeInteger(UInt16(address!.port ?? 0))
        default:
            buffer.writeInteger(UInt8(0))
        }
    }

    static func read(from buffer: inout ByteBuffer) throws(OnlineDecodingError) -> SocketAddress? {
        guard let family = buffer.readInteger(as: UInt8.self) else { throw .truncated }
        let size: Int
        switch family {
        case 0: return nil
        case 4: size = 4
        case 6: size = 16
        default: throw .invalidValue("address family \(family)")
        }
        guard let bytes = buffer.readBytes(length: size), let port = buffer.readInteger(as: UInt16.self) else { throw .truncated }
        return try SocketAddress.packed(bytes, port: port)
    }
}

extension SocketAddress {
    /// The address with these 4 or 16 bytes and `port`.
    static func packed(_ bytes: [UInt8], port: UInt16) throws(OnlineDecodingError) -> SocketAddress {
        do {
            return try SocketAddress(packedIPAddress: ByteBuffer(bytes: bytes), port: Int(port))
        } catch {
            throw .invalidValue("address")
        }
    }

    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a dual-stack socket reports IPv4
    /// senders) as the IPv4 address it maps; any other address as it is.
    public var unmappingIPv4: SocketAddress {
        guard case .v6 = self, let address = TraversalAddress(self), address.isIPv4 else { return self }
        return address.socketAddress
    }

    /// The address's bytes (4 or 16), or nil for a Unix socket.
    var packedBytes: [UInt8]? {
        switch self {
        case .v4(let v4): return withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
        case .v6(let v6): return withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        default: return nil
        }
    }
}

extension ByteBuffer {
    /// Reads a length-prefixed (`UInt8`) string of at most `limit` bytes of UTF-8.
    mutating func readShortText(limit: Int) throws(OnlineDecodingError) -> String {
        guard let length = self.readInteger(as: UInt8.self) else { throw .truncated }
        guard Int(length) <= limit else { throw .tooLarge }
        guard let bytes = self.readBytes(length: Int(length)) else { throw .truncated }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .invalidValue("text is not UTF-8") }
        return text
    }

    mutating func writeShortText(_ text: String, limit: Int) {
        var bytes = Array(text.utf8.prefix(limit))
        // Never cut a character in two.
        while String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
        self.writeInteger(UInt8(bytes.count))
        self.writeBytes(bytes)
    }

    mutating func readExactly(_ length: Int) throws(OnlineDecodingError) -> [UInt8] {
        guard let bytes = self.readBytes(length: length) else { throw .truncated }
        return bytes
    }

    mutating func readValue<T: FixedWidthInteger>(_ type: T.Type = T.self) throws(OnlineDecodingError) -> T {
        guard let value = self.readInteger(as: T.self) else { throw .truncated }
        return value
    }
}
