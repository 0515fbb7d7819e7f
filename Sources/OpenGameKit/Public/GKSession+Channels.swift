import NIOCore

/// The library's own channels on a session's links (package-internal): other modules of this
/// package (group voice) send on them alongside the application's data, which never mixes with
/// theirs (docs/PROTOCOL.md §13.4).
extension GKSession {
    /// Sends `bytes` on a library channel to some connected peers, directly or through the
    /// session's server, as application data goes: all of them get it or none does.
    package func send(_ bytes: [UInt8], onChannel channel: UInt8, toPeers peers: [UInt32], reliable: Bool) throws(GKSessionError) {
        precondition(channel != SessionChannel.application, "channel 0 is the application's")
        let limit = reliable ? Self.maximumReliableDataSize : Self.maximumUnreliableDataSize
        guard bytes.count <= limit else {
            throw GKSessionError(.dataTooBigError, "\(bytes.count) bytes is more than one send on a channel carries (\(limit)).")
        }
        var buffer = ByteBuffer()
        buffer.writeBytes(bytes)
        try self.core.perform { machine throws(GKSessionError) in
            try machine.send(buffer, to: peers, mode: reliable ? .reliable : .unreliable, channel: channel)
        }
    }

    /// Sets who takes what arrives on a library channel (nil: it is dropped). Called on the
    /// transport's event loop, outside the session's lock, with the data and the sender's peer ID.
    package func setReceiver(forChannel channel: UInt8, _ receiver: (@Sendable (ByteBuffer, UInt32) -> Void)?) {
        precondition(channel != SessionChannel.application, "channel 0 is the application's")
        self.core.lock.withLock { self.core.channelReceivers[channel] = receiver }
    }

    /// The peers connected now, directly or through the server.
    package var connectedPeerNumbers: [UInt32] {
        self.core.read { $0.allConnectedPeers }
    }
}
