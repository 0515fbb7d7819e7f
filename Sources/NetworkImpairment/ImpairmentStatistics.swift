/// Counters of what an impairment did, so that a test or a benchmark report can say how bad
/// the network actually was, not only how bad it was configured to be.
///
/// Datagrams are conserved: `submitted − dropped + duplicated` equals `delivered` plus the
/// datagrams still in flight (``ImpairmentModel/pendingCount``). The JSON field names (the
/// property names) are stable; `gk-impair` prints them.
public struct ImpairmentStatistics: Sendable, Hashable, Codable {
    /// Datagrams handed to the model.
    public var submitted: Int = 0
    /// Datagrams dropped by burst loss or independent loss.
    public var dropped: Int = 0
    /// Extra copies created by duplication (a duplicated datagram counts once here).
    public var duplicated: Int = 0
    /// Copies that had one bit flipped.
    public var corrupted: Int = 0
    /// Copies held back by the reorder delay.
    public var reordered: Int = 0
    /// Copies that left the model (returned by ``ImpairmentModel/popDue(at:)``).
    public var delivered: Int = 0
    /// Copies the model delivered but a ``UDPImpairmentRelay`` could not send on (a socket
    /// error, or no upstream socket for the client). Always 0 for a bare model.
    public var sendFailures: Int = 0

    /// Creates all-zero counters.
    public init() {}
}
