import NIOCore

/// Moving a link to another of the peer's addresses (PROTOCOL §6.7).
///
/// The application gives a link the peer's other addresses (discovery knows them). The link
/// moves to the next one, and sends a PING there at once, when its current address has no route
/// (the endpoint reports it, ``EndpointMachine/handleUnroutable(_:now:isRoutable:)``) or when
/// nothing has answered what it sent for ``failoverDelay``. The peer follows by itself: an
/// authenticated packet from a new address moves its side of the link there (the same rule that
/// follows a NAT rebinding). So does this side, which keeps whatever address answers.
extension LinkMachine {
    /// At least this long without an answer before a move.
    static let minimumFailoverDelay = TimeAmount.seconds(1)

    /// How long the link waits for an answer to what it sent before trying another address:
    /// three retransmission timeouts, at least ``minimumFailoverDelay``.
    var failoverDelay: TimeAmount {
        max(Self.minimumFailoverDelay, self.rtt.retransmissionTimeout(peerMaxAckDelay: self.parameters.peerMaxAckDelay, bounds: self.parameters.retransmissionTimeoutBounds) * 3)
    }

    /// When the link gives up on its current address, or nil (no alternative, not open, or
    /// nothing unanswered).
    var failoverDeadline: NIODeadline? {
        guard self.state == .open, let since = self.unansweredSince, self.alternateAddresses.contains(where: { $0 != self.remoteAddress }) else {
            return nil
        }
        return since + self.failoverDelay
    }

    /// Replaces the peer's other addresses (the current one among them is ignored).
    mutating func setAlternateAddresses(_ addresses: [SocketAddress]) {
        var unique: [SocketAddress] = []
        for address in addresses where !unique.contains(address) { unique.append(address) }
        self.alternateAddresses = unique
    }

    /// Moves to the next usable address after the current one in the alternates (wrapping
    /// round, so a path that comes back is tried again), sends a PING there and restarts the wait.
    /// Returns whether the link moved.
    @discardableResult
    mutating func failOver(now: NIODeadline, isUsable: (SocketAddress) -> Bool = { _ in true }) -> Bool {
        guard self.state == .open else { return false }
        // The alternatives after the current address in the list's order, wrapping round.
        let after = self.alternateAddresses.firstIndex(of: self.remoteAddress).map { $0 + 1 } ?? 0
        let ordered = (self.alternateAddresses[after...] + self.alternateAddresses[..<after]).filter { $0 != self.remoteAddress }
        guard let next = ordered.first(where: isUsable) else {
            // Nowhere to go: wait another round before trying again.
            if self.unansweredSince != nil { self.unansweredSince = now }
            return false
        }
        let from = self.remoteAddress
        self.remoteAddress = next
        self.unansweredSince = now
        self.pendingPing = true
        self.statistics.pathMoves += 1
        self.events.append(.moved(from: from, to: next))
        return true
    }
}
