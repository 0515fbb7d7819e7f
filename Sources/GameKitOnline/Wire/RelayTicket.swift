import Crypto
import Foundation
import NIOCore

/// Permission to use a relay, signed by the rendezvous (PROTOCOL §18.5): which room and member it
/// is for, until when, how many bytes, and the key its holder signs allocations with. A relay
/// checks the signature against the rendezvous's public key and needs no database.
public struct RelayTicket: Equatable, Sendable {
    /// The ticket format's version (its first byte).
    public static let version: UInt8 = 1
    static let signatureSize = 64
    /// Bytes before the signature.
    static let bodySize = 1 + 8 + 4 + 8 + 8 + 32
    /// Bytes of a signed ticket.
    public static let size = bodySize + signatureSize
    static let context = Array("OpenGameKit relay ticket v1".utf8)

    /// The room it admits to.
    public var room: RoomHandle
    /// The member it admits.
    public var peerID: UInt32
    /// Milliseconds since 1970 when the ticket stops admitting.
    public var expiresAt: UInt64
    /// Bytes its holder may send through the relay.
    public var byteLimit: UInt64
    /// The holder's Ed25519 public key (raw, 32 bytes).
    public var holderKey: [UInt8]

    /// An unsigned ticket.
    public init(room: RoomHandle, peerID: UInt32, expiresAt: UInt64, byteLimit: UInt64, holderKey: [UInt8]) {
        self.room = room
        self.peerID = peerID
        self.expiresAt = expiresAt
        self.byteLimit = byteLimit
        self.holderKey = holderKey
    }

    private var body: [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeInteger(Self.version)
        buffer.writeInteger(self.room.rawValue)
        buffer.writeInteger(self.peerID)
        buffer.writeInteger(self.expiresAt)
        buffer.writeInteger(self.byteLimit)
        buffer.writeBytes(self.holderKey)
        return Array(buffer.readableBytesView)
    }

    /// The ticket and the issuer's signature over it.
    public func signed(by key: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        let body = self.body
        let signature = try key.signature(for: Self.context + body)
        return body + Array(signature)
    }

    /// Why a ticket was not accepted.
    public enum Rejection: Error, Equatable, Sendable {
        case malformed
        case forged
        case expired
    }

    /// Reads a signed ticket and checks its signature against any of `issuers` and its expiry.
    public static func verify(_ bytes: [UInt8], issuers: [Curve25519.Signing.PublicKey], nowMilliseconds: UInt64) throws(Rejection) -> RelayTicket {
        guard bytes.count == Self.size, bytes[0] == Self.version else { throw .malformed }
        let body = Array(bytes[..<Self.bodySize])
        let signature = bytes[Self.bodySize...]
        guard issuers.contains(where: { $0.isValidSignature(signature, for: Self.context + body) }) else { throw .forged }
        var buffer = ByteBuffer(bytes: body)
        buffer.moveReaderIndex(forwardBy: 1)
        let ticket = RelayTicket(
            room: RoomHandle(rawValue: buffer.readInteger()!), peerID: buffer.readInteger()!, expiresAt: buffer.readInteger()!,
            byteLimit: buffer.readInteger()!, holderKey: buffer.readBytes(length: 32)!)
        guard ticket.expiresAt > nowMilliseconds else { throw .expired }
        return ticket
    }
}

/// Relay messages (PROTOCOL §18.5): allocation (type 14) and carried datagrams (type 15).
public enum RelayMessage: Equatable, Sendable {
    /// "Relay for me": a signed ticket, the time, and the holder's signature over both, so that
    /// a copied allocation cannot move the ticket to another address later.
    case allocate(timestampMilliseconds: UInt64, ticket: [UInt8], signature: [UInt8])
    /// The relay carries for the sender until `expiresInSeconds`, with `bytesLeft`.
    case allocated(expiresInSeconds: UInt32, bytesLeft: UInt64)
    case refused(Refusal)
    /// A transport datagram: to `peer` from a client, from `peer` to a client.
    case data(peer: UInt32, payload: ByteBuffer)

    /// Why a relay refused an allocation.
    public enum Refusal: UInt8, Sendable, Equatable {
        case badTicket = 1
        case expired = 2
        case exhausted = 3
        case staleRequest = 4
    }

    enum Kind: UInt8 {
        case allocate = 1, allocated, refused
    }

