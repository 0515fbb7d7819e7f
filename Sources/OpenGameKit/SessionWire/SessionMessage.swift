import NIOCore

/// A message on an established session link: the first byte is its type (docs/PROTOCOL.md §13.4).
///
/// Application data carries no more than that one byte of overhead. The server of a session
/// tells its clients who else is connected (`roster`, `joined`, `left`) and forwards data between
/// them (`relay` from a client, `relayed` to the destination), which is how a client reaches the
/// server's other peers (`.stateConnectedRelay`). `drop` asks every member to disconnect a peer
/// (`disconnectPeer(fromAllPeers:)`). The `channel` kinds carry the library's own traffic
/// (``SessionChannel``) the same ways, apart from the application's data.
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
    /// Data for one of the library's own channels (``SessionChannel``, not 0), which the
    /// application's data handler never sees: group voice, for one.
    case channel(UInt8, ByteBuffer)
    /// Client → server: forward channel data to these peers.
    case channelRelay(to: [UInt32], channel: UInt8, data: ByteBuffer)
    /// Server → client: channel data another peer sent through the server.
    case channelRelayed(from: UInt32, channel: UInt8, data: ByteBuffer)

    enum Kind: UInt8 {
        case data = 0, roster = 1, joined = 2, left = 3, relay = 4, relayed = 5, drop = 6
        case channel = 7, channelRelay = 8, channelRelayed = 9
    }

    /// `data` on a channel: the application's (0) as `.data`, the library's as `.channel`.
    static func carrying(_ data: ByteBuffer, channel: UInt8) -> SessionMessage {
        channel == SessionChannel.application ? .data(data) : .channel(channel, data)
    }

    /// A client's request that the server forward `data` on a channel.
    static func relaying(_ data: ByteBuffer, to peers: [UInt32], channel: UInt8) -> SessionMessage {
        channel == SessionChannel.application ? .relay(to: peers, data: data) : .channelRelay(to: peers, channel: channel, data: data)
    }

    /// What a server forwards to a client: `data` from `source` on a channel.
    static func relayed(_ data: ByteBuffer, from source: UInt32, channel: UInt8) -> SessionMessage {
        channel == SessionChannel.application ? .relayed(from: source, data: data) : .channelRelayed(from: source, channel: channel, data: data)
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
            Self.write(destinations, into: &buffer)
            buffer.writeImmutableBuffer(payload)
        case .relayed(let source, let payload):
            buffer.writeInteger(Kind.relayed.rawValue)
            buffer.writeInteger(source)
            buffer.writeImmutableBuffer(payload)
        case .drop(let peerID):
            buffer.writeInteger(Kind.drop.rawValue)
            buffer.writeInteger(peerID)
        case .channel(let channel, let payload):
            buffer.writeInteger(Kind.channel.rawValue)
            buffer.writeInteger(channel)
            buffer.writeImmutableBuffer(payload)
        case .channelRelay(let destinations, let channel, let payload):
            buffer.writeInteger(Kind.channelRelay.rawValue)
            buffer.writeInteger(channel)
            Self.write(destinations, into: &buffer)
            buffer.writeImmutableBuffer(payload)
        case .channelRelayed(let source, let channel, let payload):
            buffer.writeInteger(Kind.channelRelayed.rawValue)
            buffer.writeInteger(channel)
            buffer.writeInteger(source)
            buffer.writeImmutableBuffer(payload)
        }
    }

    private static func write(_ destinations: [UInt32], into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt16(destinations.count))
        for destination in destinations { buffer.writeInteger(destination) }
    }

    private static func readDestinations(from buffer: inout ByteBuffer) throws(SessionWireError) -> [UInt32] {
        guard let count = buffer.readInteger(as: UInt16.self) else { throw .truncated }
        guard Int(count) <= Self.maximumPeers else { throw .tooManyPeers(Int(count)) }
        guard buffer.readableBytes >= Int(count) * 4 else { throw .truncated }
        var destinations: [UInt32] = []
        for _ in 0..<count { destinations.append(buffer.readInteger(as: UInt32.self)!) }
        return destinations
    }

    /// A library channel's number: present and not the application's.
    private static func readChannel(from buffer: inout ByteBuffer) throws(SessionWireError) -> UInt8 {
        guard let channel = buffer.readInteger(as: UInt8.self) else { throw .truncated }
        guard channel != SessionChannel.application else { throw .invalidChannel }
        return channel
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
            return .relay(to: try Self.readDestinations(from: &buffer), data: buffer)
        case .relayed:
            guard let source = buffer.readInteger(as: UInt32.self) else { throw .truncated }
            return .relayed(from: source, data: buffer)
        case .drop:
            guard let peerID = buffer.readInteger(as: UInt32.self) else { throw .truncated }
            return .drop(peerID: peerID)
        case .channel:
            return .channel(try Self.readChannel(from: &buffer), buffer)
        case .channelRelay:
            let channel = try Self.readChannel(from: &buffer)
            return .channelRelay(to: try Self.readDestinations(from: &buffer), channel: channel, data: buffer)
        case .channelRelayed:
            let channel = try Self.readChannel(from: &buffer)
            guard let source = buffer.readInteger(as: UInt32.self) else { throw .truncated }
            return .channelRelayed(from: source, channel: channel, data: buffer)
        }
    }
}

/// The channels of a session's links: the application's data, and the library's own traffic
/// (which the application's data handler never sees).
package enum SessionChannel {
    /// The application's data (`send(_:toPeers:with:)`).
    package static let application: UInt8 = 0
    /// Group voice (OpenGameKitVoice's `GKVoiceGroupChat`).
    package static let groupVoice: UInt8 = 1
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
