import NIOCore

extension ImpairmentProfile {
    /// Why a profile was rejected by ``ImpairmentProfile/validate()``.
    ///
    /// A typo on a command line (`--loss 5` meant as 5 %) or a bad generator in a property
    /// test should fail loudly and name the field, not silently turn into a profile that
    /// drops everything or crashes the model.
    public enum ValidationError: Error, Equatable, CustomStringConvertible {
        /// A probability field is outside `0...1` or is NaN.
        case probabilityOutOfRange(field: String, value: Double)
        /// A duration field is negative.
        case negativeDuration(field: String, value: TimeAmount)
        /// The burst loss parameters do not describe a valid Gilbert–Elliott chain.
        case invalidBurstLoss(BurstLoss, reason: String)

        /// A one-line explanation naming the offending field and the accepted range.
        public var description: String {
            switch self {
            case .probabilityOutOfRange(let field, let value):
                return "invalid impairment profile: \(field) is \(value), but a probability must be between 0 and 1"
            case .negativeDuration(let field, let value):
                return "invalid impairment profile: \(field) is \(value.nanoseconds) ns, but a duration cannot be negative"
            case .invalidBurstLoss(let burst, let reason):
                return "invalid impairment profile: burstLoss (averageLoss \(burst.averageLoss), "
                    + "meanBurstLength \(burst.meanBurstLength)): \(reason)"
            }
        }
    }
}
