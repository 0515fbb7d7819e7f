import ArgumentParser
import Crypto
import Foundation
@_spi(Machine) import GameKitOnline
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import NetworkImpairment

/// `gk-rendezvous`: the rendezvous (rooms, STUN binding answers) and relay that online
/// sessions meet through (PROTOCOL §18).
@main
struct GKRendezvous: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-rendezvous",
        abstract: "Serve online rooms: a rendezvous for sessions on different networks, and a relay between them.",
        discussion: """
            One UDP port answers STUN binding requests (a member's public address), registrations \
            in rooms (a room is a session ID and the first six characters of its code; the other six never reach it), and, unless --no-relay, \
            relays members' encrypted datagrams to each other for holders of the tickets it signs. \
            It never sees a session's keys or messages.

            Output: JSON lines: {"event":"listening",...} once bound (with the ticket-signing \
            public key), one line per room and member change, {"event":"statistics",...} every \
            --stats-interval seconds and at the end. Stops on SIGINT, SIGTERM, SIGHUP or --duration.
            """
    )

    @Option(help: "Address and port to serve on: HOST:PORT, IPv6 in brackets.")
    var listen = "[::]:7878"

    @Flag(inversion: .prefixedNo, help: "Relay datagrams between members (tickets signed by this instance).")
    var relay = true

    @Option(help: "Where members send relayed datagrams, when a separate relay serves this rendezvous's tickets: HOST:PORT.")
    var relayAddress: String?

    @Option(help: "File holding the ticket-signing key (32 bytes, hex); created if missing. Without it, a new key each start.")
    var key: String?

    @Option(help: "Public key (hex) of another rendezvous whose tickets this relay accepts; repeatable.")
    var trustKey: [String] = []

    @Option(help: "Share rooms with other instances through PostgreSQL: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, or postgres://USER@/DATABASE?host=SOCKET-DIRECTORY. Needs --relay-address (or a --listen address that is not a wildcard).")
    var database: String?

    @Option(help: "This instance's name in the database (default: host name, process ID and a random number).")
    var instance: String?

    @Option(help: "Seconds a member may stay silent before it has left the room.")
    var memberTimeout: Double = 10

    @Option(help: "Seconds an empty room (and its code) is kept.")
    var roomLifetime: Double = 600

    @Option(help: "Members one room holds (at most 64).")
    var maxMembers = 16

    @Option(help: "TCP connections at once (for members whose network blocks UDP), at most the open-file limit less 256.")
    var maxStreams = StreamLimits().total

    @Option(help: "TCP connections at once from one IPv4 address or IPv6 /64.")
    var streamsPerSource = StreamLimits().perSource

    @Option(help: "Stop after this many seconds (default: run until a signal).")
    var duration: Double?

    @Option(help: "Seconds between statistics lines.")
    var statsInterval: Double = 60

    func validate() throws {
        guard self.memberTimeout >= 1, self.roomLifetime >= 1 else { throw ValidationError("--member-timeout and --room-lifetime are at least 1 second") }
        guard (2...64).contains(self.maxMembers) else { throw ValidationError("--max-members is from 2 to 64") }
        guard self.statsInterval > 0 else { throw ValidationError("--stats-interval must be positive") }
        guard self.maxStreams >= 0, self.streamsPerSource >= 1 else { throw ValidationError("--max-streams is at least 0 and --streams-per-source at least 1") }
        if let duration = self.duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
    }

    func run() async throws {
        let address = try EndpointArgument.parse(self.listen, option: "--listen", allowPortZero: true)
        var configuration = RendezvousConfiguration()
        configuration.relays = self.relay
        configuration.relayAddress = try self.relayAddress.map { try EndpointArgument.parse($0, option: "--relay-address", allowPortZero: false) }
        configuration.memberTimeout = .nanoseconds(Int64(self.memberTimeout * 1e9))
        configuration.roomIdleLifetime = .nanoseconds(Int64(self.roomLifetime * 1e9))
        configuration.maximumMembersPerRoom = self.maxMembers
        configuration.streams.total = self.maxStreams
        configuration.streams.perSource = self.streamsPerSource
        let signingKey = try self.loadKey()
        let trusted = try self.trustKey.map { text -> Curve25519.Signing.PublicKey in
            guard let bytes = Hex.decode(text), let key = try? Curve25519.Signing.PublicKey(rawRepresentation: bytes) else {
                throw ValidationError("--trust-key \(text): not a 32-byte public key in hex")
            }
            return key
        }
        let stop = StopCondition()
        var store: PostgresRooms?
        let (commands, commandSink) = AsyncStream.makeStream(of: StoreCommand.self)
        if let database = self.database {
            // Every instance must name the same relay for a room: this one's own, reachable.
            let wildcard = address.ipAddress == "0.0.0.0" || address.ipAddress == "::"
            guard configuration.relayAddress != nil || !wildcard else {
                throw ValidationError("--database needs --relay-address HOST:PORT (where members reach this instance), or a --listen address that is not a wildcard")
            }
            if configuration.relayAddress == nil { configuration.relayAddress = address }
            let name = self.instance ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            configuration.sharedInstance = name
            var logger = Logger(label: "gk-rendezvous.database")
            logger.logLevel = .warning
            let rooms = PostgresRooms(
                instance: name, relay: configuration.relayAddress, roomLifetimeSeconds: Int(self.roomLifetime),
                configuration: try DatabaseArgument.parse(database), logger: logger)
            try await rooms.open()
            store = rooms
        }
        let refusals = RefusalLog()
        let service = try await RendezvousService.start(at: address, configuration: configuration, signingKey: signingKey, otherIssuers: trusted) { event in
            if case .store(let command) = event {
                commandSink.yield(command)
                return
            }
            // A flood of bad requests must not become a flood of log lines.
            if case .refused = event, !refusals.admit() { return }
            JSONLines.line(Self.fields(of: event))
        }
        let storeTask = store.map { store in Task { await store.run(service: service, commands: commands) } }
        JSONLines.line([
            "event": "listening", "address": "\(service.localAddress)", "port": service.localAddress.port ?? 0,
            "relay": self.relay, "public_key": Hex.encode(Array(service.publicKey.rawRepresentation)),
            "instance": configuration.sharedInstance ?? "",
            "max_streams": service.streamLimits.total, "streams_per_source": service.streamLimits.perSource,
        ])
        let statistics = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(self.statsInterval * 1e9))
                if Task.isCancelled { break }
                JSONLines.line(Self.fields(of: service.statistics, refusals: refusals))
            }
        }
        let why = await stop.wait(seconds: self.duration)
        statistics.cancel()
        await service.stop()
        // The database's connections are closed, which ends the store's work; it is not waited
        // for (a query stuck on a dead database must not keep the process alive). Members' rows
        // expire by themselves: they register again with another instance first.
        commandSink.finish()
        storeTask?.cancel()
        await store?.close()
        var last = Self.fields(of: service.statistics, refusals: refusals)
        last["stopped"] = why
        JSONLines.line(last)
    }

    private func loadKey() throws -> Curve25519.Signing.PrivateKey {
        guard let path = self.key else { return Curve25519.Signing.PrivateKey() }
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            guard let bytes = Hex.decode(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: bytes)
            else { throw ValidationError("--key \(path): not a 32-byte key in hex") }
            return key
        }
        let key = Curve25519.Signing.PrivateKey()
        let created = FileManager.default.createFile(
            atPath: path, contents: Data((Hex.encode(Array(key.rawRepresentation)) + "\n").utf8), attributes: [.posixPermissions: 0o600])
        guard created else { throw ValidationError("--key \(path): cannot create the file") }
        return key
    }

    static func fields(of event: RendezvousEvent) -> [String: Any] {
        switch event {
        case .roomCreated(let room, let code): ["event": "room_created", "room": "\(room)", "code": code.displayed]
        case .memberJoined(let room, let peer, let name): ["event": "member_joined", "room": "\(room)", "peer": peer, "name": name]
        case .memberLeft(let room, let peer, let timedOut): ["event": "member_left", "room": "\(room)", "peer": peer, "timed_out": timedOut]
        case .roomExpired(let room): ["event": "room_expired", "room": "\(room)"]
        case .relayAllocated(let room, let peer, let address): ["event": "relay_allocated", "room": "\(room)", "peer": peer, "address": "\(address)"]
        case .refused(let source, let reason): ["event": "refused", "source": "\(source)", "reason": "\(reason)"]
        case .store: [:]
        }
    }

    static func fields(of statistics: RendezvousStatistics, refusals: RefusalLog) -> [String: Any] {
        let data = (try? JSONEncoder().encode(statistics)) ?? Data()
        var fields = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        fields["event"] = "statistics"
        fields["refusals_unlogged"] = refusals.unlogged
        return fields
    }
}

