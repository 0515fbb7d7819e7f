import NIOCore

extension TimeAmount {
    /// Integer division of a duration, which NIO does not provide.
    static func / (lhs: TimeAmount, rhs: Int64) -> TimeAmount {
        .nanoseconds(lhs.nanoseconds / rhs)
    }
}
