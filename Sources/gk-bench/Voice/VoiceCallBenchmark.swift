import ArgumentParser
import Foundation
import GameKitTransport
import GameKitVoiceEngine
import NetworkImpairment
import OpenGameKitVoice

/// `gk-bench voice-call`: how fast a GKVoiceChatService call gets going. Across NATs
/// (scripts/nat-topology, coturn, two gk-voice processes): invitation → path chosen and →
/// first audio, for the direct, relayed and fallback paths, against the issue's targets (300 ms,
/// 2 s, 3 s). On loopback, in this process: first audio (target 1 s) and mouth-to-ear through
/// real PulseAudio for a direct call.
struct VoiceCallBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "voice-call", abstract: "Voice chat set-up time per path, and mouth-to-ear of a direct call.")

    @Flag(help: "Print one JSON line per row (the table goes to standard error).")
    var json = false

    @Option(help: "Calls per path across the NATs.")
    var rounds = 3

    @Option(help: "Chirps for the mouth-to-ear measurement.")
    var chirps = 20

    @Option(help: "The Python of the rendezvous server (default: .venv/bin/python).")
    var python = ".venv/bin/python"

    static let scenarios: [(path: String, topology: String, targetMilliseconds: Double)] = [
        ("direct", "", 300), ("relayed", "--random-fully", 2000), ("client", "--block-udp", 3000),
    ]

    func run() throws {
        try NetworkSandbox.requireIsolation()
        let workspace = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-call-bench-\(getpid())").path
        try FileManager.default.createDirectory(atPath: workspace, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let speech = try VoiceBenchmark.makeReference(in: workspace, name: "speech.wav", long: false)
        var rows: [[String: Any]] = []
        for scenario in Self.scenarios {
            var pathTimes: [Double] = [], audioTimes: [Double] = [], chosen: [String] = []
            for round in 0..<self.rounds {
                let summary = try self.natCall(topology: scenario.topology, speech: speech, workspace: workspace, round: round)
                chosen.append(summary["path"] as? String ?? "none")
                if let ms = summary["path_ms"] as? Double, ms >= 0 { pathTimes.append(ms) }
                if let ms = summary["first_audio_ms"] as? Double, ms >= 0 { audioTimes.append(ms) }
            }
            let pathP50 = Percentiles(pathTimes).value(at: 0.5)
            rows.append([
                "work": "voice-call", "path": scenario.path, "paths_seen": chosen.joined(separator: ","),
                "rounds": self.rounds, "path_ms": pathP50 ?? NSNull(), "first_audio_ms": Percentiles(audioTimes).value(at: 0.5) ?? NSNull(),
                "target_ms": scenario.targetMilliseconds,
                "ratio_vs_target": pathP50.map { $0 / scenario.targetMilliseconds } ?? NSNull(),
                "mouth_to_ear_ms_p95": NSNull(),
            ])
        }
        rows.append(try self.loopbackCall(workspace: workspace))
        self.report(rows)
    }

    private func report(_ rows: [[String: Any]]) {
        func number(_ row: [String: Any], _ key: String, _ format: String = "%.0f") -> String {
            (row[key] as? Double ?? (row[key] as? Int).map(Double.init)).map { String(format: format, $0) } ?? "-"
        }
        var table = "path             seen                     path ms  first audio ms  target ms  ratio  m2e p95 ms\n"
        for row in rows {
            table += (row["path"] as? String ?? "").padding(toLength: 16, withPad: " ", startingAt: 0) + " "
            table += (row["paths_seen"] as? String ?? "-").padding(toLength: 24, withPad: " ", startingAt: 0) + " "
            table += number(row, "path_ms").padding(toLength: 8, withPad: " ", startingAt: 0) + " "
            table += number(row, "first_audio_ms").padding(toLength: 15, withPad: " ", startingAt: 0) + " "
            table += number(row, "target_ms").padding(toLength: 10, withPad: " ", startingAt: 0) + " "
            table += number(row, "ratio_vs_target", "%.2f").padding(toLength: 6, withPad: " ", startingAt: 0) + " "
            table += number(row, "mouth_to_ear_ms_p95") + "\n"
            if self.json { emitJSONLine(row) }
        }
        (self.json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(table.utf8))
    }

    /// One call across the NAT topology; alice's summary.
    private func natCall(topology: String, speech: String, workspace: String, round: Int) throws -> [String: Any] {
        let directory = "\(workspace)/nat-\(topology.isEmpty ? "plain" : String(topology.dropFirst(2)))-\(round)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let tools = URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
        let child = try ChildProgram(
            "scripts/nat-call", topology.split(separator: " ").map(String.init) + ["--seconds", "5", directory, speech],
            environment: ["PATH": "\(tools):/usr/sbin:/usr/bin:/sbin:/bin", "PEER_PYTHON": self.python])
        guard child.wait(seconds: 60) else {
            child.signal(SIGKILL)
            throw ValidationError("the call across \(topology.isEmpty ? "the NATs" : topology) did not end")
        }
        let lines = (try? String(contentsOfFile: "\(directory)/alice.jsonl", encoding: .utf8)) ?? ""
        for line in lines.split(separator: "\n").reversed() {
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], object["event"] as? String == "summary" {
                return object
            }
        }
        return [:]
    }

    /// A direct call over loopback in this process: first audio with devices that deliver at once
    /// (real-time silence), then mouth to ear through real PulseAudio (whose idle null sink hands
    /// out its first block only after about 2 s: that first audio is reported on its own).
    private func loopbackCall(workspace: String) throws -> [String: Any] {
        let quick = FirstAudio()
        let stop = try LoopbackCall.start(audio: { _, _ in .silent }, firstAudio: quick)
        stop()
        let timing = FirstAudio()
        var row = try MouthToEar.measure(chirps: self.chirps, workspace: workspace, impl: "gkvoicechatservice") { address in
            try LoopbackCall.start(audio: { source, sink in .pulseAudio(source: source, sink: sink, server: address) }, firstAudio: timing)
        }
        row["work"] = "voice-call"
        row["path"] = "direct-loopback"
        row["first_audio_ms"] = quick.milliseconds ?? NSNull()
        row["first_audio_pulseaudio_ms"] = timing.milliseconds ?? NSNull()
        row["target_ms"] = 1000.0
        row["ratio_vs_target"] = quick.milliseconds.map { $0 / 1000 } ?? NSNull()
        return row
    }
}

