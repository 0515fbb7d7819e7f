import Foundation
import NetworkImpairment
import Prometheus
import Testing

@testable import OpenGameKit

/// The session's and its transport's metrics reach a Prometheus registry through swift-metrics
/// (the session's configuration names the factory, as an application's bootstrap would).
@Suite("Metrics")
struct MetricsTests {
    /// The value of the sample of `name` whose labels include every one of `labels`.
    static func value(_ text: String, _ name: String, _ labels: [String]) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            guard labels.allSatisfy({ line.contains($0) }), let value = line.split(separator: " ").last else { continue }
            return Double(value)
        }
        return nil
    }

    @Test func aConnectionShowsInPrometheus() async throws {
        try NetworkSandbox.requireIsolation()
        let registry = PrometheusCollectorRegistry()
        var configuration = GKSession.Configuration()
        configuration.metricsFactory = PrometheusMetricsFactory(registry: registry)
        let id = SessionLoopbackTests.uniqueID()
        let server = SessionRecorder(GKSession(sessionID: id, displayName: "Server", sessionMode: .server, configuration: configuration))
        let client = SessionRecorder(GKSession(sessionID: id, displayName: "Client", sessionMode: .client, configuration: configuration))
        server.session.isAvailable = true
        client.session.isAvailable = true
        #expect(await client.waitUntilSees(server.session))
        try await client.session.connect(to: server.session.peerID)
        try await client.session.write(Data(repeating: 7, count: 100_000), toPeers: [server.session.peerID], with: .reliable)
        #expect(await server.wait(for: .state(client.session.peerID, .stateConnected)))
        func emitted() -> String {
            var buffer: [UInt8] = []
            registry.emit(into: &buffer)
            return String(decoding: buffer, as: UTF8.self)
        }
        let clientLabel = "session=\"\(client.session.peerID!)\""
        #expect(Self.value(emitted(), "ogk_session_peers", [clientLabel, "state=\"connected\""]) == 1)
        #expect(Self.value(emitted(), "ogk_session_peers", [clientLabel, "state=\"available\""]) == 0)
        // The transport's figures are sampled once a second (and at shutdown): a sample taken
        // while the link is open shows it, and, once acknowledgements have measured it (a
        // loaded machine may take more than one sample), its round-trip time.
        func sampled() -> Bool {
            let text = emitted()
            return Self.value(text, "ogk_transport_links", [clientLabel]) == 1 && (Self.value(text, "ogk_transport_rtt_count", [clientLabel]) ?? 0) >= 1
        }
        for _ in 0..<200 where !sampled() {
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        #expect(Self.value(emitted(), "ogk_transport_links", [clientLabel]) == 1)
        #expect((Self.value(emitted(), "ogk_transport_rtt_count", [clientLabel]) ?? 0) >= 1, "\(emitted())")
        let before = try #require(client.session.transportStatistics)
        await client.session.close()
        await server.session.close()
        let text = emitted()
        #expect(Self.value(text, "ogk_transport_links_opened_total", [clientLabel]) == 1, "\(text)")
        #expect(Self.value(text, "ogk_transport_links_closed_total", [clientLabel]) == 1)
        // Everything the endpoint counted before closing, and its CLOSE after.
        #expect((Self.value(text, "ogk_transport_datagrams_sent_total", [clientLabel]) ?? 0) > Double(before.datagramsSent))
        #expect((Self.value(text, "ogk_transport_datagrams_received_total", [clientLabel]) ?? 0) >= Double(before.datagramsReceived))
        #expect(before.datagramsSent > 0 && before.datagramsReceived > 0)
        #expect(Self.value(text, "ogk_transport_links", [clientLabel]) == 0)
    }
}
