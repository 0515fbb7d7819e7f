import ArgumentParser
import Foundation
import GameKitTransport
import GameKitTraversal
import NetworkImpairment
import OpenGameKitVoice

/// The options every gk-voice command shares: servers, devices, timing.
struct VoiceOptions: ParsableArguments {
    @Option(help: "A STUN server, IPV4-ADDRESS[:PORT] (repeatable).")
    var stun: [String] = []

    @Option(help: "A TURN server, USER:PASSWORD@IPV4-ADDRESS[:PORT].")
    var turn: String?

    @Flag(help: "Send media only through the TURN relay.")
    var relayOnly = false

    @Option(help: "A 16 kHz mono WAV file to use as the microphone (then silence).")
    var input: String?

    @Option(help: "A WAV file to write the far side's voice to (with --input).")
    var output: String?

    @Option(help: "The PulseAudio source to capture from (default: the server's default).")
    var source: String?

    @Option(help: "The PulseAudio sink to play to (default: the server's default).")
    var sink: String?

    @Option(help: "Seconds the connectivity checks may take before the app channel is tried.")
    var pathTimeout: Double = 2.5

    /// The service configuration these options describe.
    func configuration() throws -> GKVoiceChatService.Configuration {
        var configuration = GKVoiceChatService.Configuration()
        configuration.stunServers = try self.stun.map { value in
            let (host, port) = try Self.hostPort(value)
            return RealTimeConnection.STUNServer(host: host, port: port)
        }
        if let text = self.turn {
            guard let turn = TURNArgument(text) else { throw ValidationError("--turn wants USER:PASSWORD@HOST[:PORT]") }
            let (host, port) = try Self.hostPort(turn.address)
            configuration.turnServers = [RealTimeConnection.TURNServer(host: host, port: port, username: turn.username, password: turn.password)]
        }
        configuration.relayOnly = self.relayOnly
        configuration.pathTimeout = self.pathTimeout
        switch (self.input, self.output) {
        case (let input?, let output?): configuration.audio = .files(input: input, output: output)
        case (nil, nil): configuration.audio = .pulseAudio(source: self.source, sink: self.sink)
        default: throw ValidationError("--input and --output go together")
        }
        return configuration
    }

    /// A rendezvous's address (`IPV4[:PORT]`, port 7878 by default) as a STUN server; nil for a
    /// host name or an IPv6 address (the voice engine's STUN client takes IPv4 addresses).
    static func stunServer(atRendezvous value: String) -> RealTimeConnection.STUNServer? {
        let parts = value.split(separator: ":")
        guard (1...2).contains(parts.count), let host = parts.first.map(String.init), host.split(separator: ".").count == 4,
            host.split(separator: ".").allSatisfy({ UInt8($0) != nil })
        else { return nil }
        let port = parts.count == 2 ? Int(parts[1]) : 7878
        guard let port, (1...65535).contains(port) else { return nil }
        return RealTimeConnection.STUNServer(host: host, port: port)
    }

    static func hostPort(_ value: String) throws -> (String, Int) {
        let parts = value.split(separator: ":")
        guard parts.count <= 2, let host = parts.first.map(String.init), !host.isEmpty else {
            throw ValidationError("\(value) is not HOST[:PORT]")
        }
        guard parts.count == 2 else { return (host, 3478) }
        guard let port = Int(parts[1]), (1...65535).contains(port) else { throw ValidationError("\(value): bad port") }
        return (host, port)
    }
}
