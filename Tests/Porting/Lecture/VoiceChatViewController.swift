// The lecture's voice chat view controller (seed 002), translated line for line into Swift as
// Apple's SDK imports Game Kit. The same changes as the chat controller's, and `import
// OpenGameKitVoice` for the voice half. (The lecture's header names the mute switch
// `microphoneToggle` and its implementation `muteMicrophone`; the implementation's name is kept.)
import Foundation
import OpenGameKit
import OpenGameKitVoice

class VoiceChatViewController: UIViewController, GKPeerPickerControllerDelegate, GKSessionDelegate, GKVoiceChatClient,
    GKSessionDataReceiveHandler
{
    var picker: GKPeerPickerController!
    var session: GKSession!
    var muteMicrophone: UISwitch!
    var status: UILabel!

    func connect() {
        self.picker = GKPeerPickerController()
        self.picker.delegate = self
        self.picker.show()
    }

    func disconnect() {
        self.status.text = "Not Connected"
        session.disconnectFromAllPeers()
        session.isAvailable = false
        session.setDataReceiveHandler(nil, withContext: nil)
        session.delegate = nil
        self.session = nil
        if self.muteMicrophone.isOn {
            self.toggleMute()
        }
        self.connect()
    }

    func toggleMute() {
        GKVoiceChatService.default().isMicrophoneMuted = self.muteMicrophone.isOn
    }

    func setVolume(_ sender: Any) {
        let slider = sender as! UISlider
        GKVoiceChatService.default().remoteParticipantVolume = slider.value
    }

    func peerPickerController(_ p: GKPeerPickerController, didConnectPeer peerID: String, to sess: GKSession) {
        self.session = sess
        self.session.delegate = self
        self.session.setDataReceiveHandler(self, withContext: nil)
        self.picker.dismiss()
    }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        switch state {
        case .stateConnected:
            GKVoiceChatService.default().client = self
            try? GKVoiceChatService.default().startVoiceChat(withParticipantID: peerID)
            self.status.text = "Connected to \(self.session.displayName(forPeer: peerID)!)"
        case .stateDisconnected:
            GKVoiceChatService.default().stopVoiceChat(withParticipantID: peerID)
            self.disconnect()
        default:
            print("\(#function) - state = \(state.rawValue)")
        }
    }

    func participantID() -> String {
        return session.peerID
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        // Objective-C's message to a nil session did nothing; Swift's optional chaining does the
        // same (the service may still signal the ended chat after `disconnect` dropped it).
        try? self.session?.send(data, toPeers: [participantID], with: .reliable)
    }

    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        GKVoiceChatService.default().receivedData(data, fromParticipantID: peer)
    }

    override func viewDidLoad() {
        super.viewDidLoad()
        GKVoiceChatService.default().remoteParticipantVolume = 0.5
        self.connect()
    }
}
