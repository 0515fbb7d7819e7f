import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitOnline

@Suite("The relay: tickets, rooms and limits")
struct RelayTests {
    /// A room with members 1 and 2, both with their relay ready.
    static func room(_ configuration: RendezvousConfiguration = RendezvousConfiguration()) throws -> (OnlineTestbed, Int, Int) {
        var bed = OnlineTestbed(configuration: configuration)
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let friend = bed.addClient(.join(code), peerID: 2)
        let ready = bed.network.run(for: .seconds(5)) { network in
            [1, friend].allSatisfy { network.hosts[$0].machine.client.room.relayReady && network.hosts[$0].members.count == 1 }
        }
        #expect(ready)
        return (bed, 1, friend)
    }

    @Test("Members reach each other through the relay at once, both ways, with the sender's peer ID")
    func relayCarriesBothWays() throws {
        var (bed, one, two) = try Self.room()
        bed.network.hosts[one].toCarry = [(2, ByteBuffer(string: "hello from 1"))]
        bed.network.hosts[two].toCarry = [(1, ByteBuffer(string: "hello from 2"))]
        bed.network.run(for: .seconds(1)) { !$0.hosts[one].relayedPayloads.isEmpty && !$0.hosts[two].relayedPayloads.isEmpty }
        #expect(bed.network.hosts[two].relayedPayloads.map(\.0) == ["hello from 1"])
        #expect(bed.network.hosts[two].relayedPayloads.map(\.1) == [1])
        #expect(bed.network.hosts[one].relayedPayloads.map(\.0) == ["hello from 2"])
        #expect(bed.server.currentStatistics.relayedDatagrams == 2)
    }

    @Test("Datagrams queued before the relay is ready leave once it is")
    func earlyDatagramsWait() throws {
        var bed = OnlineTestbed()
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let friend = bed.addClient(.join(code), peerID: 2)
        // Before the friend's registration is even answered.
        bed.network.hosts[friend].toCarry = [(1, ByteBuffer(string: "early"))]
        bed.network.run(for: .seconds(2)) { !$0.hosts[1].relayedPayloads.isEmpty }
        #expect(bed.network.hosts[1].relayedPayloads.map(\.0) == ["early"])
    }

    @Test("Forged tickets, copied allocations and strangers' datagrams are dropped and counted, never answered with data")
    func unauthenticatedTrafficIsDropped() throws {
        var (bed, one, _) = try Self.room()
        let stranger = try SocketAddress(ipAddress: "198.51.100.7", port: 4444)
        let forger = Curve25519.Signing.PrivateKey()
        let holder = Curve25519.Signing.PrivateKey()
        let room = bed.network.hosts[one].machine.client.room.room!
        let forged = try RelayTicket(room: room, peerID: 66, expiresAt: OnlineTestbed.clockOrigin + 600_000, byteLimit: 1 << 20,
                                     holderKey: Array(holder.publicKey.rawRepresentation)).signed(by: forger)
        let allocation = try RelayMessage.allocation(ticket: forged, timestampMilliseconds: OnlineTestbed.clockOrigin + 1000, holder: holder)
        var replies: [RelayMessage] = []
        bed.network.interceptor = { datagram in
            if datagram.destination == stranger, let message = try? RelayMessage.decode(datagram.bytes) { replies.append(message) }
            return true
        }
        bed.network.injected.append(.init(source: stranger, destination: OnlineTestbed.serverAddress, bytes: allocation.encoded))
        bed.network.injected.append(.init(source: stranger, destination: OnlineTestbed.serverAddress, bytes: RelayMessage.data(peer: 1, payload: ByteBuffer(string: "spam")).encoded))
        bed.network.run(for: .seconds(1))
        #expect(replies == [.refused(.badTicket)])
        #expect(bed.network.hosts[one].relayedPayloads.isEmpty)
        #expect(bed.server.currentStatistics.droppedUnauthenticated == 2)
        #expect(bed.server.currentStatistics.relayedDatagrams == 0)
    }

    @Test("A relay carries only within a room")
    func relayStaysInsideTheRoom() throws {
        var (bed, one, _) = try Self.room()
        let created = bed.createRoom(peerID: 3)
        _ = try #require(created)
        let other = bed.network.hosts.count - 1
        #expect(bed.network.run(for: .seconds(2)) { $0.hosts[other].machine.client.room.relayReady })
        // Member 3 (another room) addresses member 1: nothing arrives.
        bed.network.hosts[other].toCarry = [(1, ByteBuffer(string: "not yours"))]
        bed.network.run(for: .seconds(1))
        #expect(bed.network.hosts[one].relayedPayloads.isEmpty)
        #expect(bed.server.currentStatistics.droppedUndeliverable == 1)
    }

    @Test("A ticket's byte limit holds")
    func byteLimitHolds() throws {
        var configuration = RendezvousConfiguration()
        configuration.ticketByteLimit = 1000
        var (bed, one, two) = try Self.room(configuration)
        bed.network.hosts[one].toCarry = (0..<20).map { _ in (2, ByteBuffer(repeating: 9, count: 94)) }
        bed.network.run(for: .seconds(1))
        // 100 bytes each with the relay header: ten fit.
        #expect(bed.network.hosts[two].relayedPayloads.count == 10)
        #expect(bed.server.currentStatistics.droppedUndeliverable == 10)
    }

    @Test("A flood from one member is capped at its rate; another room's traffic still passes")
    func floodsAreCappedPerMember() throws {
        var configuration = RendezvousConfiguration()
        configuration.relayBytesPerSecond = 40_000
        var (bed, one, two) = try Self.room(configuration)
        let created = bed.createRoom(peerID: 10)
        let code = try #require(created)
        let ten = bed.network.hosts.count - 1
        let eleven = bed.addClient(.join(code), peerID: 11)
        #expect(bed.network.run(for: .seconds(3)) { $0.hosts[eleven].machine.client.room.relayReady && $0.hosts[ten].machine.client.room.relayReady })
        // Member 1 floods: 1000 datagrams of 1000 bytes at one instant (a quarter second's worth
        // fits the burst: about ten).
        bed.network.hosts[one].toCarry = (0..<1000).map { _ in (2, ByteBuffer(repeating: 9, count: 994)) }
        bed.network.hosts[ten].toCarry = [(11, ByteBuffer(string: "still here"))]
        bed.network.run(for: .milliseconds(100))
        let through = bed.network.hosts[two].relayedPayloads.count
        #expect(through == 10)
        #expect(bed.server.currentStatistics.droppedRateLimited == 990)
        #expect(bed.network.hosts[eleven].relayedPayloads.map(\.0) == ["still here"])
    }
}
