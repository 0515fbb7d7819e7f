import NIOCore

// MARK: - Codable

/// Profiles are stored in benchmark result files and passed between processes as JSON.
/// `TimeAmount` is not `Codable`, so durations are written as whole nanoseconds under
/// `delayNanoseconds`, `jitterNanoseconds` and `reorderDelayNanoseconds`. Every key is
/// optional when decoding: a missing key means "no impairment of that kind", so
/// `{"loss": 0.1}` is a complete profile.
extension ImpairmentProfile: Codable {
    private enum CodingKeys: String, CodingKey {
        case loss
        case burstLoss
        case delayNanoseconds
        case jitterNanoseconds
        case reorderProbability
        case reorderDelayNanoseconds
        case duplicateProbability
        case corruptProbability
    }

    /// Decodes a profile; missing keys take their perfect-network defaults. The result is
    /// not validated: call ``validate()``.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func nanoseconds(_ key: CodingKeys) throws -> TimeAmount {
            .nanoseconds(try container.decodeIfPresent(Int64.self, forKey: key) ?? 0)
        }
        self.init(
            loss: try container.decodeIfPresent(Double.self, forKey: .loss) ?? 0,
            burstLoss: try container.decodeIfPresent(BurstLoss.self, forKey: .burstLoss),
            delay: try nanoseconds(.delayNanoseconds),
            jitter: try nanoseconds(.jitterNanoseconds),
            reorderProbability: try container.decodeIfPresent(Double.self, forKey: .reorderProbability) ?? 0,
            reorderDelay: try nanoseconds(.reorderDelayNanoseconds),
            duplicateProbability: try container.decodeIfPresent(Double.self, forKey: .duplicateProbability) ?? 0,
            corruptProbability: try container.decodeIfPresent(Double.self, forKey: .corruptProbability) ?? 0
        )
    }

    /// Encodes every field, durations as nanoseconds.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.loss, forKey: .loss)
        try container.encodeIfPresent(self.burstLoss, forKey: .burstLoss)
        try container.encode(self.delay.nanoseconds, forKey: .delayNanoseconds)
        try container.encode(self.jitter.nanoseconds, forKey: .jitterNanoseconds)
        try container.encode(self.reorderProbability, forKey: .reorderProbability)
        try container.encode(self.reorderDelay.nanoseconds, forKey: .reorderDelayNanoseconds)
        try container.encode(self.duplicateProbability, forKey: .duplicateProbability)
        try container.encode(self.corruptProbability, forKey: .corruptProbability)
    }
}
