@_spi(Machine) import GameKitMachine
import NIOCore

/// Rooms shared with other instances through a store (PROTOCOL §18.10). The machine keeps its
/// own members as always, and a copy of the members registered elsewhere that the store sends
/// it (``SharedRoomsInput``); what changes here goes to the store as ``StoreCommand``s.
extension RoomService {
    /// A room this instance knows from now on (created here, or learnt from the store).
    mutating func addRoom(_ handle: RoomHandle, sessionKey: UInt64, code: RoomCode, relay: SocketAddress?) {
        let joins = TokenBucket(rate: self.configuration.joinsPerSecondPerRoom, burst: 10)
        var room = Room(handle: handle, sessionKey: sessionKey, code: code, joins: joins)
        room.relay = relay
        self.rooms[handle] = room
        self.codes[CodeKey(sessionKey: sessionKey, code: code)] = handle
    }

    mutating func apply(_ input: SharedRoomsInput, now: NIODeadline) {
        switch input {
        case .room(let room):
            self.install(room, now: now)
        case .roomGone(let handle):
            guard var room = self.rooms[handle] else { return }
            let hadRemote = !room.remote.isEmpty
            room.remote.removeAll()
            if room.isEmpty, room.emptySince == nil { room.emptySince = now }
            self.rooms[handle] = room
            if hadRemote { self.rosterChanged(handle, now: now) }
        case .lookedUp(let id, let room):
            guard let parked = self.parked.removeValue(forKey: id) else { return }
            if let room, room.sessionKey == parked.sessionKey, room.code == parked.code {
                self.install(room, now: now)
                self.join(parked.request, to: room.handle, holderKey: parked.holderKey, record: parked.record, from: parked.source, now: now)
            } else {
                self.wrongCode(parked.request, sessionKey: parked.sessionKey, from: parked.source, now: now)
            }
        case .lookupFailed(let id):
            guard let parked = self.parked.removeValue(forKey: id) else { return }
            self.refuse(parked.request, .busy, to: parked.source, retryAfter: 2_000)
        }
    }

    /// Takes the store's view of a room: the members registered elsewhere, and its relay.
    private mutating func install(_ shared: SharedRoom, now: NIODeadline) {
        let me = self.configuration.sharedInstance
        if self.rooms[shared.handle] == nil {
            self.addRoom(shared.handle, sessionKey: shared.sessionKey, code: shared.code, relay: shared.relay)
        }
        var room = self.rooms[shared.handle]!
        var remote: [UInt32: SharedRoom.Member] = [:]
        for member in shared.members where member.instance != me {
            if let local = room.members[member.record.peerID] {
                guard local.holderKey == member.holderKey else { continue }
                // The same member registered with another instance since: the store's row is
                // the latest word, so it is no longer this instance's.
                self.tokens[local.token] = nil
                room.members[member.record.peerID] = nil
            }
            remote[member.record.peerID] = member
        }
        let listed = Set(shared.members.map(\.record.peerID))
        for (peerID, member) in room.members.sorted(by: { $0.key < $1.key }) where !listed.contains(peerID) {
            // The store lost one of this instance's members (its row expired while this
            // instance was slow): written again.
            self.events.append(.store(.putMember(shared.handle, member.record, holderKey: member.holderKey)))
        }
        let changed = remote != room.remote || shared.relay != room.relay
        room.remote = remote
        room.relay = shared.relay
        room.emptySince = room.isEmpty ? (room.emptySince ?? now) : nil
        self.rooms[shared.handle] = room
        if changed { self.rosterChanged(shared.handle, now: now) }
    }
}
