import Foundation
@_spi(Machine) import GameKitMachine
@_spi(Machine) import GameKitOnline
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// `gk-bench online`'s `scale` work: two gk-rendezvous processes sharing rooms through one real
/// PostgreSQL (scripts/postgres), and rooms of members made here, each a room client (the same
/// machine an online session runs, without the session above it) on a UDP socket of its own at a
/// loopback address of its own (127.1.x.y, so that every member is a source of its own, as
/// players are). A room's host creates it on one instance; its joiners alternate between the
/// instances, so that most rooms span both.
///
/// Figures: `joined` (members whose roster came to hold the whole room), `join_p99_ms` (from a
/// joiner's start until its room's host lists it, across instances for half of them),
/// `rss_mb` and `cpu_pct` (both instances together, from /proc, over the load).
enum OnlineScale {
    /// One member: its driver, its socket, and what it saw when.
    final class Member: @unchecked Sendable {
        let peerID: UInt32
        let started = NIODeadline.now()
        let driver: DatagramDriver<OnlineMachine>
        var channel: Channel?
        private let lock = NIOLock()
        private var seen: [UInt32: NIODeadline] = [:]
        private var code: RoomCode?
        private var failure: RoomError?

        init(peerID: UInt32, request: RoomRequest, rendezvous: [SocketAddress], eventLoop: EventLoop) {
            self.peerID = peerID
            var random = MachineRandom.system()
            let record = MemberRecord(peerID: peerID, displayName: "member \(peerID)", keyShare: (0..<32).map { _ in UInt8.random(in: 0...255) })
            let configuration = RoomClient.Configuration(rendezvous: rendezvous, sessionKey: OnlineScale.sessionKey, request: request, record: record)
            let room = RoomClient(configuration: configuration, clock: .system(), now: .now(), random: random.split())
            var machine = OnlineMachine(room: room, paths: nil, random: random.split())
            machine.start(hostCandidates: [], now: .now())
            weak var weakSelf: Member?
            self.driver = DatagramDriver(machine: machine, eventLoop: eventLoop) { event in weakSelf?.record(event) }
            weakSelf = self
        }

        private func record(_ event: RoomEvent) {
            self.lock.withLock {
                switch event {
                case .joined(let code, _): self.code = code
                case .memberJoined(let record): self.seen[record.peerID] = self.seen[record.peerID] ?? .now()
                case .failed(let error): self.failure = error
                default: break
                }
            }
        }

        var roomCode: RoomCode? { self.lock.withLock { self.code } }
        var failed: RoomError? { self.lock.withLock { self.failure } }
        func sawAt(_ peer: UInt32) -> NIODeadline? { self.lock.withLock { self.seen[peer] } }
        var seenCount: Int { self.lock.withLock { self.seen.count } }

        /// Binds its socket at `address` and starts registering.
        func start(at address: SocketAddress) async throws {
            let driver = self.driver
            let channel = try await DatagramBootstrap(group: driver.eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(DriverChannelHandler(driver: driver, source: { $0.remoteAddress }))
                    }
                }
                .bind(to: address).get()
            self.channel = channel
            try await driver.eventLoop.submit { driver.attach(UDPChannelSocket(channel: channel, segmentationOffload: false)) }.get()
        }

