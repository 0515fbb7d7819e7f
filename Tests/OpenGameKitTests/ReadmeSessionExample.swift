// This file's code between the markers is the README's session example, byte for byte
// (ReadmeSessionExampleTests checks that and runs it).
// BEGIN README EXAMPLE
import Foundation
import OpenGameKit

/// A two-player game's networking, as the Game Kit guide and the lecture wrote it.
final class GameController: GKSessionDelegate, GKSessionDataReceiveHandler {
    let session: GKSession
    var opponent: String?
    var onMessage: (String) -> Void = { print($0) }

    init(name: String) {
        session = GKSession(sessionID: "checkers", displayName: name, sessionMode: .peer)
        session.delegate = self
        session.setDataReceiveHandler(self, withContext: nil)
        session.isAvailable = true
    }

    // 1. Follow the other peers: connect to the first one seen, note who is connected.
    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        switch state {
        case .stateAvailable where opponent == nil:
            session.connect(toPeer: peerID, withTimeout: 10)
        case .stateConnected:
            opponent = peerID
        case .stateDisconnected:
            opponent = nil
        default:
            break
        }
    }

    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        try? session.acceptConnection(fromPeer: peerID)
    }

    // 2. Send data to the other peers.
    func mySendDataToPeers(_ text: String) {
        try? session.sendData(toAllPeers: Data(text.utf8), with: .reliable)
    }

    // 3. Receive data from the other peers.
    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        let name = session.displayName(forPeer: peer) ?? peer
        onMessage("\(name): \(String(decoding: data, as: UTF8.self))")
    }

    // 4. Clean up the session when you are ready to end the connection.
    func cleanUp() {
        session.disconnectFromAllPeers()
        session.isAvailable = false
        session.setDataReceiveHandler(nil, withContext: nil)
        session.delegate = nil
    }
}
// END README EXAMPLE
