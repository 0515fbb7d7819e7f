import NIOCore
import NIOPosix
import Testing

@testable import NetworkImpairment

/// ``UDPImpairmentRelay`` over real loopback sockets. Run through `scripts/sandbox`.
@Suite("UDPImpairmentRelay")
struct UDPImpairmentRelayTests {
    /// Sends datagrams `range` from `client` through the relay, then waits until the target
    /// and the client have received the counts the models predict for everything sent so far.
    /// Sending in windows keeps socket buffers from overflowing, so only the models lose.
    static func sendWindow(
        _ range: Range<Int>,
        payload: (Int) -> [UInt8],
        from client: UDPPeer,
        through fixture: RelayFixture,
        expectTarget: Int,
        expectClient: Int
    ) async throws {
        for index in range {
            try await client.send(payload(index), to: fixture.relay.localAddress)
        }
        #expect(await fixture.target.waitForReceived(atLeast: expectTarget))
        #expect(await client.waitForReceived(atLeast: expectClient))
    }

    // MARK: - Pass-through

    @Test("a pass-through relay delivers every datagram both ways, unchanged and in order")
    func passThroughRelayDeliversEverything() async throws {
        try await RelayFixture.with(forward: .perfect, backward: .perfect) { fixture in
            let client = try await fixture.makeClient()
            let sizes = [4, 1, 100, 1_400, 9_000, 65_507]
            let payload = { (index: Int) in numbered(index, size: max(4, sizes[index % sizes.count])) }
            let count = 300
            for start in stride(from: 0, to: count, by: 30) {
                try await Self.sendWindow(
                    start..<start + 30, payload: payload, from: client, through: fixture,
                    expectTarget: start + 30, expectClient: start + 30
                )
            }
            let expected = (0..<count).map(payload)
            #expect(fixture.target.receivedPayloads == expected)
            #expect(client.receivedPayloads == expected)
            // Replies come from the relay's own address, and the target sees one upstream
            // source that is not the relay's listen socket.
            #expect(client.received.allSatisfy { $0.remoteAddress == fixture.relay.localAddress })
            let sources = Set(fixture.target.received.map(\.remoteAddress))
            #expect(sources.count == 1 && !sources.contains(fixture.relay.localAddress))

            let statistics = await fixture.relay.statistics()
            #expect(statistics.forward.submitted == count && statistics.forward.delivered == count)
            #expect(statistics.backward.submitted == count && statistics.backward.delivered == count)
            #expect(statistics.forward.dropped == 0 && statistics.forward.sendFailures == 0)
            #expect(statistics.backward.dropped == 0 && statistics.backward.sendFailures == 0)
            await client.close()
        }
    }

    // MARK: - Loss

    @Test("a lossy relay drops exactly the datagrams its seeded models drop, in each direction")
    func lossyRelayDropsWhatTheModelsDrop() async throws {
        let forward = ImpairmentProfile(loss: 0.3, delay: .milliseconds(5))
        let backward = ImpairmentProfile(loss: 0.2, delay: .milliseconds(3))
        let seed: UInt64 = 99
        let count = 400
        let expected = expectedRelayOutcome(forward: forward, backward: backward, seed: seed, count: count)
        try await RelayFixture.with(forward: forward, backward: backward, seed: seed) { fixture in
            let client = try await fixture.makeClient()
            for start in stride(from: 0, to: count, by: 40) {
                try await Self.sendWindow(
                    start..<start + 40, payload: { numbered($0) }, from: client, through: fixture,
                    expectTarget: expected.atTarget.filter { $0 < start + 40 }.count,
                    expectClient: expected.atClient.filter { $0 < start + 40 }.count
                )
            }
            #expect(fixture.target.receivedPayloads.map(number(of:)) == expected.atTarget)
            #expect(client.receivedPayloads == expected.atClient.map { numbered($0) })

            let statistics = await fixture.relay.statistics()
            #expect(statistics.forward.submitted == count)
            #expect(statistics.forward.dropped == count - expected.atTarget.count)
            #expect(statistics.backward.submitted == expected.atTarget.count)
            #expect(statistics.backward.dropped == expected.atTarget.count - expected.atClient.count)
            // The seed really mattered: roughly the configured fractions were lost.
            #expect((100...140).contains(statistics.forward.dropped))
            await client.close()
        }
    }

    // MARK: - Damage

