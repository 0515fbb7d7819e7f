// The Game Kit Programming Guide's snippets (seed 001), translated into Swift as Apple's SDK
// imports Game Kit, with the same changes as the lecture's controllers: the imports, and the data
// handlers adopt GKSessionDataReceiveHandler. Retain/release calls have no Swift equivalent.
import Foundation
import OpenGameKit
import OpenGameKitVoice

/// The session ID and name the guide's `sessionForConnectionType:` uses.
let myExampleSessionID = "gk-port-guide"
let myName = "Guide " + ProcessInfo.processInfo.hostName

/// "Finding Peers with Peer Picker" and "Working with Sessions", in one object.
final class GuideGameController: NSObject, GKPeerPickerControllerDelegate, GKSessionDelegate, GKSessionDataReceiveHandler {
    var gameSession: GKSession!
    /// What the guide's step 3 of "Working with Sessions" leaves to the application.
    var received: [String] = []
    var connectedPeers: [String] = []

    func findPeers() {
        // 1. Create and initialize a picker (a local: the shown picker keeps itself alive).
        let picker = GKPeerPickerController()
        // 2. Attach the delegate.
        picker.delegate = self
        // 3. Offer nearby and online connections.
        picker.connectionTypesMask = [.nearby, .online]
        // 8. Show it.
        picker.show()
    }

    // 4. Online is the application's to handle.
    func peerPickerController(_ picker: GKPeerPickerController, didSelect type: GKPeerPickerConnectionType) {
        if type == .online {
            picker.delegate = nil
            picker.dismiss()
            // An Internet interface of the application's own would go here.
        }
    }

    // 5. A session of the application's own making.
    func peerPickerController(_ picker: GKPeerPickerController, sessionFor type: GKPeerPickerConnectionType) -> GKSession {
        let session = GKSession(sessionID: myExampleSessionID, displayName: myName, sessionMode: .peer)
        return session!
    }

    // 6. Take the connected session over.
    func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession) {
        self.gameSession = session
        session.delegate = self
        session.setDataReceiveHandler(self, withContext: nil)
        picker.delegate = nil
        picker.dismiss()
    }

    // 7. The user cancelled.
    func peerPickerControllerDidCancel(_ picker: GKPeerPickerController) {
        picker.delegate = nil
    }

    // Working with sessions, 1: follow the peers.
    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        switch state {
        case .stateConnected:
            self.connectedPeers.append(peerID)
        case .stateDisconnected:
            self.connectedPeers.removeAll { $0 == peerID }
        default:
            break
        }
    }

    // 2: send data to the other peers.
    func mySendDataToPeers(_ data: Data) {
        try? gameSession.sendData(toAllPeers: data, with: .reliable)
    }

    // 3: receive data from them.
    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        self.received.append(String(decoding: data, as: UTF8.self))
    }

    // 4: clean up.
    func cleanUp() {
        gameSession.disconnectFromAllPeers()
        gameSession.isAvailable = false
        gameSession.setDataReceiveHandler(nil, withContext: nil)
        gameSession.delegate = nil
        gameSession = nil
    }
}

/// "Adding Voice Chat": a client over a connected session.
final class MyChatClient: NSObject, GKVoiceChatClient, GKSessionDataReceiveHandler {
    let session: GKSession

    init(session: GKSession) {
        self.session = session
        super.init()
        // 4. The session's data goes to the voice chat service.
        session.setDataReceiveHandler(self, withContext: nil)
    }

    // 2. The participant ID is the session's peer ID.
    func participantID() -> String {
        return session.peerID
    }

    // 3. The service's data goes over the session.
    func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        try? session.send(data, toPeers: [participantID], with: .reliable)
    }

    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        GKVoiceChatService.default().receivedData(data, fromParticipantID: peer)
    }

    /// 5 and 6: attach the client and call the other peer.
    static func attach(to session: GKSession, calling otherPeer: String) -> MyChatClient {
        let myClient = MyChatClient(session: session)
        GKVoiceChatService.default().client = myClient
        try? GKVoiceChatService.default().startVoiceChat(withParticipantID: otherPeer)
        return myClient
    }
}
