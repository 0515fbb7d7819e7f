import CoreMetrics
import NIOCore

/// The endpoint's figures as swift-metrics counters, gauges and a timer, for whatever backend the
/// application bootstrapped (Prometheus, OpenTelemetry, …). Sampled from the statistics the
/// machine keeps anyway, once per ``TransportConfiguration/metricsInterval`` and at shutdown, so
/// the packet path pays nothing for them. Used on the endpoint's event loop only.
///
/// | metric | kind | meaning |
/// | --- | --- | --- |
/// | `ogk_transport_datagrams_sent_total`, `…_received_total` | counter | UDP datagrams |
/// | `ogk_transport_links_opened_total`, `…_closed_total` | counter | links |
/// | `ogk_transport_handshake_failures_total` | counter | handshakes refused for a wrong password |
/// | `ogk_transport_packets_lost_total` | counter | packets declared lost (then repaired) |
/// | `ogk_transport_retransmitted_bytes_total` | counter | bytes sent again |
/// | `ogk_transport_links` | gauge | links open now |
/// | `ogk_transport_bytes_queued`, `ogk_transport_bytes_in_flight` | gauge | summed over links |
/// | `ogk_transport_rtt` | timer | each link's smoothed round-trip time, per sample |
final class TransportMetrics {
    private let datagramsSent: Counter
    private let datagramsReceived: Counter
    private let linksOpened: Counter
    private let linksClosed: Counter
    private let handshakeFailures: Counter
    private let packetsLost: Counter
    private let retransmittedBytes: Counter
    private let links: Gauge
    private let bytesQueued: Gauge
    private let bytesInFlight: Gauge
    private let rtt: CoreMetrics.Timer
    private var last = EndpointStatistics()
    /// Each open link's counters at the last sample (links that closed are forgotten).
    private var lastLinks: [LinkID: (lost: UInt64, retransmitted: UInt64)] = [:]

    init(factory: any MetricsFactory, dimensions: [(String, String)]) {
        func counter(_ name: String) -> Counter { Counter(label: name, dimensions: dimensions, factory: factory) }
        func gauge(_ name: String) -> Gauge { Gauge(label: name, dimensions: dimensions, factory: factory) }
        self.datagramsSent = counter("ogk_transport_datagrams_sent_total")
        self.datagramsReceived = counter("ogk_transport_datagrams_received_total")
        self.linksOpened = counter("ogk_transport_links_opened_total")
        self.linksClosed = counter("ogk_transport_links_closed_total")
        self.handshakeFailures = counter("ogk_transport_handshake_failures_total")
        self.packetsLost = counter("ogk_transport_packets_lost_total")
        self.retransmittedBytes = counter("ogk_transport_retransmitted_bytes_total")
        self.links = gauge("ogk_transport_links")
        self.bytesQueued = gauge("ogk_transport_bytes_queued")
        self.bytesInFlight = gauge("ogk_transport_bytes_in_flight")
        self.rtt = CoreMetrics.Timer(label: "ogk_transport_rtt", dimensions: dimensions, preferredDisplayUnit: .milliseconds, factory: factory)
    }

    /// Reports what changed since the last sample.
    func sample(_ statistics: EndpointStatistics, links: [(LinkID, LinkStatistics)]) {
        func delta(_ now: UInt64, _ before: UInt64) -> Int64 { Int64(clamping: now >= before ? now - before : 0) }
        self.datagramsSent.increment(by: delta(statistics.datagramsSent, self.last.datagramsSent))
        self.datagramsReceived.increment(by: delta(statistics.datagramsReceived, self.last.datagramsReceived))
        self.linksOpened.increment(by: delta(statistics.linksOpened, self.last.linksOpened))
        self.linksClosed.increment(by: delta(statistics.linksClosed, self.last.linksClosed))
        self.handshakeFailures.increment(by: delta(statistics.handshakeAuthenticationFailures, self.last.handshakeAuthenticationFailures))
        self.last = statistics
        var current: [LinkID: (lost: UInt64, retransmitted: UInt64)] = [:]
        var queued = 0
        var inFlight = 0
        for (link, figures) in links {
            let before = self.lastLinks[link] ?? (0, 0)
            self.packetsLost.increment(by: delta(figures.packetsLost, before.lost))
            self.retransmittedBytes.increment(by: delta(figures.retransmittedBytes, before.retransmitted))
            current[link] = (figures.packetsLost, figures.retransmittedBytes)
            queued += figures.bytesQueued
            inFlight += figures.bytesInFlight
            if let smoothed = figures.smoothedRTT { self.rtt.recordNanoseconds(smoothed.nanoseconds) }
        }
        self.lastLinks = current
        self.links.record(links.count)
        self.bytesQueued.record(queued)
        self.bytesInFlight.record(inFlight)
    }

    /// The endpoint is gone: nothing open, queued or in flight (links still draining their
    /// CLOSE at the last sample included).
    func finish() {
        self.links.record(0)
        self.bytesQueued.record(0)
        self.bytesInFlight.record(0)
    }
}
