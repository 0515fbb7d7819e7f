import Crypto
@_spi(Machine) import GameKitMachine
import NIOCore
import NetworkImpairment
import Testing

@testable import GameKitOnline

@Suite("Rooms: a rendezvous and its members on the virtual network")
struct RoomTests {
    @Test("A host creates a room; a friend joins with its code; each learns the other's record")
    func createAndJoin() throws {
        var bed = OnlineTestbed()
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let friend = bed.addClient(.join(code), peerID: 2, name: "Bob")
        let met = bed.network.run(for: .seconds(5)) { $0.hosts[1].members == [2] && $0.hosts[friend].members == [1] }
        #expect(met)
        #expect(bed.network.hosts[friend].code == code)
        #expect(bed.network.hosts[1].machine.client.room.members[2]?.displayName == "Bob")
        #expect(bed.network.hosts[1].machine.client.room.members[2]?.keyShare == Array(repeating: UInt8(friend), count: 32))
        // The host heard of the friend through a push, well before its next refresh.
        #expect(bed.network.hosts[1].roomEvents.contains { if case .memberJoined(let record) = $0 { record.peerID == 2 } else { false } })
        #expect(bed.server.currentStatistics.rooms == 1)
        #expect(bed.server.currentStatistics.members == 2)
        // Each learned its address as the rendezvous saw it.
        #expect(bed.network.hosts[friend].machine.client.room.reflexiveAddress == bed.network.hosts[friend].address)
    }

