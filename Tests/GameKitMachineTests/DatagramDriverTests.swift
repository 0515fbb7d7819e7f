@_spi(Machine) import GameKitMachine
import NIOCore
import NIOEmbedded
import Testing

/// The driver on NIO's embedded event loop: time moves only when the test says, and every write
/// is read back from the channel, so each rule of the cycle is checked deterministically.
@Suite struct DatagramDriverTests {
    static let peer = try! SocketAddress(ipAddress: "10.0.0.2", port: 4000)

    /// A driver over an embedded channel, with a route table the test controls.
    final class Fixture {
        let loop = EmbeddedEventLoop()
        let channel: EmbeddedChannel
        var delivered: [BeaconMachine.Event] = []
        var driver: DatagramDriver<BeaconMachine>!
        let socket: UDPChannelSocket
        /// What each delivered event makes the test do (runs with the driver's lock released).
        var onEvent: (BeaconMachine.Event, DatagramDriver<BeaconMachine>) -> Void = { _, _ in }

        init(machine: BeaconMachine = BeaconMachine(), limits: DatagramDriver<BeaconMachine>.Limits = .init(), unroutable: Set<SocketAddress> = []) throws {
            self.channel = EmbeddedChannel(loop: self.loop)
            try self.channel.connect(to: DatagramDriverTests.peer).wait()
            self.socket = UDPChannelSocket(channel: self.channel, segmentationOffload: false, routes: { RouteCheck { !unroutable.contains($0) } })
            self.driver = DatagramDriver(machine: machine, eventLoop: self.loop, limits: limits) { [unowned self] event in
                self.delivered.append(event)
                self.onEvent(event, self.driver)
            }
            try self.channel.pipeline.syncOperations.addHandler(
                DriverChannelHandler(driver: self.driver, source: { $0.remoteAddress }))
            self.driver.attach(self.socket)
        }

        /// Everything written so far, as (destination, text).
        func written() throws -> [(SocketAddress, String)] {
            var result: [(SocketAddress, String)] = []
            while let envelope = try self.channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) {
                result.append((envelope.remoteAddress, String(buffer: envelope.data)))
            }
            return result
        }

