@_spi(Machine) import GameKitMachine
import GameKitTraversal
import NIOCore
import NetworkImpairment
import Testing

@_spi(Machine) @testable import GameKitOnline

@Suite("Direct paths to room members")
struct DirectPathTests {
    static let alice = try! SocketAddress(ipAddress: "198.51.100.10", port: 4000)
    static let bob = try! SocketAddress(ipAddress: "203.0.113.20", port: 5000)

    /// Alice (peer 1) and Bob (peer 2) in one room, both relays ready; `filters`: both behind
    /// NATs that drop what they have not sent to.
    static func room(filters: Bool = false, bobDirect: Bool = true) throws -> OnlineTestbed {
        var bed = OnlineTestbed()
        let a = bed.addClient(.create, peerID: 1, address: Self.alice, directPaths: true, hostCandidates: [Self.alice], filters: filters)
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[a].code != nil })
        let code = try #require(bed.network.hosts[a].code)
        let b = bed.addClient(.join(code), peerID: 2, address: Self.bob, directPaths: bobDirect, hostCandidates: [Self.bob], filters: filters)
        #expect(bed.network.run(for: .seconds(5)) { network in
            network.hosts[a].machine.client.room.relayReady && network.hosts[b].machine.client.room.relayReady
                && network.hosts[a].members == [2] && network.hosts[b].members == [1]
        })
        return bed
    }

    static func direct(_ host: OnlineHost, to peer: UInt32) -> SocketAddress? {
        if case .direct(let address) = host.machine.client.paths?.route(to: peer) { return address }
        return nil
    }

    @Test("Sending to a member starts checks; both ends find the direct path", arguments: [false, true])
    func membersFindTheDirectPath(filters: Bool) throws {
        var bed = try Self.room(filters: filters)
        bed.network.hosts[1].toCarry = [(2, ByteBuffer(string: "hello"))]
        let found = bed.network.run(for: .seconds(5)) { Self.direct($0.hosts[1], to: 2) != nil && Self.direct($0.hosts[2], to: 1) != nil }
        #expect(found)
        #expect(Self.direct(bed.network.hosts[1], to: 2) == Self.bob)
        #expect(Self.direct(bed.network.hosts[2], to: 1) == Self.alice)
        #expect(bed.network.hosts[1].pathChanges.map(\.1) == [.direct(Self.bob)])
        // The first datagram went through the relay meanwhile.
        #expect(bed.network.hosts[2].relayedPayloads.map(\.0) == ["hello"])
    }

    @Test("A direct path that dies falls back to the relay; checks start again later")
    func deadDirectPathsFallBack() throws {
        var bed = try Self.room()
        bed.network.hosts[1].toCarry = [(2, ByteBuffer(string: "hello"))]
        #expect(bed.network.run(for: .seconds(5)) { Self.direct($0.hosts[1], to: 2) != nil && Self.direct($0.hosts[2], to: 1) != nil })
        // From now on nothing passes between the two; the rendezvous still reaches both.
        bed.network.interceptor = { datagram in
            !([Self.alice, Self.bob].contains(datagram.source) && [Self.alice, Self.bob].contains(datagram.destination))
        }
        let cut = bed.network.now
        #expect(bed.network.run(for: .seconds(10)) { Self.direct($0.hosts[1], to: 2) == nil && Self.direct($0.hosts[2], to: 1) == nil })
        let fallback = bed.network.now - cut
        #expect(fallback <= .seconds(7))
        #expect(bed.network.hosts[1].pathChanges.last?.1 == .relayed)
        // The relay carries at once.
        bed.network.hosts[1].toCarry = [(2, ByteBuffer(string: "still here"))]
        bed.network.run(for: .seconds(1)) { $0.hosts[2].relayedPayloads.count == 2 }
        #expect(bed.network.hosts[2].relayedPayloads.map(\.0) == ["hello", "still here"])
        // The path comes back: after the retry delay, sending to the member checks again.
        bed.network.interceptor = nil
        bed.network.advance(by: .seconds(15))
        bed.network.hosts[1].toCarry = [(2, ByteBuffer(string: "again"))]
        #expect(bed.network.run(for: .seconds(5)) { Self.direct($0.hosts[1], to: 2) != nil && Self.direct($0.hosts[2], to: 1) != nil })
    }

    @Test("A member that selects the path first is known by the address it nominated it from")
    func theNominatingAddressIsTheMembersBeforeThisSideSelects() throws {
        var bed = try Self.room()
        // Alice (1) controls and nominates. Her answers to Bob's checks are lost, so Bob never
        // selects the path himself, while Alice selects it and sends from her address.
        bed.network.interceptor = { datagram in
            !(datagram.source == Self.alice && datagram.destination == Self.bob && datagram.bytes.getInteger(at: datagram.bytes.readerIndex, as: UInt16.self) == 0x0101)
        }
        bed.network.hosts[1].toCarry = [(2, ByteBuffer(string: "hello"))]
        #expect(bed.network.run(for: .seconds(5)) { Self.direct($0.hosts[1], to: 2) != nil })
        #expect(Self.direct(bed.network.hosts[2], to: 1) == nil)
        let told = bed.network.hosts[2].roomEvents.filter { if case .memberSendsFrom = $0 { true } else { false } }
        #expect(told == [.memberSendsFrom(1, Self.alice)])
        // Alice is told nothing of the kind: Bob does not nominate.
        #expect(!bed.network.hosts[1].roomEvents.contains { if case .memberSendsFrom = $0 { true } else { false } })
    }

    @Test("The online layer takes a member's datagrams from every address it nominated or was reached at, and routes to it, until it leaves")
    func memberSourcesAndRoutesFollowTheRoom() throws {
        let other = try SocketAddress(ipAddress: "192.0.2.7", port: 7000)
        var bed = try Self.room()
        let relay = try #require(bed.network.hosts[2].machine.client.room.relay)
        #expect(bed.network.hosts[2].machine.client.route(MemberAddress.of(1)) == .relay(relay, peer: 1))
        #expect(bed.network.hosts[2].machine.client.headroom(for: MemberAddress.of(1)) == OnlineMachine.relayHeaderSize)
        bed.network.hosts[1].toCarry = [(2, ByteBuffer(string: "hello"))]
        #expect(bed.network.run(for: .seconds(5)) { Self.direct($0.hosts[1], to: 2) != nil && Self.direct($0.hosts[2], to: 1) != nil })
        var bob = bed.network.hosts[2].machine.client
        #expect(bob.transportSource(for: Self.alice) == MemberAddress.of(1))
        #expect(bob.route(MemberAddress.of(1)) == .direct(Self.alice))
        #expect(bob.headroom(for: MemberAddress.of(1)) == 0)
        // Anyone else is themselves, and goes as addressed.
        #expect(bob.transportSource(for: other) == other)
        #expect(bob.route(other) == .asIs)
        // A member unknown to the room is carried (the relay drops it).
        #expect(bob.route(MemberAddress.of(9)) == .relay(relay, peer: 9))
        // Alice leaves: her address is hers no more.
        bed.network.hosts[1].machine.client.leave(now: bed.network.now)
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[2].members.isEmpty })
        bob = bed.network.hosts[2].machine.client
        #expect(bob.transportSource(for: Self.alice) == Self.alice)
    }

    @Test("A member that takes no direct path is reached through the relay only")
    func relayOnlyMembersStayRelayed() throws {
        var bed = try Self.room(bobDirect: false)
        bed.network.hosts[1].toCarry = [(2, ByteBuffer(string: "hello"))]
        bed.network.run(for: .seconds(5))
        #expect(Self.direct(bed.network.hosts[1], to: 2) == nil)
        #expect(bed.network.hosts[1].pathChanges.isEmpty)
        #expect(bed.network.hosts[2].relayedPayloads.map(\.0) == ["hello"])
    }

    @Test("Checks with the wrong credentials are refused and take no path")
    func forgedChecksAreRefused() throws {
        var bed = try Self.room()
        let mallory = try! SocketAddress(ipAddress: "192.0.2.66", port: 6666)
        // A check that names the right pair but is signed with a guessed password.
        var forger = ConnectivityChecker(
            controlling: true,
            credentials: .init(localUfrag: "u2", localPassword: "x", remoteUfrag: "u1", remotePassword: "not the password"),
            socketAcceptsIPv6: true, now: bed.network.now, random: MachineRandom(seed: 9))
        forger.addRemote(host: [Self.alice], serverReflexive: [])
        forger.handleTimeout(now: bed.network.now)
        let output = forger.pollTransmit()
        let (_, check, _) = try #require(output)
        bed.network.injected.append(.init(source: mallory, destination: Self.alice, bytes: check))
        bed.network.run(for: .seconds(2))
        // Refused, and no path to the forger's address (the check naming Bob makes Alice check
        // Bob's real candidates, which is harmless).
        #expect(Self.direct(bed.network.hosts[1], to: 2) != mallory)
        #expect(bed.network.hosts[1].machine.client.paths!.paths[2]?.checker?.rejectedChecks == 1)
    }

    @Test("Configured STUN servers add their view of this socket to the candidates members are told")
    func configuredSTUNServersAddCandidates() throws {
        var bed = OnlineTestbed()
        // Two STUN servers: one sees Alice as the rendezvous does, one (as through a NAT that
        // maps each destination apart) at another port; a third never answers.
        let same = try SocketAddress(ipAddress: "192.0.2.50", port: 3478)
        let other = try SocketAddress(ipAddress: "192.0.2.51", port: 3478)
        let silent = try SocketAddress(ipAddress: "192.0.2.52", port: 3478)
        bed.addSTUNServer(at: same, portOffset: 0)
        bed.addSTUNServer(at: other, portOffset: 7)
        let a = bed.addClient(
            .create, peerID: 1, address: Self.alice, directPaths: true, hostCandidates: [Self.alice], stunServers: [same, other, silent])
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[a].code != nil })
        let code = try #require(bed.network.hosts[a].code)
        let b = bed.addClient(.join(code), peerID: 2, address: Self.bob, directPaths: true, hostCandidates: [Self.bob])
        let shifted = try SocketAddress(ipAddress: "198.51.100.10", port: 4007)
        let told = bed.network.run(for: .seconds(10)) { network in
            network.hosts[b].machine.client.room.members[1]?.candidates.filter { $0.kind == .serverReflexive }.map(\.address) == [Self.alice, shifted]
        }
        #expect(told, "\(String(describing: bed.network.hosts[b].machine.client.room.members[1]?.candidates))")
        #expect(bed.network.hosts[a].machine.client.reflexiveAddresses == [Self.alice, shifted])
        // Without direct paths, no STUN server is asked (members never learn this machine's
        // addresses).
        var quiet = OnlineTestbed()
        quiet.addSTUNServer(at: other, portOffset: 7)
        let c = quiet.addClient(.create, peerID: 3, address: Self.alice, directPaths: false, stunServers: [other])
        #expect(quiet.network.run(for: .seconds(5)) { $0.hosts[c].code != nil })
        quiet.network.run(for: .seconds(3)) { _ in false }
        #expect(quiet.network.hosts[c].machine.client.reflexiveAddresses.isEmpty)
        #expect(quiet.network.hosts[c].machine.client.room.ownRecord.candidates.isEmpty)
    }

    @Test("With a TURN server, a member nothing reaches directly is reached through it, not the rendezvous's relay")
    func turnCarriesWhatDirectPathsCannot() throws {
        var bed = OnlineTestbed()
        let turnAddress = try SocketAddress(ipAddress: "192.0.2.60", port: 3478)
        let turn = VirtualTURNServer(address: turnAddress)
        bed.network.interceptor = { turn.rewrite(&$0) }
        // Alice takes datagrams from the rendezvous and the TURN server only.
        let a = bed.addClient(
            .create, peerID: 1, address: Self.alice, directPaths: true, hostCandidates: [Self.alice],
            turn: TURNServer(address: turnAddress, username: "alice", password: "secret"), acceptsOnlyFrom: ["192.0.2.1", "192.0.2.60"])
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[a].code != nil })
        let code = try #require(bed.network.hosts[a].code)
        let relayed = try #require(turn.allocations[Self.alice])
        #expect(bed.network.hosts[a].roomEvents.contains(.turnAllocated(relayed)))
        #expect(bed.network.hosts[a].machine.client.room.ownRecord.candidates.contains(.init(kind: .relayed, address: relayed)))
        let b = bed.addClient(.join(code), peerID: 2, address: Self.bob, directPaths: true, hostCandidates: [Self.bob])
        #expect(bed.network.run(for: .seconds(5)) { network in
            network.hosts[a].machine.client.room.relayReady && network.hosts[b].machine.client.room.relayReady
                && network.hosts[a].members == [2]
                && network.hosts[b].machine.client.room.members[1]?.candidates.contains { $0.kind == .relayed } == true
        })
        // Alice sends: it goes through the rendezvous's relay while the checks run, and they find
        // the TURN server's way (Alice's allocation to Bob; Bob straight to her relayed address).
        bed.network.hosts[a].toCarry = [(2, ByteBuffer(string: "first"))]
        let found = bed.network.run(for: .seconds(5)) { network in
            network.hosts[a].machine.client.paths?.route(to: 2) == .turn(Self.bob)
                && network.hosts[b].machine.client.paths?.route(to: 1) == .direct(relayed)
        }
        #expect(found, "\(String(describing: bed.network.hosts[a].machine.client.paths?.route(to: 2))) \(String(describing: bed.network.hosts[b].machine.client.paths?.route(to: 1)))")
        #expect(bed.network.hosts[b].relayedPayloads.map(\.0) == ["first"])
        #expect(bed.network.hosts[a].pathChanges.map(\.1) == [.turn(Self.bob)])
        // From now on Alice's datagrams to Bob go out through her allocation, not the relay.
        let relayedBefore = bed.server.currentStatistics.relayedDatagrams
        let sentBefore = turn.sent
        bed.network.hosts[a].toCarry = [(2, ByteBuffer(string: "second"))]
        bed.network.run(for: .milliseconds(100)) { _ in false }
        #expect(turn.sent == sentBefore + 1)
        #expect(bed.server.currentStatistics.relayedDatagrams == relayedBefore)
        // Consent goes on through the TURN server both ways; the paths hold. (Bob's first checks
        // to Alice's relayed address came before she had permitted his address: refused then,
        // as TURN says; none since.)
        let deliveredBefore = turn.delivered
        let refusedBefore = turn.refused
        bed.network.run(for: .seconds(10)) { _ in false }
        #expect(turn.delivered > deliveredBefore)
        #expect(bed.network.hosts[a].machine.client.paths?.route(to: 2) == .turn(Self.bob))
        #expect(bed.network.hosts[b].machine.client.paths?.route(to: 1) == .direct(relayed))
        #expect(turn.refused == refusedBefore)
    }

    @Test("A TURN server that refuses is reported once; the relay and direct paths go on")
    func aFailedTURNServerIsReportedAndChangesNothingElse() throws {
        var bed = OnlineTestbed()
        // Nothing answers at this address.
        let silent = try SocketAddress(ipAddress: "192.0.2.61", port: 3478)
        let a = bed.addClient(
            .create, peerID: 1, address: Self.alice, directPaths: true, hostCandidates: [Self.alice],
            turn: TURNServer(address: silent, username: "alice", password: "secret"))
        #expect(bed.network.run(for: .seconds(5)) { $0.hosts[a].code != nil })
        #expect(bed.network.run(for: .seconds(15)) { network in
            network.hosts[a].roomEvents.contains { if case .turnFailed = $0 { true } else { false } }
        })
        #expect(bed.network.hosts[a].roomEvents.filter { if case .turnFailed = $0 { true } else { false } }.count == 1)
        #expect(!bed.network.hosts[a].machine.client.room.ownRecord.candidates.contains { $0.kind == .relayed })
        #expect(bed.network.hosts[a].machine.client.room.relayReady)
    }
}
