import Testing

@testable import OpenGameKitVoice

/// The group call's membership machine, state by state, and its messages.
@Suite("Group voice membership")
struct GroupMembershipTests {
    @Test("Out of the call nothing is sent and every message is ignored")
    func outOfTheCall() {
        var machine = GroupVoiceMembership()
        #expect(machine.peerConnected(2).isEmpty)
        for message in [GroupVoiceMessage.join, .joinReply, .leave, .media([1])] {
            #expect(machine.received(message, from: 3).isEmpty)
        }
        let accepted = machine.acceptsMedia(from: 3)
        #expect(!accepted)
        #expect(machine.ignored == 5)
        #expect(machine.leave().isEmpty)
        #expect(machine.peerDisconnected(2).isEmpty)
        #expect(machine.participants.isEmpty)
    }

    @Test("Joining asks every connected peer; a join is answered and adds its sender; a reply adds without answering")
    func joining() {
        var machine = GroupVoiceMembership()
        _ = machine.peerConnected(5)
        #expect(machine.join(connected: [2, 3]) == [.send(.join, to: [2, 3, 5])])
        #expect(machine.join(connected: [2, 3]).isEmpty, "joining twice does nothing")
        #expect(machine.received(.join, from: 2) == [.add(2), .send(.joinReply, to: [2])])
        // A second join (it restarted its chat after a reply crossed): answered again, added once.
        #expect(machine.received(.join, from: 2) == [.send(.joinReply, to: [2])])
        #expect(machine.received(.joinReply, from: 3) == [.add(3)])
        #expect(machine.received(.joinReply, from: 3).isEmpty)
        #expect(machine.participants == [2, 3])
        let (fromParticipant, fromOther) = (machine.acceptsMedia(from: 2), machine.acceptsMedia(from: 5))
        #expect(fromParticipant)
        #expect(!fromOther, "connected but not in the call")
        #expect(machine.received(.media([1]), from: 2).isEmpty)
        #expect(machine.ignored == 1)
    }

    @Test("With nobody connected joining sends nothing; a peer connecting later is asked")
    func aloneThenSomeoneConnects() {
        var machine = GroupVoiceMembership()
        #expect(machine.join(connected: []).isEmpty)
        #expect(machine.isInCall)
        #expect(machine.peerConnected(9) == [.send(.join, to: [9])])
        #expect(machine.peerConnected(9).isEmpty, "already connected")
    }

    @Test("A participant leaves with leave or when the session loses it; leaving tells the participants only")
    func leaving() {
        var machine = GroupVoiceMembership()
        _ = machine.join(connected: [2, 3, 4])
        _ = machine.received(.joinReply, from: 2)
        _ = machine.received(.joinReply, from: 3)
        _ = machine.received(.joinReply, from: 4)
        #expect(machine.received(.leave, from: 3) == [.remove(3)])
        #expect(machine.received(.leave, from: 3).isEmpty)
        #expect(machine.peerDisconnected(4) == [.remove(4)])
        #expect(machine.peerDisconnected(4).isEmpty)
        #expect(machine.participants == [2])
        // A peer that connects again after being lost is asked again.
        #expect(machine.peerConnected(4) == [.send(.join, to: [4])])
        #expect(machine.leave() == [.send(.leave, to: [2]), .remove(2)])
        #expect(!machine.isInCall)
        #expect(machine.participants.isEmpty)
        // Rejoining asks everyone connected again.
        #expect(machine.join(connected: []) == [.send(.join, to: [2, 3, 4])])
    }

    @Test("Messages round-trip; bad bytes are refused with the reason")
    func messages() throws {
        for message in [GroupVoiceMessage.join, .joinReply, .leave, .media([0x11, 1, 2, 3])] {
            #expect(try GroupVoiceMessage.decode(message.encoded()) == message)
        }
        #expect(GroupVoiceMessage.join.encoded() == [0x11])
        #expect(GroupVoiceMessage.media([7]).encoded() == [0x14, 7])
        #expect(throws: GroupVoiceMessage.DecodeError.empty) { try GroupVoiceMessage.decode([]) }
        #expect(throws: GroupVoiceMessage.DecodeError.unsupportedVersion(2)) { try GroupVoiceMessage.decode([0x21]) }
        #expect(throws: GroupVoiceMessage.DecodeError.unknownKind(0)) { try GroupVoiceMessage.decode([0x10]) }
        #expect(throws: GroupVoiceMessage.DecodeError.unknownKind(5)) { try GroupVoiceMessage.decode([0x15, 1]) }
        #expect(throws: GroupVoiceMessage.DecodeError.badLength) { try GroupVoiceMessage.decode([0x11, 0]) }
        #expect(throws: GroupVoiceMessage.DecodeError.badLength) { try GroupVoiceMessage.decode([0x14]) }
    }
}