    @Test("A member that leaves is gone from the others at once; one that falls silent, after the member timeout")
    func leavingAndTimingOut() throws {
        var configuration = RendezvousConfiguration()
        configuration.memberTimeout = .seconds(10)
        var bed = OnlineTestbed(configuration: configuration)
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let two = bed.addClient(.join(code), peerID: 2)
        let three = bed.addClient(.join(code), peerID: 3)
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[1].members == [2, 3] })
        bed.network.hosts[two].machine.client.leave(now: bed.network.now)
        let start = bed.network.now
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[1].members == [3] && $0.hosts[three].members == [1] })
        #expect(bed.network.now - start < .seconds(1))
        #expect(bed.network.hosts[two].roomEvents.last == .left)
        // Member 3 goes silent: its path drops everything from now on.
        bed.network.paths[three] = ImpairmentModel(profile: .init(loss: 1), seed: 1)
        let silent = bed.network.now
        #expect(bed.network.run(for: .seconds(20)) { $0.hosts[1].members.isEmpty })
        let gone = bed.network.now - silent
        #expect(gone >= .seconds(8) && gone <= .seconds(11))
        #expect(bed.network.hosts[0].serverEvents.contains(.memberLeft(bed.network.hosts[1].machine.client.room.room!, peerID: 3, timedOut: true)))
    }

    @Test("A wrong code fails with its own error; guessing is limited per source, not for others")
    func wrongCodesAreLimited() throws {
        var bed = OnlineTestbed()
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let wrong = RoomCode(value: (code.value + 1) & ((1 << 30) - 1))!
        var failures: [RoomError?] = []
        for attempt in 0..<7 {
            let port = 6000 + attempt
            let host = bed.addClient(.join(wrong), peerID: 100 + UInt32(attempt), address: try SocketAddress(ipAddress: "203.0.113.5", port: port))
            bed.network.run(for: .seconds(15)) { $0.hosts[host].failure != nil }
            failures.append(bed.network.hosts[host].failure)
        }
        // Five guesses a minute's burst from one address, then "wait".
        #expect(failures.prefix(5).allSatisfy { $0 == .noSuchRoom(wrong) })
        #expect(failures.suffix(2).allSatisfy { $0 == .rateLimited })
        // That source may not join even with the right code now ...
        let sameSource = bed.addClient(.join(code), peerID: 200, address: try SocketAddress(ipAddress: "203.0.113.5", port: 7000))
        bed.network.run(for: .seconds(15)) { $0.hosts[sameSource].failure != nil || $0.hosts[sameSource].code != nil }
        #expect(bed.network.hosts[sameSource].failure == .rateLimited)
        // ... while anyone else still can.
        let other = bed.addClient(.join(code), peerID: 201)
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[other].members == [1] })
        #expect(bed.server.currentStatistics.wrongCodes == 7)
    }

    @Test("A room outlives its members for the idle lifetime, then its code stops working")
    func roomsExpire() throws {
        var configuration = RendezvousConfiguration()
        configuration.roomIdleLifetime = .seconds(60)
        var bed = OnlineTestbed(configuration: configuration)
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        bed.network.hosts[1].machine.client.leave(now: bed.network.now)
        bed.network.run(for: .seconds(2))
        #expect(bed.server.currentStatistics.rooms == 1)
        let early = bed.addClient(.join(code), peerID: 2)
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[early].code == code })
        bed.network.hosts[early].machine.client.leave(now: bed.network.now)
        bed.network.advance(by: .seconds(61))
        #expect(bed.server.currentStatistics.rooms == 0)
        let late = bed.addClient(.join(code), peerID: 3)
        bed.network.run(for: .seconds(5)) { $0.hosts[late].failure != nil }
        #expect(bed.network.hosts[late].failure == .noSuchRoom(code))
    }

    @Test("Rooms are per session: the same code in another game's session finds nothing")
    func roomsArePerSession() throws {
        var bed = OnlineTestbed()
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let stranger = bed.addClient(.join(code), peerID: 2, sessionKey: OnlineTestbed.sessionKey + 1)
        bed.network.run(for: .seconds(5)) { $0.hosts[stranger].failure != nil }
        #expect(bed.network.hosts[stranger].failure == .noSuchRoom(code))
    }

    @Test("A peer ID already in the room is refused unless it is the same member registering again")
    func duplicatePeerIDsAreRefused() throws {
        var bed = OnlineTestbed()
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let twin = bed.addClient(.join(code), peerID: 1)
        bed.network.run(for: .seconds(5)) { $0.hosts[twin].failure != nil }
        #expect(bed.network.hosts[twin].failure == .peerIDTaken)
    }

    @Test("A full room refuses one more")
    func fullRoomsRefuse() throws {
        var configuration = RendezvousConfiguration()
        configuration.maximumMembersPerRoom = 2
        var bed = OnlineTestbed(configuration: configuration)
        let created = bed.createRoom(peerID: 1)
        let code = try #require(created)
        let second = bed.addClient(.join(code), peerID: 2)
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[second].code != nil })
        let third = bed.addClient(.join(code), peerID: 3)
        bed.network.run(for: .seconds(5)) { $0.hosts[third].failure != nil }
        #expect(bed.network.hosts[third].failure == .roomFull)
    }

    @Test("A member registering again agrees with the rendezvous on its record's version, without a storm of updates")
    func recordVersionsConvergeAfterRegisteringAgain() throws {
        var bed = OnlineTestbed()
        var updates = 0
        var silenced = false
        let host = bed.addClient(.create, peerID: 1)
        bed.network.interceptor = { datagram in
            let bytes = datagram.bytes
            if bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) == 13, bytes.getInteger(at: bytes.readerIndex + 1, as: UInt8.self) == 6 {
                updates += 1
            }
            // While silenced, nothing from the rendezvous reaches the member.
            return !(silenced && datagram.source == OnlineTestbed.serverAddress)
        }
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[host].code != nil })
        let code = try #require(bed.network.hosts[host].code)
        let friend = bed.addClient(.join(code), peerID: 2)
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[friend].members == [1] })
        // The member hears nothing for longer than its silence limit: it registers again (the
        // rendezvous then holds its record at a later version than the member's own), and it
        // changes its record.
        silenced = true
        bed.network.advance(by: .seconds(7))
        silenced = false
        bed.network.hosts[host].machine.client.update({ $0.displayName = "renamed" }, now: bed.network.now)
        updates = 0
        bed.network.advance(by: .seconds(20))
        #expect(bed.network.hosts[friend].machine.client.room.members[1]?.displayName == "renamed")
        #expect(updates <= 3, "\(updates) updates")
    }

    @Test("No rendezvous: registration fails after its timeout")
    func unreachableRendezvous() {
        var bed = OnlineTestbed()
        bed.network.paths[0] = ImpairmentModel(profile: .init(loss: 1), seed: 1)
        let client = bed.addClient(.create, peerID: 1)
        let start = bed.network.now
        bed.network.run(for: .seconds(30)) { $0.hosts[client].failure != nil }
        #expect(bed.network.hosts[client].failure == .rendezvousUnreachable)
        #expect(bed.network.now - start == .seconds(10))
    }

    @Test("Under 20 % loss both ways, members still meet and see each other", arguments: 1...5)
    func lossyRendezvous(seed: UInt64) throws {
        var bed = OnlineTestbed(profile: .init(loss: 0.2), seed: seed)
        let host = bed.addClient(.create, peerID: 1, profile: .init(loss: 0.2))
        #expect(bed.network.run(for: .seconds(10)) { $0.hosts[host].code != nil })
        let code = try #require(bed.network.hosts[host].code)
        let friend = bed.addClient(.join(code), peerID: 2, profile: .init(loss: 0.2))
        #expect(bed.network.run(for: .seconds(15)) { $0.hosts[host].members == [2] && $0.hosts[friend].members == [1] })
    }
}
