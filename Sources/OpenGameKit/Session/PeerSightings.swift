@_spi(Machine) import GameKitOnline
import NIOCore

/// Where a session sees its peers: on the LAN (discovery's advertisements) and in its online room
/// (the members' records), merged into what the ``SessionMachine`` is told of each peer
/// (PROTOCOL §18.6). Sans-I/O: the session's driver and the virtual-time tests keep one each.
struct PeerSightings {
    /// A peer as discovery on the LAN last saw it.
    struct LANSighting: Equatable {
        var displayName: String
        var addresses: [SocketAddress]
        var isBusy: Bool
        var livenessKey: [UInt8]?
    }

    private(set) var members: [UInt32: MemberRecord] = [:]
    private(set) var lan: [UInt32: LANSighting] = [:]

    /// Discovery saw `peer` (or, with nil, its advertisement is gone).
    mutating func lanSighting(_ peer: UInt32, _ sighting: LANSighting?, machine: inout SessionMachine) {
        self.lan[peer] = sighting
        self.tell(peer, machine: &machine)
    }

    /// Browsing stopped: the LAN's sightings are forgotten (the machine forgot its peers).
    mutating func forgetLAN() {
        self.lan.removeAll()
    }

    /// A member joined the room or changed its record.
    mutating func member(_ record: MemberRecord, machine: inout SessionMachine) {
        self.members[record.peerID] = record
        self.tell(record.peerID, machine: &machine)
    }

    /// A member left the room.
    mutating func memberLeft(_ peer: UInt32, machine: inout SessionMachine) {
        self.members[peer] = nil
        self.tell(peer, machine: &machine)
    }

    /// The session is not in its room any more: every member is gone.
    mutating func forgetMembers(machine: inout SessionMachine) {
        for peer in self.members.keys.sorted() { self.memberLeft(peer, machine: &machine) }
    }

    /// After browsing starts again: every room member is told anew (the machine forgot them when
    /// browsing stopped).
    func tellMembers(machine: inout SessionMachine) {
        for peer in self.members.keys.sorted() { self.tell(peer, machine: &machine) }
    }

    /// Tells the machine what is known of `peer` now, from the LAN and the room together: the
    /// LAN's addresses first, then the member address the relay (or a direct path) serves.
    func tell(_ peer: UInt32, machine: inout SessionMachine) {
        let lan = self.lan[peer]
        let member = self.members[peer].flatMap { $0.isVisible ? $0 : nil }
        guard lan != nil || member != nil else {
            machine.peerLost(peer)
            return
        }
        var addresses = lan?.addresses ?? []
        if member != nil { addresses.append(MemberAddress.of(peer)) }
        let key = lan?.livenessKey ?? member.flatMap { $0.keyShare.count == 32 ? $0.keyShare : nil }
        machine.peerSighted(
            peer, displayName: lan?.displayName ?? member!.displayName, addresses: addresses, isBusy: lan?.isBusy ?? member!.isBusy,
            livenessKey: key)
    }
}
