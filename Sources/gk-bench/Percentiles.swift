/// Nearest-rank percentiles of a sample of durations (microseconds).
struct Percentiles {
    private let sorted: [Double]

    init(_ samples: [Double]) {
        self.sorted = samples.sorted()
    }

    /// The value below which `fraction` of the samples lie (nearest rank); nil without samples.
    func value(at fraction: Double) -> Double? {
        guard !self.sorted.isEmpty else { return nil }
        let rank = Int((fraction * Double(self.sorted.count)).rounded(.up))
        return self.sorted[min(max(rank, 1), self.sorted.count) - 1]
    }
}