        func stop() async {
            _ = self.driver.perform { machine, now in machine.leave(now: now) }
            _ = await self.driver.shutdown(flushLimit: .milliseconds(50)) { _, _ in }
            try? await self.channel?.close()
        }
    }

    static let sessionKey: UInt64 = 0x5CA1_E000

    /// A loopback address of its own for member `index` (127.1.0.1 onwards; 250 a /24).
    static func address(of index: Int) throws -> SocketAddress {
        try SocketAddress(ipAddress: "127.1.\(index / 250).\(index % 250 + 1)", port: 0)
    }

    /// Process CPU seconds (user and system) and resident megabytes, from /proc.
    static func usage(of pid: Int32) -> (cpu: Double, rssMB: Double)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { line in
            Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return ((user + system) / ticks, (rss ?? 0) / 1024)
    }

    static func run(rooms: Int, peersPerRoom: Int, membersPerSecond: Double, root: URL, executables: URL) async throws -> [String: Any] {
        // A socket per member.
        RendezvousService.raiseDescriptorLimit()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-scale-\(getpid())")
        // scripts/postgres makes the cluster's directory itself (owned by the server's user).
        let database = FileManager.default.temporaryDirectory.appendingPathComponent("ogk-scale-db-\(getpid())").path
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let postgres = ChildProcess(root.appendingPathComponent("scripts/postgres").path, ["start", database], name: "postgres", captureErrors: true)
        try postgres.start()
        // Stopped however this ends, even if it never said it was up (a server may have started).
        defer {
            let stop = ChildProcess(root.appendingPathComponent("scripts/postgres").path, ["stop", database], name: "postgres")
            try? stop.start()
            _ = stop.waitForExit(timeout: 30)
            postgres.terminate()
        }
        // The URL is printed once the server accepts connections. (The script's end is not waited
        // for: Foundation sees it running while the server it started lives.)
        let started = Date()
        while postgres.lines.last(where: { $0.hasPrefix("postgres://") }) == nil, Date().timeIntervalSince(started) < 60 {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        guard let url = postgres.lines.last(where: { $0.hasPrefix("postgres://") }) else {
            return ["work": "scale", "error": "PostgreSQL did not start: \(postgres.errorTail ?? "")"]
        }
        let key = scratch.appendingPathComponent("signing.key").path
        var instances: [ChildProcess] = []
        defer {
            for instance in instances {
                instance.send(SIGINT)
                if !instance.waitForExit(timeout: 10) { instance.terminate() }
            }
        }
        let ports = [7878, 7879]
        for (index, port) in ports.enumerated() {
            let instance = ChildProcess(
                executables.appendingPathComponent("gk-rendezvous").path,
                [
                    "--listen", "127.0.0.1:\(port)", "--database", url, "--instance", "scale-\(index)", "--key", key,
                    "--duration", "600", "--stats-interval", "3600",
                ], name: "rendezvous \(index)")
            try instance.start()
            instances.append(instance)
            guard instance.waitForObject(timeout: 20, where: { $0["event"] as? String == "listening" }) != nil else {
                return ["work": "scale", "error": "gk-rendezvous \(index) did not start"]
            }
        }
        let addresses = try ports.map { try SocketAddress(ipAddress: "127.0.0.1", port: $0) }
        let group = MultiThreadedEventLoopGroup.singleton
        let before = instances.map { usage(of: $0.processIdentifier)?.cpu ?? 0 }
        let loadStart = NIODeadline.now()
        let pause = TimeAmount.nanoseconds(Int64(1e9 / membersPerSecond))

        // Hosts first: each creates its room on instance (room % 2).
        var hosts: [Member] = []
        for room in 0..<rooms {
            let primary = room % 2
            let host = Member(
                peerID: UInt32(room * peersPerRoom + 1), request: .create, rendezvous: [addresses[primary], addresses[1 - primary]],
                eventLoop: group.next())
            try await host.start(at: address(of: room * peersPerRoom))
            hosts.append(host)
            try await Task.sleep(nanoseconds: UInt64(pause.nanoseconds))
        }
        // Then the joiners, once their room has a code: joiner k of a room registers with instance
        // (room + k) % 2.
        var joiners: [(Member, room: Int)] = []
        for room in 0..<rooms {
            let host = hosts[room]
            let deadline = NIODeadline.now() + .seconds(10)
            while host.roomCode == nil, host.failed == nil, NIODeadline.now() < deadline { try await Task.sleep(nanoseconds: 5_000_000) }
            guard let code = host.roomCode else { continue }
            for k in 1..<peersPerRoom {
                let primary = (room + k) % 2
                let joiner = Member(
                    peerID: UInt32(room * peersPerRoom + k + 1), request: .join(code), rendezvous: [addresses[primary], addresses[1 - primary]],
                    eventLoop: group.next())
                try await joiner.start(at: address(of: room * peersPerRoom + k))
                joiners.append((joiner, room))
                try await Task.sleep(nanoseconds: UInt64(pause.nanoseconds))
            }
        }
        // Until every roster holds its whole room, or 30 s after the last start.
        let members = hosts + joiners.map(\.0)
        let expected = rooms * peersPerRoom
        let settle = NIODeadline.now() + .seconds(30)
        while NIODeadline.now() < settle, members.filter({ $0.seenCount >= peersPerRoom - 1 }).count < expected {
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let loadSeconds = Double((NIODeadline.now() - loadStart).nanoseconds) / 1e9
        let after = instances.map { usage(of: $0.processIdentifier) }
        let joined = members.filter { $0.seenCount >= peersPerRoom - 1 }.count
        let joinTimes = joiners.compactMap { joiner, room -> Double? in
            hosts[room].sawAt(joiner.peerID).map { Double(($0 - joiner.started).nanoseconds) / 1e6 }
        }
        let (p50, p99) = OnlineBenchmark.figures(joinTimes)
        let cpu = zip(before, after).map { ($1?.cpu ?? $0) - $0 }.reduce(0, +)
        let rss = after.map { $0?.rssMB ?? 0 }.reduce(0, +)
        for member in members { await member.stop() }
        return [
            "work": "scale", "instances": instances.count, "rooms": rooms, "peers_per_room": peersPerRoom, "joined": joined,
            "expected": expected, "join_p50_ms": p50.map { ($0 * 10).rounded() / 10 } ?? NSNull(),
            "join_p99_ms": p99.map { ($0 * 10).rounded() / 10 } ?? NSNull(), "rss_mb": (rss * 10).rounded() / 10,
            "cpu_pct": (cpu / loadSeconds * 1000).rounded() / 10, "load_s": (loadSeconds * 10).rounded() / 10,
            "members_per_s": membersPerSecond, "failed": members.filter { $0.failed != nil }.count,
        ]
    }
}
