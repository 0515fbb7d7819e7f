// The README's group voice example, a whole program (ReadmeVoiceExampleTests runs four, each
// joining the others' call, through a private PulseAudio, and kills one with SIGKILL).
// BEGIN README EXAMPLE
import OpenGameKit
import OpenGameKitVoice

// group SESSION-ID NAME: meets everyone of the session nearby, all in one call.
let arguments = CommandLine.arguments
let session: GKSession = GKSession(sessionID: arguments[1], displayName: arguments[2], sessionMode: .peer)
session.disconnectTimeout = 5   // a member whose program dies leaves the call within 5 s
let changes = session.peerChanges, requests = session.connectionRequests
session.isAvailable = true
Task { for await request in requests { try? session.acceptConnection(fromPeer: request.peerID) } }
Task {
    // Of each pair, the one with the smaller ID connects.
    for await change in changes where change.state == .stateAvailable && session.peerID < change.peerID {
        try? await session.connect(to: change.peerID, timeout: 10)
    }
}

let chat = GKGroupVoiceChat(session: session)   // PulseAudio's default microphone and speaker
let events = chat.events
try chat.start()
for await event in events {
    let name = { (peerID: String) in session.displayName(forPeer: peerID) ?? peerID }
    switch event {
    case .participantJoined(let peerID): print("\(name(peerID)) joined: \(chat.participants.count + 1) in the call")
    case .participantLeft(let peerID): print("\(name(peerID)) left: \(chat.participants.count + 1) in the call")
    case .activeSpeakerChanged(let peerID?): print("\(peerID == session.peerID ? "You" : name(peerID)) speaking")
    case .stopped(let error): print("Stopped: \(error?.localizedDescription ?? "left")")
    default: continue
    }
}
// END README EXAMPLE
