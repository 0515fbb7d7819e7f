import ArgumentParser
import Foundation
import GameKitTransport
import NIOConcurrencyHelpers
import NIOCore
import NetworkImpairment

/// Opens a link, sends numbered messages as fast as the link takes them, closes it gracefully.
struct Connect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Open a link, send numbered messages, close it.")

    @Argument(help: "The listener, HOST:PORT.")
    var address: String

    @OptionGroup var transport: TransportOptions

    @Option(help: "Local address to bind (default: all addresses of the target's family).")
    var bind: String?

    @Option(help: "Messages to send.")
    var count = 10

    @Option(help: "Bytes per message (at least 8: the sequence number).")
    var size = 100

    @Option(help: "reliable or unreliable.")
    var mode: SendMode = .reliable

    @Option(help: "Text to send with the handshake.")
    var hello = ""

    @Option(help: "Seconds to wait for the handshake.")
    var timeout: Double = 10

    @Option(help: "Seconds to keep the link open after sending, before closing it.")
    var linger: Double = 0

    @Option(help: "Seconds to pause between messages (0: as fast as the link takes them).")
    var interval: Double = 0

    @Flag(help: "Send without waiting: a message refused with 'buffer full' is counted, then written once there is room.")
    var noWait = false

    @Option(help: "Half way through, also try one message of this many bytes, reliable and unreliable, and report the errors (for 'data too big').")
    var oversize: Int?

    @Option(help: "Application code to close the link with.")
    var closeCode: UInt16 = 0

    @Flag(help: "Print events as JSON lines.")
    var json = false

    func validate() throws {
        guard self.size >= 8 else { throw ValidationError("--size must be at least 8") }
    }

    func run() async throws {
        let target = try parseAddress(self.address)
        let closed = StopCondition(signals: [])
        let closeReason = NIOLockedValueBox<String?>(nil)
        let json = self.json
        let local = self.bind ?? (target.protocol == .inet6 ? "::" : "0.0.0.0")
        let endpoint = try await TransportEndpoint.bind(host: local, port: 0, configuration: self.transport.configuration) { event in
            if case .linkClosed(_, let reason) = event {
                closeReason.withLockedValue { $0 = Output.describe(reason) }
                closed.fire("closed")
            }
            if json, let line = Listen.describe(event) { Output.line(line) }
        }
        let link: OpenedLink
        do {
            link = try await endpoint.openLink(
                to: target,
                payload: ByteBuffer(string: self.hello),
                timeout: .nanoseconds(Int64(self.timeout * 1e9))
            )
        } catch {
            Output.line(["event": "summary", "opened": false, "error": Output.describe(error)])
            await endpoint.shutdown()
            throw ExitCode(1)
        }
        let started = ContinuousClock.now
        var sending = Sending(endpoint: endpoint, link: link.id, mode: self.mode, noWait: self.noWait)
        var oversizeErrors: [String: Any]?
        for sequence in 0..<self.count {
            if sequence == self.count / 2, let oversize = self.oversize {
                oversizeErrors = await sending.tryOversize(size: oversize)
            }
            guard await sending.send(.numbered(sequence, size: self.size)) else { break }
            if self.interval > 0 {
                try? await Task.sleep(nanoseconds: UInt64(self.interval * 1e9))
            }
        }
        let sendError = sending.error
        if self.linger > 0 {
            try? await Task.sleep(nanoseconds: UInt64(self.linger * 1e9))
        }
        // Wait (boundedly) until everything sent is acknowledged, so the figures are complete. The
        // peer may close the link first (a listener that stops on its last expected message does,
        // and when its last acknowledgement is lost, before this side has heard it): the figures
        // are then the last ones read while the link was open.
        var stats = endpoint.statistics(for: link.id)
        for _ in 0..<6000 {
            guard let current = endpoint.statistics(for: link.id) else { break }
            stats = current
            guard current.bytesQueued > 0 else { break }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        try? endpoint.close(link.id, code: self.closeCode)
        let why = await closed.wait(seconds: max(30, self.transport.disconnectTimeout + 5))
        let elapsed = ContinuousClock.now - started
        var line: [String: Any] = [
            "event": "summary",
            "opened": true,
            "sent": self.count,
            "seconds": Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            "closed": why == "closed",
            "close_reason": closeReason.withLockedValue { $0 } ?? NSNull(),
        ]
        if let sendError { line["error"] = sendError }
        if let stats { line["link"] = Output.statistics(stats) }
        if self.noWait {
            line["buffer_full"] = sending.bufferFullCount
            line["max_bytes_queued"] = sending.maximumQueued
        }
        if let oversizeErrors { line["oversize"] = oversizeErrors }
        Output.line(line)
        await endpoint.shutdown()
        if sendError != nil { throw ExitCode(1) }
    }
}

/// The sending half of `connect`: the async `write` that waits for room, or (with `--no-wait`)
/// the immediate `send`, whose "buffer full" refusals are counted before the message is written
/// once there is room. Notes the most bytes the link held queued after a send.
struct Sending {
    let endpoint: TransportEndpoint
    let link: LinkID
    let mode: SendMode
    let noWait: Bool
    private(set) var error: String?
    private(set) var bufferFullCount = 0
    private(set) var maximumQueued = 0

    init(endpoint: TransportEndpoint, link: LinkID, mode: SendMode, noWait: Bool) {
        self.endpoint = endpoint
        self.link = link
        self.mode = mode
        self.noWait = noWait
    }

    /// Sends one message; false (with `error` set) when it failed for another reason than room.
    mutating func send(_ message: ByteBuffer) async -> Bool {
        do {
            if self.noWait {
                do {
                    try self.endpoint.send(message, on: self.link, mode: self.mode)
                } catch .bufferFull {
                    self.bufferFullCount += 1
                    try await self.endpoint.write(message, on: self.link, mode: self.mode)
                }
                let queued = self.endpoint.statistics(for: self.link)?.bytesQueued ?? 0
                self.maximumQueued = max(self.maximumQueued, queued)
            } else {
                try await self.endpoint.write(message, on: self.link, mode: self.mode)
            }
            return true
        } catch {
            self.error = Output.describe(error)
            return false
        }
    }

    /// Tries a message of `size` bytes with the waiting write (reliable) and the immediate send
    /// (unreliable); returns what each threw ("none" if it was taken).
    func tryOversize(size: Int) async -> [String: Any] {
        let message = ByteBuffer(repeating: 0x5A, count: size)
        var result: [String: Any] = [:]
        do {
            try await self.endpoint.write(message, on: self.link, mode: .reliable)
            result["reliable_write"] = "none"
        } catch {
            result["reliable_write"] = Output.describe(error)
        }
        do {
            try self.endpoint.send(message, on: self.link, mode: .unreliable)
            result["unreliable_send"] = "none"
        } catch {
            result["unreliable_send"] = Output.describe(error)
        }
        return result
    }
}
