/// Who is in a session's group call, as seen from one member (sans-I/O: the session's peers and
/// the channel's messages in, messages to send and participants to add or remove out).
/// docs/PROTOCOL.md §19 states the rules.
///
/// Out of the call nothing is sent and what arrives is ignored. Joining sends `join` to every
/// connected peer; a member in the call answers each `join` with `joinReply` and adds the
/// sender, and a `joinReply` adds its sender, so two members find each other whichever joins
/// first. A peer that connects later is sent `join`. A participant leaves with `leave`, or when
/// the session loses it; leaving sends `leave` to every participant.
struct GroupVoiceMembership: Equatable, Sendable {
    /// What the driver does.
    enum Effect: Equatable, Sendable {
        /// Send a control message, reliably, to these peers.
        case send(GroupVoiceMessage, to: [UInt32])
        /// A participant joined the call: start receiving it.
        case add(UInt32)
        /// A participant left: stop receiving it.
        case remove(UInt32)
    }

    /// Whether this member is in the call.
    private(set) var isInCall = false
    /// The other participants, in the order they joined.
    private(set) var participants: [UInt32] = []
    /// Peers connected in the session.
    private(set) var connected: Set<UInt32> = []
    /// Messages ignored: media from a peer not in the call, anything while out of it.
    private(set) var ignored = 0

    /// Joins the call, with the session's peers connected now.
    mutating func join(connected peers: [UInt32]) -> [Effect] {
        connected.formUnion(peers)
        guard !isInCall else { return [] }
        isInCall = true
        return connected.isEmpty ? [] : [.send(.join, to: connected.sorted())]
    }

    /// Leaves the call.
    mutating func leave() -> [Effect] {
        guard isInCall else { return [] }
        isInCall = false
        var effects: [Effect] = participants.isEmpty ? [] : [.send(.leave, to: participants)]
        effects += participants.map(Effect.remove)
        participants.removeAll()
        return effects
    }

    /// A peer connected in the session.
    mutating func peerConnected(_ peer: UInt32) -> [Effect] {
        guard connected.insert(peer).inserted, isInCall else { return [] }
        return [.send(.join, to: [peer])]
    }

    /// A peer is no longer connected in the session.
    mutating func peerDisconnected(_ peer: UInt32) -> [Effect] {
        connected.remove(peer)
        return removeParticipant(peer)
    }

    /// A control message arrived from `peer` (media goes to ``acceptsMedia(from:)``).
    mutating func received(_ message: GroupVoiceMessage, from peer: UInt32) -> [Effect] {
        // It came over the session, so the peer is connected.
        connected.insert(peer)
        guard isInCall else {
            ignored += 1
            return []
        }
        switch message {
        case .join:
            return addParticipant(peer) + [.send(.joinReply, to: [peer])]
        case .joinReply:
            return addParticipant(peer)
        case .leave:
            return removeParticipant(peer)
        case .media:
            return []
        }
    }

    /// Whether media from `peer` is played (it is a participant); counted when not.
    mutating func acceptsMedia(from peer: UInt32) -> Bool {
        if isInCall, participants.contains(peer) { return true }
        ignored += 1
        return false
    }

    private mutating func addParticipant(_ peer: UInt32) -> [Effect] {
        guard !participants.contains(peer) else { return [] }
        participants.append(peer)
        return [.add(peer)]
    }

    private mutating func removeParticipant(_ peer: UInt32) -> [Effect] {
        guard let index = participants.firstIndex(of: peer) else { return [] }
        participants.remove(at: index)
        return [.remove(peer)]
    }
}
