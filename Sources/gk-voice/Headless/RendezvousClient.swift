import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import OpenGameKitVoice

/// A voice chat client whose channel is a TCP connection to a rendezvous server
/// (Tests/Peers/rendezvous.py): the application-level server two hosts behind NATs can both
/// reach. Signalling goes as kind-1 frames, real-time data (the fallback path) as kind-2 frames.
final class RendezvousClient: GKVoiceChatClient, @unchecked Sendable {
    let name: String
    private let channel: Channel
    private let present = NIOLockedValueBox<Set<String>>([])
    weak var service: GKVoiceChatService?
    /// Called with every event of the chat, for the command's output.
    var onEvent: (@Sendable ([String: Any]) -> Void)?

    private init(name: String, channel: Channel) {
        self.name = name
        self.channel = channel
    }

    /// Connects to the rendezvous at `host:port` and says hello.
    static func connect(name: String, host: String, port: Int) throws -> RendezvousClient {
        let box = NIOLockedValueBox<RendezvousClient?>(nil)
        let channel = try ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try channel.pipeline.syncOperations.addHandler(FrameHandler(client: box))
                }
            }
            .connect(host: host, port: port).wait()
        let client = RendezvousClient(name: name, channel: channel)
        box.withLockedValue { $0 = client }
        client.write(kind: 0, name: name, payload: [])
        return client
    }

    func isPresent(_ name: String) -> Bool { self.present.withLockedValue { $0.contains(name) } }

    func close() { self.channel.close(promise: nil) }

    private func write(kind: UInt8, name: String, payload: [UInt8]) {
        var buffer = self.channel.allocator.buffer(capacity: 4 + name.utf8.count + payload.count)
        buffer.writeInteger(kind)
        buffer.writeInteger(UInt8(name.utf8.count))
        buffer.writeString(name)
        buffer.writeInteger(UInt16(payload.count))
        buffer.writeBytes(payload)
        self.channel.writeAndFlush(buffer, promise: nil)
    }

    fileprivate func received(kind: UInt8, name: String, payload: [UInt8]) {
        switch kind {
        case 1: self.service?.receivedData(Data(payload), fromParticipantID: name)
        case 2: self.service?.receivedRealTime(Data(payload), fromParticipantID: name)
        case 3: self.present.withLockedValue { _ = $0.insert(name) }
        default: break
        }
    }

    // MARK: - GKVoiceChatClient

    func participantID() -> String { self.name }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        self.write(kind: 1, name: participantID, payload: Array(data))
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, sendRealTime data: Data, toParticipantID participantID: String) {
        self.write(kind: 2, name: participantID, payload: Array(data))
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didReceiveInvitationFromParticipantID participantID: String, callID: Int) {
        self.onEvent?(["event": "invited", "peer": participantID])
        try? voiceChatService.acceptCallID(callID)
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStartWithParticipantID participantID: String) {
        self.onEvent?(["event": "started", "peer": participantID, "path": voiceChatService.currentPath?.rawValue ?? "?"])
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didNotStartWithParticipantID participantID: String, error: Error?) {
        self.onEvent?(["event": "not_started", "peer": participantID, "error": (error as? GKVoiceChatServiceError)?.code.rawValue ?? 0,
                       "reason": error?.localizedDescription ?? ""])
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?) {
        self.onEvent?(["event": "stopped", "peer": participantID, "error": (error as? GKVoiceChatServiceError)?.code.rawValue ?? 0,
                       "reason": error?.localizedDescription ?? ""])
    }
}

/// Splits the TCP stream into rendezvous frames.
private struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = (UInt8, String, [UInt8])

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        var peek = buffer
        guard let kind = peek.readInteger(as: UInt8.self), let nameLength = peek.readInteger(as: UInt8.self),
            let name = peek.readString(length: Int(nameLength)), let size = peek.readInteger(as: UInt16.self),
            let payload = peek.readBytes(length: Int(size))
        else { return .needMoreData }
        buffer = peek
        context.fireChannelRead(Self.wrapInboundOut((kind, name, payload)))
        return .continue
    }
}

private final class FrameHandler: ChannelInboundHandler {
    typealias InboundIn = (UInt8, String, [UInt8])
    private let client: NIOLockedValueBox<RendezvousClient?>

    init(client: NIOLockedValueBox<RendezvousClient?>) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let (kind, name, payload) = self.unwrapInboundIn(data)
        self.client.withLockedValue { $0 }?.received(kind: kind, name: name, payload: payload)
    }
}
