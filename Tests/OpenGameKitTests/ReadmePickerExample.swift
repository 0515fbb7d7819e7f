// This file's code between the markers is the README's picker example, byte for byte
// (PickerControllerTests checks that; the example compiles as part of the tests).
import Foundation
import OpenGameKit

// BEGIN README EXAMPLE
final class Chat: GKPeerPickerControllerDelegate {
    let picker = GKPeerPickerController()
    var session: GKSession?

    func start() {
        picker.delegate = self
        picker.show()                    // terminal UI, or plain lines when not on a terminal
    }

    func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession) {
        self.session = session           // the picker has dismissed itself; the session is ours
        session.setDataReceiveHandler { data, peer, session in
            print(session.displayName(forPeer: peer) ?? peer, String(decoding: data, as: UTF8.self))
        }
    }

    func peerPickerControllerDidCancel(_ picker: GKPeerPickerController) { exit(0) }
}
// END README EXAMPLE
