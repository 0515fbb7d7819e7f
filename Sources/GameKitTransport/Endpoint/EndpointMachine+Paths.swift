import NIOCore

extension EndpointMachine {
    /// Gives a link the peer's other addresses, to move to when its current one stops working
    /// (PROTOCOL §6.7). Unknown links are ignored.
    mutating func setAlternateAddresses(_ addresses: [SocketAddress], for link: LinkID) {
        self.links[link.rawValue]?.machine.setAlternateAddresses(addresses)
        self.fileTimer(of: link.rawValue)
    }

    /// The driver dropped datagrams to `address` for lack of a route (an interface went down):
    /// every open link sending there moves to the next of its peer's addresses that `isUsable`
    /// accepts, at once.
    mutating func handleUnroutable(_ address: SocketAddress, now: NIODeadline, isRoutable isUsable: (SocketAddress) -> Bool) {
        for index in self.links.keys.sorted() {
            guard let slot = self.links[index], slot.machine.state == .open, slot.machine.remoteAddress == address,
                !slot.machine.alternateAddresses.isEmpty
            else { continue }
            slot.machine.failOver(now: now, isUsable: isUsable)
            self.fileTimer(of: index)
            self.collectEvents(of: index)
        }
    }
}