/// A direct call between two services of this process over loopback; with the mouth-to-ear
/// room's PulseAudio devices, alice hears the chirps and bob plays into the right channel.
enum LoopbackCall {
    /// Hands each side's signalling straight to the other service.
    final class Client: GKVoiceChatClient, @unchecked Sendable {
        let id: String
        weak var other: GKVoiceChatService?
        init(id: String) { self.id = id }
        func participantID() -> String { self.id }
        func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
            self.other?.receivedData(data, fromParticipantID: self.id)
        }
    }

    static func start(audio: (_ source: String, _ sink: String) -> VoiceAudioDevices, firstAudio: FirstAudio) throws -> () -> Void {
        func service(source: String, sink: String) -> GKVoiceChatService {
            var configuration = GKVoiceChatService.Configuration()
            configuration.bindAddress = "127.0.0.1"
            configuration.audio = audio(source, sink)
            let service = GKVoiceChatService(configuration: configuration)
            service.delegateQueue = DispatchQueue(label: "voice-call-\(source)")
            return service
        }
        let alice = service(source: "ogk_mic", sink: "ogk_discard")
        let bob = service(source: "ogk_silence.monitor", sink: "ogk_right")
        let aliceClient = Client(id: "alice"), bobClient = Client(id: "bob")
        aliceClient.other = bob
        bobClient.other = alice
        alice.client = aliceClient
        bob.client = bobClient
        let start = Date()
        try alice.startVoiceChat(withParticipantID: "bob")
        let end = start.addingTimeInterval(10)
        while Date() < end, (bob.engineStatistics?.packetsReceived ?? 0) == 0 { Thread.sleep(forTimeInterval: 0.002) }
        if (bob.engineStatistics?.packetsReceived ?? 0) > 0 { firstAudio.milliseconds = Date().timeIntervalSince(start) * 1000 }
        Thread.sleep(forTimeInterval: 1)  // the jitter buffer settles before the chirps
        return {
            alice.stopVoiceChat(withParticipantID: "bob")
            Thread.sleep(forTimeInterval: 0.3)
            withExtendedLifetime((aliceClient, bobClient, bob)) {}
        }
    }
}

/// When the first media of the loopback call arrived.
final class FirstAudio: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Double?
    var milliseconds: Double? {
        get { self.lock.withLock { self.value } }
        set { self.lock.withLock { self.value = newValue } }
    }
}
