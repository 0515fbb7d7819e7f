import NIOCore

/// A message on an established session link: the first byte is its type (docs/PROTOCOL.md §13.4).
///
/// Application data carries no more than that one byte of overhead. The server of a session
/// tells its clients who else is connected (`roster`, `joined`, `left`) and forwards data between
/// them (`relay` from a client, `relayed` to the destination), which is how a client reaches the
/// server's other peers (`.stateConnectedRelay`). `drop` asks every member to disconnect a peer
/// (`disconnectPeer(fromAllPeers:)`).
enum SessionMessage: Equatable, Sendable {
    /// Application data for the receiver.
    case data(ByteBuffer)
    /// Server → client: every other peer the server is connected to, on connecting.
    case roster([SessionPeerEntry])
    /// Server → clients: a peer connected to the server.
    case joined(SessionPeerEntry)
    /// Server → clients: a peer disconnected from the server.
    case left(peerID: UInt32)
    /// Client → server: forward `data` to these peers (reliable or not, as this message went).
    case relay(to: [UInt32], data: ByteBuffer)
    /// Server → client: data another peer sent through the server.
    case relayed(from: UInt32, data: ByteBuffer)
    /// Any member → every member: disconnect this peer (the peer itself disconnects from all).
    case drop(peerID: UInt32)

    enum Kind: UInt8 {
        case data = 0, roster = 1, joined = 2, left = 3, relay = 4, relayed = 5, drop = 6
    }

    /// The most peers a roster or relay lists (bounds what a peer can make us allocate).
    static let maximumPeers = 1024

    func encode() -> ByteBuffer {
        var buffer = ByteBuffer()
        self.encode(into: &buffer)
        return buffer
    }

    /// `.data(payload)` encoded, without copying the payload when the byte just before it in its
    /// buffer is already the data kind (``dataPayload(copying:)`` leaves it there): the encoding
    /// is then that byte and the payload, as they lie.
    static func encodedData(_ payload: ByteBuffer) -> ByteBuffer {
        if payload.readerIndex >= 1 {
            // Moved back first: ByteBuffer reads only readable bytes.
            var framed = payload
            framed.moveReaderIndex(to: payload.readerIndex - 1)
            if framed.getInteger(at: framed.readerIndex, as: UInt8.self) == Kind.data.rawValue { return framed }
        }
        return SessionMessage.data(payload).encode()
    }

    /// The application's bytes as a payload for ``encodedData(_:)``: one copy, with the data
    /// kind written just before them, so that encoding the message copies nothing more.
    static func dataPayload(copying bytes: some Collection<UInt8>) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(bytes.count + 1)
        buffer.writeInteger(Kind.data.rawValue)
        buffer.writeBytes(bytes)
        buffer.moveReaderIndex(forwardBy: 1)
        return buffer
    }

    func encode(into buffer: inout ByteBuffer) {
        switch self {
        case .data(let payload):
            buffer.writeInteger(Kind.data.rawValue)
            buffer.writeImmutableBuffer(payload)
        case .roster(let peers):
            buffer.writeInteger(Kind.roster.rawValue)
            buffer.writeInteger(UInt16(peers.count))
            for peer in peers { peer.encode(into: &buffer) }
        case .joined(let peer):
            buffer.writeInteger(Kind.joined.rawValue)
            peer.encode(into: &buffer)
        case .left(let peerID):
            buffer.writeInteger(Kind.left.rawValue)
            buffer.writeInteger(peerID)
        case .relay(let destinations, let payload):
            buffer.writeInteger(Kind.relay.rawValue)
            buffer.writeInteger(UInt16(destinations.count))
            for destination in destinations { buffer.writeInteger(destination) }
            buffer.writeImmutableBuffer(payload)
        case .relayed(let source, let payload):
            buffer.writeInteger(Kind.relayed.rawValue)
            buffer.writeInteger(source)
            buffer.writeImmutableBuffer(payload)
        case .drop(let peerID):
            buffer.writeInteger(Kind.drop.rawValue)
            buffer.writeInteger(peerID)
        }
    }

    static func decode(_ buffer: ByteBuffer) throws(SessionWireError) -> SessionMessage {
        var buffer = buffer
        guard let raw = buffer.readInteger(as: UInt8.self) else { throw .truncated }
        guard let kind = Kind(rawValue: raw) else { throw .unknownType(raw) }
        switch kind {
        case .data:
            return .data(buffer)
        case .roster:
            guard let count = buffer.readInteger(as: UInt16.self) else { throw .truncated }
            guard Int(count) <= Self.maximumPeers else { throw .tooManyPeers(Int(count)) }
            var peers: [SessionPeerEntry] = []
            for _ in 0..<count { peers.append(try SessionPeerEntry.decode(from: &buffer)) }
            return .roster(peers)
        case .joined:
            return .joined(try SessionPeerEntry.decode(from: &buffer))
        case .left:
            guard let peerID = buffer.readInteger(as: UInt32.self) else { throw .truncated }
            return .left(peerID: peerID)
        case .relay:
            guard let count = buffer.readInteger(as: UInt16.self) else { throw .truncated }
            guard Int(count) <= Self.maximumPeers else { throw .tooManyPeers(Int(count)) }
            guard buffer.readableBytes >= Int(count) * 4 else { throw .truncated }
            var destinations: [UInt32] = []
            for _ in 0..<count { destinations.append(buffer.readInteger(as: UInt32.self)!) }
            return .relay(to: destinations, data: buffer)
        case .relayed:
            guard let source = buffer.readInteger(as: UInt32.self) else { throw .truncated }
            return .relayed(from: source, data: buffer)
        case .drop:
            guard let peerID = buffer.readInteger(as: UInt32.self) else { throw .truncated }
            return .drop(peerID: peerID)
        }
    }
}

/// A peer as the server describes it to its clients.
struct SessionPeerEntry: Equatable, Sendable {
    var peerID: UInt32
    var displayName: String

    func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(self.peerID)
        SessionWireText.write(self.displayName, into: &buffer)
    }

    static func decode(from buffer: inout ByteBuffer) throws(SessionWireError) -> SessionPeerEntry {
        guard let peerID = buffer.readInteger(as: UInt32.self) else { throw .truncated }
        return SessionPeerEntry(peerID: peerID, displayName: try SessionWireText.read(from: &buffer))
    }
}
