import CoreMetrics
import NIOCore

extension EndpointCore {
    /// Starts sampling the endpoint's figures into `factory`'s metrics every `interval`.
    func startMetrics(factory: any MetricsFactory, interval: TimeAmount, dimensions: [(String, String)]) {
        self.eventLoop.preconditionInEventLoop()
        self.metrics = TransportMetrics(factory: factory, dimensions: dimensions)
        self.metricsTask = self.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in
            self?.sampleMetrics()
        }
    }

    /// One sample now.
    func sampleMetrics() {
        guard let metrics = self.metrics else { return }
        let (statistics, links) = self.figures
        metrics.sample(statistics, links: links)
    }

    /// The last sample (the links just closed, the CLOSE packets counted), then no more.
    func stopMetrics() {
        self.metricsTask?.cancel()
        self.metricsTask = nil
        self.sampleMetrics()
        self.metrics?.finish()
        self.metrics = nil
    }
}
