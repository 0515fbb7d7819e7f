import Crypto
@_spi(Fuzzing) @_spi(Machine) import GameKitMachine
import NIOCore

/// Entry points for fuzzing the online layer's parsers and machines (the harness is
/// Fuzz/Sources/OnlineFuzzer): the rendezvous's and relay's messages, a rendezvous fed any
/// datagrams, and a room client fed any answers. No sockets.
@_spi(Fuzzing)
public enum OnlineFuzzingEntryPoints {
    static let sources = (0..<4).map { try! SocketAddress(ipAddress: "198.51.100.\($0 + 1)", port: 4000 + $0) }
    static let server = try! SocketAddress(ipAddress: "192.0.2.1", port: 7878)
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let clock = WallClock(origin: start, originMilliseconds: 1_800_000_000_000)

    /// Decodes `bytes` as a rendezvous message, a relay message and a typed room code; whatever
    /// decodes must survive a round trip.
    public static func decode(_ bytes: [UInt8]) {
        let buffer = ByteBuffer(bytes: bytes)
        FuzzingRoundTrip.check("RendezvousMessage", buffer, decode: { try? RendezvousMessage.decode($0) }, encode: { $0.encoded })
        FuzzingRoundTrip.check("RelayMessage", buffer, decode: { try? RelayMessage.decode($0) }, encode: { $0.encoded })
        if let text = String(validating: bytes, as: UTF8.self), let code = RoomCode(text) {
            FuzzingRoundTrip.require(RoomCode(code.description) == code && RoomCode(code.displayed) == code, "RoomCode: \(text) reads back otherwise")
        }
    }

    /// A rendezvous (with relay) receives the records as datagrams, each from one of four
    /// sources (control bits 0–1); bit 2 moves the clock 1 s first, bit 3 10 s. Besides not
    /// crashing, it must never answer a source with more bytes than that source's datagram
    /// (STUN aside, whose answers RFC 8489 makes larger and which are rate limited).
    public static func serve(_ records: [FuzzingRecord]) {
        var now = Self.start
        var server = RendezvousServer(
            configuration: RendezvousConfiguration(), signingKey: Self.signingKey, clock: Self.clock, now: now, random: MachineRandom(seed: 7))
        for record in records {
            if record.control & 4 != 0 { now = now + .seconds(1) }
            if record.control & 8 != 0 { now = now + .seconds(10) }
            if let deadline = server.nextDeadline, deadline <= now { server.handleTimeout(now: now) }
            Self.drain(&server, now: now)
            let source = Self.sources[Int(record.control & 3)]
            server.handle(datagram: ByteBuffer(bytes: record.bytes), from: source, now: now)
            let answered = Self.drain(&server, now: now)
            let isSTUN = record.bytes.first.map { OnlinePacketType.isSTUN(firstByte: $0) } ?? false
            let isRelayed = record.bytes.first == OnlinePacketType.relayData.rawValue
            if !isSTUN && !isRelayed {
                FuzzingRoundTrip.require(answered[source, default: 0] <= record.bytes.count, "rendezvous answered \(answered[source, default: 0]) bytes to \(record.bytes.count)")
            }
        }
    }

    /// A room client (creating a room, with direct paths) receives the records as datagrams
    /// from the rendezvous (control bit 0 clear) or a stranger; bit 2 moves the clock 1 s.
    public static func client(_ records: [FuzzingRecord]) {
        var now = Self.start
        var random = MachineRandom(seed: 11)
        let configuration = RoomClient.Configuration(
            rendezvous: [Self.server], sessionKey: 1, request: .create, record: MemberRecord(peerID: 5, displayName: "fuzz"))
        let room = RoomClient(configuration: configuration, holder: Self.holderKey, clock: Self.clock, now: now, random: random.split())
        let paths = MemberPaths(
            configuration: .init(localPeerID: 5, localUfrag: "fuzz", localPassword: "fuzzfuzzfuzzfuzzfuzzfuzz", socketAcceptsIPv6: true),
            random: random.split())
        var machine = OnlineMachine(room: room, paths: paths, random: random.split())
        machine.start(hostCandidates: [Self.sources[0]], now: now)
        for record in records {
            if record.control & 4 != 0 { now = now + .seconds(1) }
            if let deadline = machine.nextDeadline, deadline <= now { machine.handleTimeout(now: now) }
            let source = record.control & 1 == 0 ? Self.server : Self.sources[1]
            let datagram = ByteBuffer(bytes: record.bytes)
            if record.bytes.first == OnlinePacketType.relayData.rawValue {
                _ = machine.unwrap(datagram, from: source, now: now)
            } else {
                machine.handle(datagram: datagram, from: source, now: now)
            }
            if record.control & 2 != 0 { machine.carry(ByteBuffer(bytes: [9, 0, 0, 0]), to: 6, now: now) }
            var buffer = ByteBuffer()
            while machine.pollTransmit(now: now, into: &buffer) != nil { buffer.clear() }
            while machine.pollEvent() != nil {}
        }
    }

    @discardableResult
    private static func drain(_ server: inout RendezvousServer, now: NIODeadline) -> [SocketAddress: Int] {
        var sent: [SocketAddress: Int] = [:]
        var buffer = ByteBuffer()
        while let destination = server.pollTransmit(now: now, into: &buffer) {
            sent[destination, default: 0] += buffer.readableBytes
            buffer.clear()
        }
        while server.pollEvent() != nil {}
        return sent
    }

    static let signingKey = try! Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 1, count: 32))
    static let holderKey = try! Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 2, count: 32))
}
