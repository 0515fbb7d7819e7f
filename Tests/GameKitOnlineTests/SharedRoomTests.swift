import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitOnline

/// Two rendezvous instances whose rooms are shared through a store. The store here is a plain
/// table that does what PostgreSQL does for gk-rendezvous (PostgresRooms): applies the
/// commands and tells every instance about each room that changed. The real database is tested
/// with real processes (OnlineDatabaseTests).
@Suite("Rooms shared by several rendezvous instances")
struct SharedRoomTests {
    struct Store {
        var rooms: [RoomHandle: SharedRoom] = [:]

        /// Applies a command from `instance`; returns the rooms to tell every instance about, and
        /// the lookup answer for that instance, if any.
        mutating func apply(_ command: StoreCommand, from instance: String) -> (changed: [RoomHandle], answer: SharedRoomsInput?) {
            switch command {
            case .createRoom(let handle, let sessionKey, let code, let relay):
                self.rooms[handle] = SharedRoom(handle: handle, sessionKey: sessionKey, code: code, relay: relay, members: [])
                return ([], nil)
            case .putMember(let handle, let record, let holderKey):
                self.rooms[handle]?.members.removeAll { $0.record.peerID == record.peerID }
                self.rooms[handle]?.members.append(.init(record: record, holderKey: holderKey, instance: instance))
                return ([handle], nil)
            case .removeMember(let handle, let peerID):
                self.rooms[handle]?.members.removeAll { $0.record.peerID == peerID && $0.instance == instance }
                return ([handle], nil)
            case .lookup(let id, let sessionKey, let code):
                let room = self.rooms.values.first { $0.sessionKey == sessionKey && $0.code == code }
                return ([], .lookedUp(id, room: room))
            }
        }
    }

    static let second = try! SocketAddress(ipAddress: "192.0.2.2", port: 7878)

    @Test("Members registered with different instances see each other and share the room's relay")
    func membersAcrossInstancesMeet() throws {
        var configuration = RendezvousConfiguration()
        configuration.sharedInstance = "one"
        configuration.relayAddress = OnlineTestbed.serverAddress
        var bed = OnlineTestbed(configuration: configuration)
        var secondConfiguration = configuration
        secondConfiguration.sharedInstance = "two"
        secondConfiguration.relayAddress = Self.second
        // The second instance: the same signing key, so tickets are good at either relay.
        let server = RendezvousServer(
            configuration: secondConfiguration, signingKey: bed.signingKey, clock: bed.clock, now: bed.network.now, random: MachineRandom(seed: 99))
        let two = bed.network.add(OnlineHost(machine: .server(server), address: Self.second))
        var store = Store()
        // The store at work between settles: what a server asks for is done at once.
        func sync(_ bed: inout OnlineTestbed) -> Bool {
            var worked = false
            for (index, name) in [(0, "one"), (two, "two")] {
                let events = bed.network.hosts[index].events
                bed.network.hosts[index].events.removeAll()
                for case .server(.store(let command)) in events {
                    worked = true
                    let (changed, answer) = store.apply(command, from: name)
                    if let answer { bed.network.hosts[index].machine.applyShared(answer, now: bed.network.now) }
                    for handle in changed {
                        let input: SharedRoomsInput = store.rooms[handle].map { .room($0) } ?? .roomGone(handle)
                        for other in [0, two] { bed.network.hosts[other].machine.applyShared(input, now: bed.network.now) }
                    }
                }
                bed.network.hosts[index].events.append(contentsOf: events.filter { if case .server(.store) = $0 { false } else { true } })
            }
            return worked
        }
        let alice = bed.addClient(.create, peerID: 1)
        var code: RoomCode?
        for _ in 0..<100 where code == nil {
            bed.network.run(for: .milliseconds(50))
            while sync(&bed) { bed.network.run(for: .milliseconds(1)) }
            code = bed.network.hosts[alice].code
        }
        let room = try #require(code)
        var bobConfiguration = RoomClient.Configuration(
            rendezvous: [Self.second], sessionKey: OnlineTestbed.sessionKey, request: .join(room), record: MemberRecord(peerID: 2, displayName: "Bob"))
        bobConfiguration.timing.registrationTimeout = .seconds(10)
        var random = MachineRandom(seed: 5)
        var machine = OnlineMachine(room: RoomClient(configuration: bobConfiguration, clock: bed.clock, now: bed.network.now, random: random.split()), paths: nil, random: random.split())
        machine.start(hostCandidates: [], now: bed.network.now)
        let bob = bed.network.add(OnlineHost(machine: .client(machine), address: try SocketAddress(ipAddress: "10.0.0.50", port: 5000)))
        var met = false
        for _ in 0..<200 where !met {
            bed.network.run(for: .milliseconds(50))
            while sync(&bed) { bed.network.run(for: .milliseconds(1)) }
            met = bed.network.hosts[alice].members == [2] && bed.network.hosts[bob].members == [1]
        }
        #expect(met)
        #expect(bed.network.hosts[bob].code == room)
        // Both allocate at the room's relay (the first instance's), and reach each other there.
        #expect(bed.network.hosts[bob].machine.client.room.relayReady)
        bed.network.hosts[bob].toCarry = [(1, ByteBuffer(string: "across instances"))]
        bed.network.run(for: .seconds(1)) { !$0.hosts[alice].relayedPayloads.isEmpty }
        #expect(bed.network.hosts[alice].relayedPayloads.map(\.0) == ["across instances"])
    }
}

extension OnlineNode {
    mutating func applyShared(_ input: SharedRoomsInput, now: NIODeadline) {
        guard case .server(var server) = self.role else { return }
        server.apply(input, now: now)
        self.role = .server(server)
    }
}
