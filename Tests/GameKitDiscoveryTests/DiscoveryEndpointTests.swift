import NIOCore
import NIOPosix
import NetworkImpairment
import Testing

import GameKitDiscovery

/// The public API over real sockets in the test's namespace: two endpoints of one process share
/// port 5353, find each other, see updates and goodbyes; errors are clear.
@Suite("DiscoveryEndpoint over real sockets", .serialized)
struct DiscoveryEndpointTests {
    static func configuration() throws -> DiscoveryConfiguration {
        try NetworkSandbox.requireIsolation()
        var configuration = DiscoveryConfiguration()
        configuration.interfaceNames = ["lo"]
        return configuration
    }

    /// The next event of `iterator`, or nil after `seconds`.
    static func next(_ browser: ServiceBrowser, within seconds: Double) async -> BrowseEvent? {
        await withTaskGroup(of: BrowseEvent?.self) { group in
            group.addTask {
                var iterator = browser.makeAsyncIterator()
                return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    @Test func twoEndpointsShareThePortFindEachOtherSeeUpdatesAndGoodbyes() async throws {
        let alice = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let bob = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let type = try ServiceType("_api._udp")
        let browser = try bob.browse(type)
        var txt = try TXTRecord(["v": "1"])
        let registration = try alice.register(ServiceDescription(instanceName: "Alice's game", serviceType: type, port: 7000, txt: txt))
        let name = try await registration.registered()
        #expect(name == (try DNSName(instance: "Alice's game", in: type.domainName)))

        var iterator = browser.makeAsyncIterator()
        let found = await iterator.next()
        guard case .found(let instance) = found else {
            Issue.record("expected found, got \(String(describing: found))")
            return
        }
        #expect(instance.instanceName == "Alice's game")
        #expect(instance.port == 7000)
        #expect(instance.txt["v"] == "1")
        #expect(instance.addresses.contains { $0.address == .v4(IPv4Bytes(127, 0, 0, 1)) })
        #expect(browser.instances == [instance])

        try txt.set("v", "2")
        try registration.updateTXT(txt)
        let updated = await iterator.next()
        guard case .updated(let changed) = updated else {
            Issue.record("expected updated, got \(String(describing: updated))")
            return
        }
        #expect(changed.txt["v"] == "2")

        registration.withdraw()
        let lost = await iterator.next()
        guard case .lost(let gone) = lost else {
            Issue.record("expected lost, got \(String(describing: lost))")
            return
        }
        #expect(gone.name == name)
        browser.cancel()
        await alice.shutdown()
        await bob.shutdown()
    }

    @Test func callbacksSeeTheSameEventsAsTheSequence() async throws {
        let endpoint = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let type = try ServiceType("_cb._udp")
        let browser = try endpoint.browse(type)
        let (events, sink) = AsyncStream.makeStream(of: BrowseEvent.self)
        browser.onEvent = { sink.yield($0) }
        _ = try endpoint.register(ServiceDescription(instanceName: "Self", serviceType: type, port: 1))
        var iterator = events.makeAsyncIterator()
        guard case .found(let instance) = await iterator.next() else {
            Issue.record("expected found")
            return
        }
        #expect(instance.port == 1)
        await endpoint.shutdown()
    }

    @Test func shutdownSaysGoodbyeToOtherEndpoints() async throws {
        let alice = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let bob = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let type = try ServiceType("_bye._udp")
        let browser = try bob.browse(type)
        _ = try await alice.register(ServiceDescription(instanceName: "Leaving", serviceType: type, port: 2)).registered()
        var iterator = browser.makeAsyncIterator()
        guard case .found = await iterator.next() else {
            Issue.record("expected found")
            return
        }
        await alice.shutdown()
        guard case .lost = await iterator.next() else {
            Issue.record("expected lost")
            return
        }
        await bob.shutdown()
    }

    @Test func unknownInterfacesGiveNoUsableInterface() async throws {
        var configuration = try Self.configuration()
        configuration.interfaceNames = ["no-such-interface"]
        await #expect(throws: DiscoveryError.noUsableInterface) {
            _ = try await DiscoveryEndpoint.start(configuration: configuration)
        }
    }

    @Test func badServicesAndCallsAfterShutdownFailClearly() async throws {
        let endpoint = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let type = try ServiceType("_bad._udp")
        let tooLong = String(repeating: "x", count: 64)
        #expect(throws: DiscoveryError.self) {
            _ = try endpoint.register(ServiceDescription(instanceName: tooLong, serviceType: type, port: 1))
        }
        #expect(throws: DiscoveryError.self) {
            _ = try endpoint.register(ServiceDescription(instanceName: "", serviceType: type, port: 1))
        }
        // A TXT record too large for a packet is refused, not sent (nor crashing the encoder).
        let huge = try TXTRecord(strings: (0..<40).map { _ in [UInt8](repeating: 0x61, count: 250) })
        #expect(throws: DiscoveryError.self) {
            _ = try endpoint.register(ServiceDescription(instanceName: "Huge", serviceType: type, port: 1, txt: huge))
        }
        let fine = try endpoint.register(ServiceDescription(instanceName: "Fine", serviceType: type, port: 1))
        #expect(throws: DiscoveryError.self) { try fine.updateTXT(huge) }
        await endpoint.shutdown()
        #expect(throws: DiscoveryError.shutDown) {
            _ = try endpoint.register(ServiceDescription(instanceName: "Late", serviceType: type, port: 1))
        }
        #expect(throws: DiscoveryError.shutDown) { _ = try endpoint.browse(type) }
    }

    @Test func garbageDatagramsOnThePortChangeNothing() async throws {
        let endpoint = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let type = try ServiceType("_junk._udp")
        let browser = try endpoint.browse(type)
        // Hostile bytes from another socket: a compression loop, a huge count, random noise.
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let group = try SocketAddress(ipAddress: "224.0.0.251", port: 5353)
        for bytes: [UInt8] in [
            [0, 0, 0x84, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 0x0C, 0, 12, 0, 1],
            [0, 0, 0x84, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0],
            (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37) },
        ] {
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: group, data: ByteBuffer(bytes: bytes)))
        }
        _ = try endpoint.register(ServiceDescription(instanceName: "Still fine", serviceType: type, port: 3))
        guard case .found(let instance) = await Self.next(browser, within: 5) else {
            Issue.record("expected found")
            return
        }
        #expect(instance.instanceName == "Still fine")
        try await channel.close()
        await endpoint.shutdown()
    }

    @Test func aBrowserIteratedInPlaceKeepsBrowsing() async throws {
        let endpoint = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let type = try ServiceType("_inplace._udp")
        _ = try endpoint.register(ServiceDescription(instanceName: "Here", serviceType: type, port: 4))
        let found = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                // The browser is a temporary: only the loop's iterator holds it.
                for await event in (try? endpoint.browse(type)).map({ AnyAsyncSequenceBox($0) }) ?? AnyAsyncSequenceBox(nil) {
                    if case .found = event { return true }
                }
                return false
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: 5_000_000_000)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(found)
        await endpoint.shutdown()
    }

    @Test func registeredFailsAfterShutdownInsteadOfHanging() async throws {
        let endpoint = try await DiscoveryEndpoint.start(configuration: Self.configuration())
        let registration = try endpoint.register(ServiceDescription(instanceName: "Short-lived", serviceType: try ServiceType("_short._udp"), port: 5))
        let waiting = Task { try await registration.registered() }
        await endpoint.shutdown()
        await #expect(throws: DiscoveryError.shutDown) { _ = try await waiting.value }
        await #expect(throws: DiscoveryError.shutDown) { _ = try await registration.registered() }
    }
}

/// Wraps an optional browser so a `for await` loop can iterate it as a temporary.
struct AnyAsyncSequenceBox: AsyncSequence, Sendable {
    typealias Element = BrowseEvent
    let browser: ServiceBrowser?
    init(_ browser: ServiceBrowser?) { self.browser = browser }

    struct Iterator: AsyncIteratorProtocol {
        var base: ServiceBrowser.Iterator?
        mutating func next() async -> BrowseEvent? { await self.base?.next() }
    }

    func makeAsyncIterator() -> Iterator { Iterator(base: self.browser?.makeAsyncIterator()) }
}
