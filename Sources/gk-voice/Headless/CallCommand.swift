import ArgumentParser
import Foundation
import Logging
import OpenGameKit
import OpenGameKitVoice
import NetworkImpairment

/// `gk-voice call`: a voice chat without a screen, over a rendezvous server (for tests and the
/// benchmark across NATs). Prints one JSON object per line: chat events, `first_audio` (ms from
/// the invitation to the first media packet), and a closing `summary` (with `path_ms`, from the
/// invitation to the moment a path was chosen and the audio ran; `bytes_sent`, the voice packets'
/// bytes, and `sending_seconds`, from the first packet sent to the hang-up, for the call's rate;
/// what its jitter buffer did with what arrived: frames played and concealed, late packets,
/// frames recovered by FEC and by copies, frames time-stretched, its target delay).
struct CallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call", abstract: "A voice chat through a rendezvous server, no screen (JSON lines out).")

    @Option(help: "This participant's name.")
    var name: String

    @Option(help: "The rendezvous server, HOST:PORT (Tests/Peers/rendezvous.py).")
    var rendezvous: String

    @Option(help: "Invite this participant (else wait to be invited).")
    var call: String?

    @Option(help: "Seconds to run before hanging up and quitting.")
    var seconds: Double = 10

    @Flag(help: "Log the call's steps and the media connection's candidates and checks to standard error (OGK_LOG_LEVEL=debug; with OGK_TRACE set, trace).")
    var verbose = false

    @OptionGroup var options: VoiceOptions

    func run() throws {
        var environment = ProcessInfo.processInfo.environment
        if self.verbose { environment[ToolLogging.variable] = environment["OGK_TRACE"] == nil ? "debug" : "trace" }
        ToolLogging.bootstrap(environment: environment)
        let configuration = try self.options.configuration()
        let (host, port) = try VoiceOptions.hostPort(self.rendezvous, option: "--rendezvous")
        let service = GKVoiceChatService(configuration: configuration)
        service.delegateQueue = DispatchQueue(label: "gk-voice")
        let client = try RendezvousClient.connect(name: self.name, host: host, port: port)
        let printer = JSONLines()
        client.onEvent = { printer.print($0) }
        client.service = service
        service.client = client
        defer { client.close() }

        // SIGINT, SIGTERM and SIGHUP end the call early, with its hang-up and summary.
        TerminationSignals.handle(on: .global()) { _ in }
        let start = Date()
        let end = start.addingTimeInterval(self.seconds)
        if let peer = self.call {
            while !client.isPresent(peer) && Date() < end && TerminationSignals.received == nil { Thread.sleep(forTimeInterval: 0.01) }
            if TerminationSignals.received == nil { try service.startVoiceChat(withParticipantID: peer) }
        }
        let invited = Date()
        var firstAudio: Double?
        var statistics = service.engineStatistics
        var path = "none"
        var pathMilliseconds: Double?
        var firstSent: Date?
        while Date() < end && TerminationSignals.received == nil {
            let current = service.engineStatistics
            if let current { statistics = current }
            if firstSent == nil, (current?.packetsSent ?? 0) > 0 { firstSent = Date() }
            if let chosen = service.currentPath {
                path = chosen.rawValue
                if pathMilliseconds == nil { pathMilliseconds = Date().timeIntervalSince(invited) * 1000 }
            }
            if firstAudio == nil, (current?.packetsReceived ?? 0) > 0 {
                firstAudio = Date().timeIntervalSince(invited) * 1000
                printer.print(["event": "first_audio", "ms": firstAudio!])
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        let sendingSeconds = firstSent.map { Date().timeIntervalSince($0) } ?? 0
        if let peer = service.currentParticipantID { service.stopVoiceChat(withParticipantID: peer) }
        Thread.sleep(forTimeInterval: 0.5)  // the hang-up goes out; the output file is closed
        printer.print([
            "event": "summary", "name": self.name, "path": path, "path_ms": pathMilliseconds ?? -1, "first_audio_ms": firstAudio ?? -1,
            "packets_received": statistics?.packetsReceived ?? 0, "packets_sent": statistics?.packetsSent ?? 0,
            "bytes_sent": statistics?.bytesSent ?? 0, "sending_seconds": sendingSeconds,
            "frames_played": statistics?.jitter.played ?? 0, "frames_concealed": statistics?.jitter.concealed ?? 0,
            "packets_late": statistics?.jitter.late ?? 0, "recovered_by_fec": statistics?.jitter.recoveredByFEC ?? 0,
            "recovered_by_copy": statistics?.jitter.recoveredByCopy ?? 0, "accelerated": statistics?.receiver.accelerated ?? 0,
            "expanded": statistics?.receiver.expanded ?? 0, "target_delay_ms": statistics?.targetDelayMilliseconds ?? 0,
        ])
        client.close()
        if let signal = TerminationSignals.received { TerminationSignals.exit(as: signal) }
    }
}

/// Prints JSON objects, one per line, from any thread.
final class JSONLines: @unchecked Sendable {
    private let lock = NSLock()

    func print(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        self.lock.withLock {
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        }
    }
}