    static let allocationContext = Array("OpenGameKit relay allocate v1".utf8)
    /// Bytes in front of a carried datagram.
    public static let dataHeaderSize = 6

    /// The bytes an allocation's signature covers.
    static func allocationSigned(timestamp: UInt64, ticket: [UInt8]) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeInteger(timestamp)
        buffer.writeBytes(ticket)
        return allocationContext + Array(buffer.readableBytesView)
    }

    /// An allocation signed with the holder's key.
    public static func allocation(ticket: [UInt8], timestampMilliseconds: UInt64, holder: Curve25519.Signing.PrivateKey) throws -> RelayMessage {
        let signature = try holder.signature(for: Self.allocationSigned(timestamp: timestampMilliseconds, ticket: ticket))
        return .allocate(timestampMilliseconds: timestampMilliseconds, ticket: ticket, signature: Array(signature))
    }

    /// Whether an allocation's signature is the ticket holder's.
    public static func isSignedByHolder(_ ticket: RelayTicket, timestamp: UInt64, ticketBytes: [UInt8], signature: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: ticket.holderKey) else { return false }
        return key.isValidSignature(signature, for: Self.allocationSigned(timestamp: timestamp, ticket: ticketBytes))
    }

    /// Appends the message's bytes.
    public func encode(into buffer: inout ByteBuffer) {
        switch self {
        case .allocate(let timestamp, let ticket, let signature):
            buffer.writeInteger(OnlinePacketType.relayControl.rawValue)
            buffer.writeInteger(Kind.allocate.rawValue)
            buffer.writeInteger(timestamp)
            buffer.writeInteger(UInt16(ticket.count))
            buffer.writeBytes(ticket)
            buffer.writeBytes(signature)
        case .allocated(let expires, let bytesLeft):
            buffer.writeInteger(OnlinePacketType.relayControl.rawValue)
            buffer.writeInteger(Kind.allocated.rawValue)
            buffer.writeInteger(expires)
            buffer.writeInteger(bytesLeft)
        case .refused(let reason):
            buffer.writeInteger(OnlinePacketType.relayControl.rawValue)
            buffer.writeInteger(Kind.refused.rawValue)
            buffer.writeInteger(reason.rawValue)
        case .data(let peer, let payload):
            Self.writeDataHeader(peer: peer, into: &buffer)
            buffer.writeImmutableBuffer(payload)
        }
    }

    /// The header of a carried datagram.
    public static func writeDataHeader(peer: UInt32, into buffer: inout ByteBuffer) {
        buffer.writeInteger(OnlinePacketType.relayData.rawValue)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(peer)
    }

    /// The message's bytes.
    public var encoded: ByteBuffer {
        var buffer = ByteBuffer()
        self.encode(into: &buffer)
        return buffer
    }

    /// Reads one whole datagram of type 14 or 15.
    public static func decode(_ datagram: ByteBuffer) throws(OnlineDecodingError) -> RelayMessage {
        var buffer = datagram
        let type: UInt8 = try buffer.readValue()
        if type == OnlinePacketType.relayData.rawValue {
            let flags: UInt8 = try buffer.readValue()
            guard flags == 0 else { throw .invalidValue("flags") }
            let peer: UInt32 = try buffer.readValue()
            return .data(peer: peer, payload: buffer)
        }
        guard type == OnlinePacketType.relayControl.rawValue else { throw .invalidValue("type") }
        let kindByte: UInt8 = try buffer.readValue()
        guard let kind = Kind(rawValue: kindByte) else { throw .unknownKind(kindByte) }
        let message: RelayMessage
        switch kind {
        case .allocate:
            let timestamp: UInt64 = try buffer.readValue()
            let length: UInt16 = try buffer.readValue()
            guard length <= RendezvousMessage.maximumTicket else { throw .tooLarge }
            let ticket = try buffer.readExactly(Int(length))
            message = .allocate(timestampMilliseconds: timestamp, ticket: ticket, signature: try buffer.readExactly(RelayTicket.signatureSize))
        case .allocated:
            let expires: UInt32 = try buffer.readValue()
            message = .allocated(expiresInSeconds: expires, bytesLeft: try buffer.readValue())
        case .refused:
            let byte: UInt8 = try buffer.readValue()
            guard let reason = Refusal(rawValue: byte) else { throw .invalidValue("refusal \(byte)") }
            message = .refused(reason)
        }
        guard buffer.readableBytes == 0 else { throw .invalidValue("trailing bytes") }
        return message
    }
}