/// At most ``perSecond`` "refused" lines a second; the rest are counted (in the statistics
/// lines), not printed.
final class RefusalLog: Sendable {
    static let perSecond = 10
    private let state = NIOLockedValueBox<(second: UInt64, lines: Int, unlogged: UInt64)>((0, 0, 0))

    /// Whether this refusal gets its line.
    func admit() -> Bool {
        let second = NIODeadline.now().uptimeNanoseconds / 1_000_000_000
        return self.state.withLockedValue { state in
            if state.second != second { (state.second, state.lines) = (second, 0) }
            guard state.lines < Self.perSecond else {
                state.unlogged += 1
                return false
            }
            state.lines += 1
            return true
        }
    }

    /// Refusals not printed so far.
    var unlogged: UInt64 { self.state.withLockedValue { $0.unlogged } }
}

/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, or with `?host=DIRECTORY` a Unix socket.
enum DatabaseArgument {
    static func parse(_ text: String) throws -> PostgresConnection.Configuration {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql", let user = url.user, !user.isEmpty else {
            throw ValidationError("--database \(text): expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        let database = url.path.isEmpty || url.path == "/" ? nil : String(url.path.dropFirst())
        let port = url.port ?? 5432
        if let directory = url.queryItems?.first(where: { $0.name == "host" })?.value {
            return PostgresConnection.Configuration(
                unixSocketPath: "\(directory)/.s.PGSQL.\(port)", username: user, password: url.password, database: database)
        }
        guard let host = url.host, !host.isEmpty else { throw ValidationError("--database \(text): no host (or ?host=SOCKET-DIRECTORY)") }
        return PostgresConnection.Configuration(host: host, port: port, username: user, password: url.password, database: database, tls: .disable)
    }
}

/// Lower-case hex.
enum Hex {
    static func encode(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func decode(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < digits.count {
            guard let high = Self.value(digits[index]), let low = Self.value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
