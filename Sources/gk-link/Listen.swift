import ArgumentParser
import Foundation
import GameKitTransport
import NIOConcurrencyHelpers
import NIOCore
import NetworkImpairment

/// Accepts links and counts what arrives on them, checking that reliable messages (numbered by
/// `connect`) arrive exactly once and in order.
struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Accept links; count or echo messages.")

    @Option(help: "Address to bind (\"::\" for IPv6 and IPv4).")
    var host = "0.0.0.0"

    @Option(help: "Port to bind (0: any).")
    var port = 7000

    @OptionGroup var transport: TransportOptions

    @Option(help: "Deny every connection request with this code.")
    var deny: UInt16?

    @Flag(help: "Send every message back on its link, in its mode.")
    var echo = false

    @Option(help: "Stop after this many messages in total.")
    var expect: Int?

    @Option(help: "Stop after this many seconds.")
    var duration: Double = 60

    @Flag(help: "Print events as JSON lines.")
    var json = false

    func run() async throws {
        let tally = NIOLockedValueBox(Tally())
        let stop = StopCondition()
        let endpointBox = NIOLockedValueBox<TransportEndpoint?>(nil)
        let (json, echo, deny, expect) = (self.json, self.echo, self.deny, self.expect)
        let endpoint = try await TransportEndpoint.bind(host: self.host, port: self.port, configuration: self.transport.configuration) { event in
            guard let endpoint = endpointBox.withLockedValue({ $0 }) else { return }
            switch event {
            case .connectionRequest(let request):
                if let deny {
                    try? endpoint.deny(request.id, code: deny)
                } else {
                    _ = try? endpoint.accept(request.id)
                }
            case .received(let message, let link, let mode):
                let total = tally.withLockedValue { $0.record(message, on: link, mode: mode) }
                if echo { try? endpoint.send(message, on: link, mode: mode) }
                if let expect, total >= expect { stop.fire("expected") }
            case .linkOpened(let link, _, _):
                tally.withLockedValue { $0.lastHeard[link] = .now() }
            default:
                break
            }
            guard json, var line = Self.describe(event) else { return }
            if case .linkClosed(let link, _) = event, let last = tally.withLockedValue({ $0.lastHeard[link] }) {
                // How long the peer had been silent, as far as the application can tell: since
                // its last message (or the link's opening). The liveness test checks it against
                // the disconnect timeout.
                line["silent_s"] = Double((NIODeadline.now() - last).nanoseconds) / 1e9
            }
            Output.line(line)
        }
        endpointBox.withLockedValue { $0 = endpoint }
        Output.text("listening \(self.host) \(endpoint.localAddress.port ?? 0)")
        let why = await stop.wait(seconds: self.duration)
        // Let the last acknowledgements go out before reporting.
        try? await Task.sleep(nanoseconds: 100_000_000)
        let summary = tally.withLockedValue { $0 }
        var line: [String: Any] = [
            "event": "summary",
            "stopped_by": why,
            "received": summary.total,
            "reliable_received": summary.reliable,
            "unreliable_received": summary.unreliable,
            "reliable_in_order": summary.reliableInOrder,
            "endpoint": Output.statistics(endpoint.statistics),
        ]
        if let link = summary.links.first, let stats = endpoint.statistics(for: link) {
            line["link"] = Output.statistics(stats)
        }
        Output.line(line)
        await endpoint.shutdown()
    }

    static func describe(_ event: TransportEvent) -> [String: Any]? {
        switch event {
        case .connectionRequest(let request):
            return ["event": "connectionRequest", "from": "\(request.remoteAddress)", "payload_bytes": request.payload.readableBytes]
        case .connectionRequestWithdrawn(_, let reason):
            return ["event": "connectionRequestWithdrawn", "reason": "\(reason)"]
        case .linkOpened(let link, let address, _):
            return ["event": "linkOpened", "link": link.rawValue, "from": "\(address)"]
        case .linkClosed(let link, let reason):
            return ["event": "linkClosed", "link": link.rawValue, "reason": Output.describe(reason)]
        case .liveness(let watch, let alive):
            return ["event": "liveness", "watch": watch.rawValue, "alive": alive]
        case .handshakeFailed(let address, let error):
            return ["event": "handshakeFailed", "from": "\(address)", "error": Output.describe(error)]
        case .connectFailed(let link, let error):
            return ["event": "connectFailed", "link": link.rawValue, "error": Output.describe(error)]
        case .linkMoved(let link, let from, let to):
            return ["event": "linkMoved", "link": link.rawValue, "from": "\(from)", "to": "\(to)"]
        case .received, .sendBufferAvailable:
            return nil
        }
    }
}

/// What `listen` has received.
struct Tally {
    var total = 0
    var reliable = 0
    var unreliable = 0
    /// Whether every reliable message so far carried the next sequence number of its link.
    var reliableInOrder = true
    var nextSequence: [LinkID: UInt64] = [:]
    var links: [LinkID] = []
    /// When each link opened or last brought a message.
    var lastHeard: [LinkID: NIODeadline] = [:]

    mutating func record(_ message: ByteBuffer, on link: LinkID, mode: SendMode) -> Int {
        self.total += 1
        self.lastHeard[link] = .now()
        if self.nextSequence[link] == nil {
            self.nextSequence[link] = 0
            self.links.append(link)
        }
        switch mode {
        case .reliable:
            self.reliable += 1
            let sequence = message.getInteger(at: message.readerIndex, as: UInt64.self)
            if sequence != self.nextSequence[link] { self.reliableInOrder = false }
            self.nextSequence[link]! += 1
        case .unreliable:
            self.unreliable += 1
        }
        return self.total
    }
}
