@_spi(Machine) import GameKitMachine
import NIOCore
import NIOEmbedded
import Testing

/// Shutdown on NIO's async testing loop: what the machine says last is written before the
/// socket closes, calls fail from then on, and a second shutdown does nothing.
@Suite struct DriverShutdownTests {
    static let peer = try! SocketAddress(ipAddress: "10.0.0.2", port: 4000)

    /// A driver of a `BeaconMachine` attached to a connected testing channel.
    static func attached() async throws -> (NIOAsyncTestingEventLoop, NIOAsyncTestingChannel, DatagramDriver<BeaconMachine>) {
        let loop = NIOAsyncTestingEventLoop()
        let channel = NIOAsyncTestingChannel(loop: loop)
        try await channel.connect(to: Self.peer).get()
        let driver = DatagramDriver(machine: BeaconMachine(), eventLoop: loop) { _ in }
        try await loop.submit {
            driver.attach(UDPChannelSocket(channel: channel, segmentationOffload: false, routes: { RouteCheck { _ in true } }))
        }.get()
        return (loop, channel, driver)
    }

    @Test func theLastWordsLeaveBeforeTheSocketClosesAndNothingIsAcceptedAfter() async throws {
        let (loop, channel, driver) = try await Self.attached()
        _ = driver.perform { machine, now in machine.startBeacons(every: .milliseconds(10), now: now) }

        let first = await driver.shutdown(flushLimit: .milliseconds(500)) { machine, _ in
            machine.send("goodbye", to: Self.peer)
        }
        #expect(first)
        // Written by the time shutdown returns (read without waiting: a regression fails here
        // rather than hanging).
        let written = try await channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self)
        #expect(written.map { String(buffer: $0.data) } == "goodbye")
        #expect(driver.isClosing)
        #expect(driver.perform { machine, _ in machine.send("late", to: Self.peer) } == nil)
        // No timer survives: the beacon never fires.
        await loop.advanceTime(by: .seconds(1))
        #expect(try await channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) == nil)
        #expect(driver.read(\.timeouts) == 0)
        #expect(!channel.isActive)
        let second = await driver.shutdown(flushLimit: .milliseconds(500)) { machine, _ in machine.send("again", to: Self.peer) }
        #expect(!second)
        await loop.shutdownGracefully()
    }

    /// The flush cycles while the machine has work and stops when it has none: a shutdown with
    /// one datagram to send runs a cycle or two, never the bound (10,000 at every shutdown
    /// before, each polling the machine; 50 ms to 1.4 s of the event loop per endpoint in the
    /// debug build, during which every other channel on the loop waited).
    @Test func theShutdownFlushRunsAsManyCyclesAsThereIsWork() async throws {
        let (loop, channel, driver) = try await Self.attached()
        await driver.shutdown(flushLimit: .milliseconds(500)) { machine, _ in machine.send("goodbye", to: Self.peer) }
        let written = try await channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self)
        #expect(written.map { String(buffer: $0.data) } == "goodbye")
        let cycles = try await loop.submit { driver.flushCycles }.get()
        #expect((1...3).contains(cycles), "\(cycles) cycles")
        await loop.shutdownGracefully()
    }

    @Test func flushCompletesOnceWhatTheCycleWroteHasLeft() async throws {
        let (loop, channel, driver) = try await Self.attached()
        driver.withLockedMachine { $0.send("now", to: Self.peer) }
        try await driver.flush().get()
        let written = try await channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self)
        #expect(written.map { String(buffer: $0.data) } == "now")
        await loop.shutdownGracefully()
    }
}