        func read(_ text: String, from source: SocketAddress = DatagramDriverTests.peer) throws {
            try self.channel.writeInbound(AddressedEnvelope(remoteAddress: source, data: ByteBuffer(string: text)))
        }
    }

    @Test func aDatagramReadIsAnsweredInTheSameTurn() throws {
        let fixture = try Fixture()
        try fixture.read("hello")
        // No loop.run(): the end of the read batch ran the cycle.
        #expect(try fixture.written().map(\.1) == ["re:hello"])
        #expect(fixture.delivered == [.received("hello", from: Self.peer)])
    }

    @Test func readsInOneBatchReachTheMachineTogetherAndLongBatchesAreAnsweredAsTheyGo() throws {
        var limits = DatagramDriver<BeaconMachine>.Limits()
        limits.datagramsPerCycleStart = 3
        let fixture = try Fixture(limits: limits)
        let handler = try fixture.channel.pipeline.syncOperations.handler(type: DriverChannelHandler<BeaconMachine>.self)
        _ = handler
        // Five datagrams in one read batch (no read-complete between them).
        for index in 0..<5 {
            fixture.channel.pipeline.syncOperations.fireChannelRead(NIOAny(AddressedEnvelope(remoteAddress: Self.peer, data: ByteBuffer(string: "m\(index)"))))
        }
        // The third started a cycle; the last two wait for the end of the batch.
        #expect(try fixture.written().map(\.1) == ["re:m0", "re:m1", "re:m2"])
        fixture.channel.pipeline.syncOperations.fireChannelReadComplete()
        #expect(try fixture.written().map(\.1) == ["re:m3", "re:m4"])
        #expect(fixture.driver.read(\.handled) == 5)
    }

    @Test func receiveOffloadBatchesAreSplitIntoDatagrams() throws {
        let fixture = try Fixture()
        var data = ByteBuffer(string: "aaaa")
        data.writeString("bbbb")
        data.writeString("cc")
        let metadata = AddressedEnvelope<ByteBuffer>.Metadata(ecnState: .transportNotCapable, packetInfo: nil, segmentSize: 4)
        try fixture.channel.writeInbound(AddressedEnvelope(remoteAddress: Self.peer, data: data, metadata: metadata))
        #expect(try fixture.written().map(\.1) == ["re:aaaa", "re:bbbb", "re:cc"])
    }

    @Test func eventsAreDeliveredWithTheLockReleasedAndWhatTheHandlerSendsLeavesInTheSameCycle() throws {
        let fixture = try Fixture()
        fixture.onEvent = { event, driver in
            // Calling back into the machine from a handler would deadlock under the lock.
            if case .received("hello", _) = event {
                _ = driver.perform { machine, _ in machine.send("from handler", to: DatagramDriverTests.peer) }
            }
        }
        try fixture.read("hello")
        #expect(try fixture.written().map(\.1) == ["re:hello", "from handler"])
    }

    @Test func anApplicationCallActsAtOnceAndItsDatagramLeavesOnTheNextCycle() throws {
        let fixture = try Fixture()
        let queued = fixture.driver.perform { machine, _ in
            machine.send("one", to: Self.peer)
            machine.send("two", to: Self.peer)
            return machine.outbox.count
        }
        #expect(queued == 2)
        #expect(try fixture.written().isEmpty)
        fixture.loop.run()
        #expect(try fixture.written().map(\.1) == ["one", "two"])
    }

    @Test func theTimerFiresAtTheMachinesDeadlineAndOnlyThen() throws {
        let fixture = try Fixture()
        _ = fixture.driver.perform { machine, now in machine.startBeacons(every: .milliseconds(100), now: now) }
        fixture.loop.run()
        fixture.loop.advanceTime(by: .milliseconds(99))
        #expect(try fixture.written().isEmpty)
        #expect(fixture.driver.read(\.timeouts) == 0)
        fixture.loop.advanceTime(by: .milliseconds(1))
        #expect(try fixture.written().map(\.1) == ["beacon 1"])
        fixture.loop.advanceTime(by: .milliseconds(250))
        #expect(try fixture.written().map(\.1) == ["beacon 2", "beacon 3"])
        // Once per deadline: never a timer firing with nothing due.
        #expect(fixture.driver.read(\.timeouts) == 3)
        #expect(fixture.delivered == [.beacon(1), .beacon(2), .beacon(3)])
    }

    @Test func nothingIsPolledWhileTheSocketIsFullAndEverythingLeavesWhenItDrains() throws {
        let fixture = try Fixture()
        fixture.channel.isWritable = false
        _ = fixture.driver.perform { machine, now in
            machine.send("waiting", to: Self.peer)
            machine.startBeacons(every: .milliseconds(10), now: now)
        }
        fixture.loop.run()
        fixture.loop.advanceTime(by: .milliseconds(10))
        #expect(try fixture.written().isEmpty)
        #expect(fixture.driver.read(\.outbox.count) == 2)
        fixture.channel.isWritable = true
        fixture.channel.pipeline.syncOperations.fireChannelWritabilityChanged()
        #expect(try fixture.written().map(\.1) == ["waiting", "beacon 1"])
    }

    @Test func aDestinationWithoutRouteIsDroppedCountedAndTheMachineMovesInTheSameCycle() throws {
        let dead = try SocketAddress(ipAddress: "10.7.0.2", port: 4000)
        var machine = BeaconMachine()
        machine.alternates[dead] = Self.peer
        let fixture = try Fixture(machine: machine, unroutable: [dead])
        _ = fixture.driver.perform { machine, _ in machine.send("lost", to: dead) }
        fixture.loop.run()
        #expect(try fixture.written().map(\.1) == ["moved"])
        #expect(fixture.socket.unroutableDatagrams == 1)
        #expect(fixture.delivered == [.unroutable(dead)])
    }

    @Test func aLongQueueIsWrittenInRoundsInOrder() throws {
        var limits = DatagramDriver<BeaconMachine>.Limits()
        limits.datagramsPerRound = 4
        limits.roundsPerCycle = 2
        let fixture = try Fixture(limits: limits)
        _ = fixture.driver.perform { machine, _ in
            for index in 0..<20 { machine.send("m\(index)", to: Self.peer) }
        }
        // One cycle writes two rounds of four, then yields (another cycle is scheduled).
        fixture.loop.execute {}
        fixture.loop.run()
        #expect(try fixture.written().map(\.1) == (0..<20).map { "m\($0)" })
    }

    @Test func oneCycleYieldsAfterItsRounds() throws {
        var limits = DatagramDriver<BeaconMachine>.Limits()
        limits.datagramsPerRound = 4
        limits.roundsPerCycle = 2
        let fixture = try Fixture(limits: limits)
        fixture.driver.withLockedMachine { machine in
            for index in 0..<20 { machine.send("m\(index)", to: Self.peer) }
        }
        #expect(fixture.driver.runCycle() == true)
        #expect(try fixture.written().count == 8)
    }
}
