import NIOConcurrencyHelpers
import NetworkImpairment
import Testing

import GameKitDiscovery

/// The README's discovery example as written there (printing recorded, the loop ended by the
/// test once the peer is found), run for real in the test's namespace.
@Suite("README discovery example")
struct ReadmeDiscoveryExampleTests {
    @Test func theReadmeExampleWorksAsWritten() async throws {
        try NetworkSandbox.requireIsolation()
        let printed = NIOLockedValueBox<[String]>([])
        func print(_ items: Any...) { printed.withLockedValue { $0.append(items.map { "\($0)" }.joined(separator: " ")) } }

        let discovery = try await DiscoveryEndpoint.start()
        let type = ServiceType(sessionIdentifier: "chess")  // _chess._udp
        let me = PeerAdvertisement(peerID: "1234", displayName: "Alice", transportPort: 7000)

        let registration = try discovery.register(ServiceDescription(
            instanceName: me.instanceName, serviceType: type, port: me.transportPort, txt: me.txtRecord))
        print("advertised as", try await registration.registered())

        let browser = try discovery.browse(type)
        // The test's addition: end the loop once something was found (bounded by a timeout).
        let stopper = Task {
            for _ in 0..<600 {  // at most 30 s: the suite runs busy sessions beside it
                if printed.withLockedValue({ $0.contains { $0.hasPrefix("found") } }) { break }
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
            browser.cancel()
        }
        for await event in browser {
            switch event {
            case .found(let instance):
                print("found", PeerAdvertisement(txt: instance.txt)?.displayName ?? "?", instance.addresses)
            case .updated(let instance):
                print("updated", instance.name)
            case .lost(let instance):
                print("lost", instance.name)
            }
        }
        await stopper.value
        await discovery.shutdown()

        let lines = printed.withLockedValue { $0 }
        #expect(lines.first == "advertised as Alice [1234]._chess._udp.local.")
        #expect(lines.contains { $0.hasPrefix("found Alice [") && $0.contains("127.0.0.1") })
    }
}
