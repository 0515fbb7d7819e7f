import Foundation
@_spi(Machine) import GameKitOnline
import Logging
import NIOCore
import PostgresNIO

/// Rooms shared by several gk-rendezvous instances through PostgreSQL (PROTOCOL §18.10).
///
/// Each instance writes what its machine says (``StoreCommand``s, in order) and tells the others
/// with `NOTIFY ogk_rooms, '<room>'`; it listens on that channel and hands each changed room to
/// its machine. Every second it renews its members' rows (they expire 10 s after the last renewal,
/// so a killed instance's members go unless they registered again elsewhere), removes expired
/// rows, and every 2 s reads again every room it has members in (which heals a missed
/// notification, and is all a database without LISTEN/NOTIFY gets). A room whose relay's
/// instance has not been heard of for 3 s is taken over: its members are moved to this
/// instance's relay.
///
/// The schema uses only BIGINT, INT, BYTEA, TEXT and TIMESTAMPTZ columns, primary keys, one
/// unique constraint and a cascading foreign key: CockroachDB and YugabyteDB accept it as is
/// (they lack LISTEN/NOTIFY; the periodic reads carry the changes there, within 2 s).
actor PostgresRooms {
    static let schema = [
        """
        CREATE TABLE IF NOT EXISTS ogk_rooms (
            handle BIGINT PRIMARY KEY,
            session_key BIGINT NOT NULL,
            code INT NOT NULL,
            relay BYTEA NOT NULL,
            relay_instance TEXT NOT NULL,
            expires_at TIMESTAMPTZ,
            UNIQUE (session_key, code))
        """,
        """
        CREATE TABLE IF NOT EXISTS ogk_members (
            room BIGINT NOT NULL REFERENCES ogk_rooms (handle) ON DELETE CASCADE,
            peer BIGINT NOT NULL,
            record BYTEA NOT NULL,
            holder BYTEA NOT NULL,
            instance TEXT NOT NULL,
            expires_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (room, peer))
        """,
        """
        CREATE TABLE IF NOT EXISTS ogk_instances (
            id TEXT PRIMARY KEY,
            relay BYTEA NOT NULL,
            seen_at TIMESTAMPTZ NOT NULL)
        """,
    ]
    static let channel = "ogk_rooms"
    /// A member's row lives this long after its instance last renewed it.
    static let memberLifetime = 10
    /// An instance not heard of for this long has lost its rooms' relaying.
    static let instanceSilence = 3
    /// Every so many seconds, the rooms with members here are read again (and their relays
    /// taken over if their instance fell silent).
    static let resyncInterval = 2

    let instance: String
    let relay: SocketAddress?
    let roomLifetime: Int
    let configuration: PostgresConnection.Configuration
    let logger: Logger
    private var connection: PostgresConnection?
    private var listening: PostgresConnection?
    private var closed = false
    private var service: RendezvousService?

    init(instance: String, relay: SocketAddress?, roomLifetimeSeconds: Int, configuration: PostgresConnection.Configuration, logger: Logger) {
        self.instance = instance
        self.relay = relay
        self.roomLifetime = roomLifetimeSeconds
        self.configuration = configuration
        self.logger = logger
    }

    /// Connects and makes the tables (before the rendezvous serves).
    func open() async throws {
        let connection = try await PostgresConnection.connect(configuration: self.configuration, id: 1, logger: self.logger)
        do {
            // Instances starting together race to create the tables (PostgreSQL's CREATE TABLE IF
            // NOT EXISTS is not safe against that): the loser tries again.
            for attempt in 1...10 {
                do {
                    for statement in Self.schema {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                    }
                    break
                } catch where attempt < 10 {
                    try await Task.sleep(nanoseconds: 100_000_000)
                }
            }
            self.connection = connection
            try await self.heartbeat()
        } catch {
            try? await connection.close()
            self.connection = nil
            throw error
        }
    }

    /// Runs until cancelled: the machine's commands, the notifications, the periodic work.
    func run(service: RendezvousService, commands: AsyncStream<StoreCommand>) async {
        self.service = service
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen() }
            group.addTask {
                for await command in commands { await self.perform(command) }
            }
            group.addTask {
                var tick = 0
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    tick += 1
                    await self.periodic(resync: tick % Self.resyncInterval == 0)
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Closes both connections (which ends the listening and any query under way).
    func close() async {
        self.closed = true
        let connections = [self.connection, self.listening].compactMap { $0 }
        self.connection = nil
        self.listening = nil
        for connection in connections { try? await connection.close() }
    }

    // MARK: - Commands

    private func perform(_ command: StoreCommand) async {
        guard let connection = self.connection else { return }
        do {
            switch command {
            case .createRoom(let handle, let sessionKey, let code, let relay):
                let relayBytes = ByteBuffer(bytes: SharedRoom.storedBytes(of: relay))
                try await connection.query(
                    """
                    INSERT INTO ogk_rooms (handle, session_key, code, relay, relay_instance) \
                    VALUES (\(Int64(bitPattern: handle.rawValue)), \(Int64(bitPattern: sessionKey)), \(Int32(code.value)), \(relayBytes), \(self.instance)) \
                    ON CONFLICT (handle) DO NOTHING
                    """, logger: self.logger)
            case .putMember(let handle, let record, let holderKey):
                let room = Int64(bitPattern: handle.rawValue)
                try await connection.query(
                    """
                    INSERT INTO ogk_members (room, peer, record, holder, instance, expires_at) \
                    VALUES (\(room), \(Int64(record.peerID)), \(ByteBuffer(bytes: record.storedBytes)), \(ByteBuffer(bytes: holderKey)), \(self.instance), \
                    now() + make_interval(secs => \(Self.memberLifetime))) \
                    ON CONFLICT (room, peer) DO UPDATE SET record = excluded.record, holder = excluded.holder, \
                    instance = excluded.instance, expires_at = excluded.expires_at
                    """, logger: self.logger)
                try await connection.query("UPDATE ogk_rooms SET expires_at = NULL WHERE handle = \(room)", logger: self.logger)
                try await self.notify(handle)
            case .removeMember(let handle, let peerID):
                let room = Int64(bitPattern: handle.rawValue)
                try await connection.query(
                    "DELETE FROM ogk_members WHERE room = \(room) AND peer = \(Int64(peerID)) AND instance = \(self.instance)", logger: self.logger)
                try await self.notify(handle)
            case .lookup(let id, let sessionKey, let code):
                let rows = try await connection.query(
                    "SELECT handle FROM ogk_rooms WHERE session_key = \(Int64(bitPattern: sessionKey)) AND code = \(Int32(code.value))",
                    logger: self.logger)
                var handle: Int64?
                for try await (value) in rows.decode(Int64.self) { handle = value }
                var room: SharedRoom?
                if let handle { room = try await self.load(RoomHandle(rawValue: UInt64(bitPattern: handle))) }
                self.service?.apply(.lookedUp(id, room: room))
            }
        } catch {
            self.warn("database", ["command": "\(command)", "error": "\(String(reflecting: error))"])
            if case .lookup(let id, _, _) = command { self.service?.apply(.lookupFailed(id)) }
        }
    }

    private func notify(_ handle: RoomHandle) async throws {
        let payload = String(UInt64(handle.rawValue))
        try await self.connection?.query(PostgresQuery(unsafeSQL: "NOTIFY \(Self.channel), '\(payload)'"), logger: self.logger)
    }

    /// The room as the database holds it, or nil when it is gone.
    private func load(_ handle: RoomHandle) async throws -> SharedRoom? {
        guard let connection = self.connection else { return nil }
        let key = Int64(bitPattern: handle.rawValue)
        let rooms = try await connection.query("SELECT session_key, code, relay FROM ogk_rooms WHERE handle = \(key)", logger: self.logger)
        var found: (Int64, Int32, ByteBuffer)?
        for try await row in rooms.decode((Int64, Int32, ByteBuffer).self) { found = row }
        guard let (sessionKey, codeValue, relayBytes) = found, let code = RoomCode(value: UInt32(bitPattern: codeValue)) else { return nil }
        let rows = try await connection.query(
            "SELECT record, holder, instance FROM ogk_members WHERE room = \(key) AND expires_at > now() ORDER BY peer", logger: self.logger)
        var members: [SharedRoom.Member] = []
        for try await (record, holder, instance) in rows.decode((ByteBuffer, ByteBuffer, String).self) {
            guard let decoded = try? MemberRecord(storedBytes: Array(record.readableBytesView)) else { continue }
            members.append(SharedRoom.Member(record: decoded, holderKey: Array(holder.readableBytesView), instance: instance))
        }
        let relay = try SharedRoom.relay(fromStored: Array(relayBytes.readableBytesView))
        return SharedRoom(handle: handle, sessionKey: UInt64(bitPattern: sessionKey), code: code, relay: relay, members: members)
    }

    private func refresh(_ handle: RoomHandle) async {
        do {
            if let room = try await self.load(handle) {
                self.service?.apply(.room(room))
            } else {
                self.service?.apply(.roomGone(handle))
            }
        } catch {
            self.warn("database", ["room": "\(handle)", "error": "\(String(reflecting: error))"])
        }
    }

    // MARK: - Notifications

    /// Listens on its own connection (a listening connection cannot run queries in between),
    /// connecting again after a failure.
    private func listen() async {
        while !Task.isCancelled, !self.closed {
            do {
                let connection = try await PostgresConnection.connect(configuration: self.configuration, id: 2, logger: self.logger)
                guard !self.closed else {
                    try? await connection.close()
                    return
                }
                self.listening = connection
                defer { Task { try? await connection.close() } }
                try await connection.listen(on: Self.channel) { notifications in
                    for try await notification in notifications {
                        guard let value = UInt64(notification.payload) else { continue }
                        await self.refresh(RoomHandle(rawValue: value))
                    }
                }
            } catch {
                self.warn("database listen", ["error": "\(String(reflecting: error))"])
                try? await Task.sleep(nanoseconds: 1_000_000_000)
            }
        }
    }

    /// A database error, logged unless the instance is stopping (then queries in flight end with
    /// the connections it closes, which is no news).
    private func warn(_ message: Logger.Message, _ metadata: Logger.Metadata) {
        guard !self.closed else { return }
        self.logger.warning(message, metadata: metadata)
    }

    // MARK: - Periodic work

    private func heartbeat() async throws {
        guard let connection = self.connection else { return }
        let relay = ByteBuffer(bytes: SharedRoom.storedBytes(of: self.relay))
        try await connection.query(
            """
            INSERT INTO ogk_instances (id, relay, seen_at) VALUES (\(self.instance), \(relay), now()) \
            ON CONFLICT (id) DO UPDATE SET relay = excluded.relay, seen_at = excluded.seen_at
            """, logger: self.logger)
        try await connection.query(
            "UPDATE ogk_members SET expires_at = now() + make_interval(secs => \(Self.memberLifetime)) WHERE instance = \(self.instance)",
            logger: self.logger)
    }

    private func periodic(resync: Bool) async {
        guard let connection = self.connection else { return }
        do {
            try await self.heartbeat()
            // Members whose instance stopped renewing them.
            var changed = Set<Int64>()
            let expired = try await connection.query("DELETE FROM ogk_members WHERE expires_at <= now() RETURNING room", logger: self.logger)
            for try await room in expired.decode(Int64.self) { changed.insert(room) }
            // Rooms that just became empty start their idle lifetime; rooms past it go.
            try await connection.query(
                """
                UPDATE ogk_rooms SET expires_at = now() + make_interval(secs => \(self.roomLifetime)) \
                WHERE expires_at IS NULL AND NOT EXISTS (SELECT 1 FROM ogk_members WHERE room = handle)
                """, logger: self.logger)
            let gone = try await connection.query("DELETE FROM ogk_rooms WHERE expires_at <= now() RETURNING handle", logger: self.logger)
            for try await room in gone.decode(Int64.self) { changed.insert(room) }
            if resync {
                // Every room this instance has members in: taken over when its relay's instance
                // fell silent, then read again.
                let mine = try await connection.query(
                    "SELECT DISTINCT room FROM ogk_members WHERE instance = \(self.instance)", logger: self.logger)
                var rooms: [Int64] = []
                for try await room in mine.decode(Int64.self) { rooms.append(room) }
                let relay = ByteBuffer(bytes: SharedRoom.storedBytes(of: self.relay))
                for room in rooms {
                    let taken = try await connection.query(
                        """
                        UPDATE ogk_rooms SET relay = \(relay), relay_instance = \(self.instance) \
                        WHERE handle = \(room) AND relay_instance <> \(self.instance) AND NOT EXISTS ( \
                        SELECT 1 FROM ogk_instances WHERE id = relay_instance AND seen_at > now() - make_interval(secs => \(Self.instanceSilence))) \
                        RETURNING handle
                        """, logger: self.logger)
                    for try await _ in taken.decode(Int64.self) {
                        self.logger.info("relay taken over", metadata: ["room": "\(UInt64(bitPattern: room))"])
                    }
                    changed.insert(room)
                }
            }
            for room in changed.sorted() {
                let handle = RoomHandle(rawValue: UInt64(bitPattern: room))
                try await self.notify(handle)
                await self.refresh(handle)
            }
        } catch {
            self.warn("database", ["error": "\(String(reflecting: error))"])
        }
    }
}
