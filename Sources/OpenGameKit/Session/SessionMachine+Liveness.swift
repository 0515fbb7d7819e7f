import GameKitTransport
import NIOCore

extension SessionMachine {
    /// Keeps the transport's liveness watch of a peer in step with what is known of it
    /// (PROTOCOL §14.7): a peer seen by discovery, with a liveness key, and nothing else to show it
    /// alive (no link, no request either way) is watched; any other peer is not. Connected peers
    /// have the disconnect timeout instead.
    mutating func reviewWatch(_ peerID: UInt32, of peer: inout SessionPeer) {
        let wanted: (addresses: [SocketAddress], key: [UInt8])? =
            if let sighting = peer.sighting, let key = sighting.livenessKey, peer.link == nil, peer.relayServer == nil,
                peer.outgoing == nil, peer.incoming == nil
            {
                (sighting.addresses, key)
            } else {
                nil
            }
        switch (peer.watch, wanted) {
        case (nil, let wanted?):
            peer.watch = try? self.links.watch(wanted.addresses, peerKey: wanted.key)
            if let watch = peer.watch { self.watchedPeers[watch] = peerID }
        case (let watch?, let wanted?):
            self.links.updateWatch(watch, addresses: wanted.addresses)
        case (let watch?, nil):
            self.links.unwatch(watch)
            self.watchedPeers[watch] = nil
            peer.watch = nil
            // Whatever it is now, it is not a silent sighting.
            peer.isSilent = false
        case (nil, nil):
            break
        }
    }

    /// Gives a connected peer's link every address discovery lists for the peer, so that the
    /// link can move when its own address stops working (PROTOCOL §14.9).
    mutating func reviewLinkAlternates(of peer: inout SessionPeer) {
        guard let link = peer.link else {
            peer.linkAlternates = []
            return
        }
        let addresses = peer.sighting?.addresses ?? []
        guard addresses != peer.linkAlternates, !addresses.isEmpty else { return }
        peer.linkAlternates = addresses
        self.links.setAlternateAddresses(addresses, for: link)
    }

    /// The transport reports a watched peer silent (or answering again): it is shown
    /// unavailable (or available again), and discovery is asked to check its records.
    mutating func handleLiveness(_ watch: LivenessWatchID, alive: Bool) {
        guard let peerID = self.watchedPeers[watch], self.peers[peerID]?.watch == watch else { return }
        self.peers[peerID]!.isSilent = !alive
        self.statistics.silentPeers += alive ? 0 : 1
        if !alive { self.discoveryCommands.append(.reconfirm(peerID)) }
        self.reconcile(peerID)
    }
}