    @Test("a duplicating, corrupting relay delivers two one-bit-damaged copies of each datagram")
    func duplicatingCorruptingRelayDamagesCopies() async throws {
        let forward = ImpairmentProfile(duplicateProbability: 1, corruptProbability: 1)
        try await RelayFixture.with(forward: forward, backward: .perfect, seed: 3) { fixture in
            let client = try await fixture.makeClient()
            let count = 60
            let payload = { (index: Int) in numbered(index, size: 64) }
            for start in stride(from: 0, to: count, by: 20) {
                try await Self.sendWindow(
                    start..<start + 20, payload: payload, from: client, through: fixture,
                    expectTarget: 2 * (start + 20), expectClient: 2 * (start + 20)
                )
            }
            let atTarget = fixture.target.receivedPayloads
            #expect(atTarget.count == 2 * count)
            for (position, received) in atTarget.enumerated() {
                #expect(bitDistance(received, payload(position / 2)) == 1)
            }
            #expect(client.receivedPayloads == atTarget)
            let statistics = await fixture.relay.statistics()
            #expect(statistics.forward.duplicated == count && statistics.forward.corrupted == 2 * count)
            await client.close()
        }
    }

    // MARK: - Mapping

    @Test("each client gets its own upstream source and only its own replies")
    func clientsGetSeparateUpstreams() async throws {
        try await RelayFixture.with(forward: .perfect, backward: .perfect) { fixture in
            let first = try await fixture.makeClient()
            let second = try await fixture.makeClient()
            for index in 0..<20 {
                try await first.send([1] + numbered(index), to: fixture.relay.localAddress)
                try await second.send([2] + numbered(index), to: fixture.relay.localAddress)
            }
            #expect(await first.waitForReceived(atLeast: 20))
            #expect(await second.waitForReceived(atLeast: 20))
            #expect(first.receivedPayloads == (0..<20).map { [1] + numbered($0) })
            #expect(second.receivedPayloads == (0..<20).map { [2] + numbered($0) })
            let sourcesByClient = Dictionary(grouping: fixture.target.received) { $0.data.getInteger(at: 0, as: UInt8.self)! }
                .mapValues { Set($0.map(\.remoteAddress)) }
            #expect(sourcesByClient[1]?.count == 1 && sourcesByClient[2]?.count == 1)
            #expect(sourcesByClient[1] != sourcesByClient[2])
            await first.close()
            await second.close()
        }
    }

    @Test("the relay listens on IPv6 and relays to an IPv4 target")
    func relayListensOnIPv6() async throws {
        try await RelayFixture.with(forward: .perfect, backward: .perfect, listenHost: "::1") { fixture in
            #expect(fixture.relay.localAddress.ipAddress == "::1")
            #expect(fixture.relay.localAddress.port != 0)
            let client = try await fixture.makeClient(host: "::1")
            try await client.send(numbered(7), to: fixture.relay.localAddress)
            #expect(await client.waitForReceived(atLeast: 1))
            #expect(client.receivedPayloads == [numbered(7)])
            await client.close()
        }
    }

    // MARK: - Lifecycle

    @Test("stop closes the relay, keeps the final statistics and can be called twice")
    func stopKeepsFinalStatistics() async throws {
        try await RelayFixture.with(forward: ImpairmentProfile(delay: .seconds(30)), backward: .perfect) { fixture in
            let client = try await fixture.makeClient()
            try await client.send(numbered(1), to: fixture.relay.localAddress)
            // The datagram waits 30 s in the model; wait until the relay has taken it.
            let deadline = ContinuousClock.now + .seconds(10)
            while await fixture.relay.statistics().forward.submitted == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(2))
            }
            try await fixture.relay.stop()
            try await fixture.relay.stop()
            let statistics = await fixture.relay.statistics()
            #expect(statistics.forward.submitted == 1 && statistics.forward.delivered == 0)
            #expect(fixture.target.received.isEmpty)
            await client.close()
        }
    }

    @Test("an invalid profile is rejected before any socket is opened")
    func invalidProfileIsRejected() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        await #expect(throws: ImpairmentProfile.ValidationError.self) {
            _ = try await UDPImpairmentRelay.start(
                listen: try SocketAddress(ipAddress: "127.0.0.1", port: 0),
                target: try SocketAddress(ipAddress: "127.0.0.1", port: 9),
                forward: .perfect,
                backward: ImpairmentProfile(loss: 3),
                seed: 1,
                group: group
            )
        }
        try await group.shutdownGracefully()
    }
}
