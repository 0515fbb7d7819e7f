import ArgumentParser
import Foundation
import GameKitTransport
import GameKitTraversal
import NetworkImpairment
import OpenGameKitVoice

/// The audio devices of every gk-voice command: WAV files or PulseAudio's.
struct AudioOptions: ParsableArguments {
    @Option(help: "A 16 kHz mono WAV file to use as the microphone (then silence).")
    var input: String?

    @Option(help: "A WAV file to write what the others say to (with --input).")
    var output: String?

    @Option(help: "The PulseAudio source to capture from (default: the server's default).")
    var source: String?

    @Option(help: "The PulseAudio sink to play to (default: the server's default).")
    var sink: String?

    /// The devices these options name: WAV files, or PulseAudio's source and sink.
    func audio() throws -> VoiceAudioDevices {
        switch (self.input, self.output) {
        case (let input?, let output?): return .files(input: input, output: output)
        case (nil, nil): return .pulseAudio(source: self.source, sink: self.sink)
        default: throw ValidationError("--input and --output go together")
        }
    }
}

/// The options of the two-party commands: servers, devices, timing.
struct VoiceOptions: ParsableArguments {
    @Option(help: "A STUN server, IPV4-ADDRESS[:PORT] or [IPV6-ADDRESS][:PORT] (repeatable).")
    var stun: [String] = []

    @Option(help: "A TURN server, USER:PASSWORD@IPV4-ADDRESS[:PORT] (or [IPV6-ADDRESS][:PORT]).")
    var turn: String?

    @Flag(help: "Send media only through the TURN relay.")
    var relayOnly = false

    @OptionGroup var devices: AudioOptions

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
            let (host, port) = try Self.hostPort(turn.address, option: "--turn")
            configuration.turnServers = [RealTimeConnection.TURNServer(host: host, port: port, username: turn.username, password: turn.password)]
        }
        configuration.relayOnly = self.relayOnly
        configuration.pathTimeout = self.pathTimeout
        configuration.audio = try self.devices.audio()
        return configuration
    }

    /// A rendezvous's address (`IPV4[:PORT]` or `[IPV6][:PORT]`, port 7878 by default) as a
    /// STUN server (`localhost` is 127.0.0.1); nil for anything else (a name is not resolved).
    static func stunServer(atRendezvous value: String) -> RealTimeConnection.STUNServer? {
        (try? hostPort(value, option: "--rendezvous", defaultPort: 7878)).map { RealTimeConnection.STUNServer(host: $0.0, port: $0.1) }
    }

    /// A server's numeric address and port (`defaultPort`, STUN's 3478 unless told, when left out).
    static func hostPort(_ value: String, option: String = "--stun", defaultPort: Int = 3478) throws -> (String, Int) {
        let address = try EndpointArgument.parse(value, option: option, defaultPort: defaultPort)
        return (address.ipAddress ?? "", address.port ?? defaultPort)
    }
}
