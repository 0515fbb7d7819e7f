// The lecture's chat view controller (seed 002), translated line for line into Swift as Apple's
// SDK imports Game Kit. The changes a port to OpenGameKit needs, and nothing else:
//   - `import OpenGameKit` for `import GameKit`; UIKit is replaced by the plain classes of
//     UIKitStandIns.swift, and Interface Builder's @IBOutlet/@IBAction attributes go with it;
//   - the data handler adopts GKSessionDataReceiveHandler (Linux has no Objective-C message send
//     to find `receiveData(_:fromPeer:inSession:context:)` on any object).
import Foundation
import OpenGameKit

class ChatViewController: UIViewController, GKPeerPickerControllerDelegate, GKSessionDelegate, UITextFieldDelegate, UITextViewDelegate,
    GKSessionDataReceiveHandler
{
    var messagesView: UITextView!
    var messageField: UITextField!
    var messages: [String]!
    var picker: GKPeerPickerController!
    var session: GKSession!

    func updateMessages() {
        self.messagesView.text = self.messages.joined(separator: "\n")
        let contentHeight = Int(self.messagesView.contentSize.height)
        let containerHeight = Int(self.messagesView.bounds.size.height)
        if contentHeight > containerHeight {
            let bottom = CGPoint(x: 0, y: contentHeight - containerHeight)
            self.messagesView.setContentOffset(bottom, animated: false)
        }
    }

    func clear() {
        self.messages.removeAll()
        self.updateMessages()
    }

    func connect() {
        self.picker = GKPeerPickerController()
        self.picker.delegate = self
        self.picker.show()
    }

    func disconnect() {
        session.disconnectFromAllPeers()
        session.isAvailable = false
        session.setDataReceiveHandler(nil, withContext: nil)
        session.delegate = nil
        self.session = nil
        self.connect()
    }

    func send() {
        let data = self.messageField.text!.data(using: .utf8)
        try? session.sendData(toAllPeers: data, with: .reliable)
        let formatted = "\(self.session.displayName(forPeer: self.session.peerID)!): \(self.messageField.text!)"
        self.messages.append(formatted)
        self.updateMessages()
    }

    override func viewWillAppear(_ animated: Bool) {
        super.viewWillAppear(animated)
        self.messageField.becomeFirstResponder()
        self.connect()
    }

    override func viewDidLoad() {
        self.messages = []
    }

    func peerPickerController(_ p: GKPeerPickerController, didConnectPeer peerID: String, to sess: GKSession) {
        self.session = sess
        self.session.delegate = self
        self.session.setDataReceiveHandler(self, withContext: nil)
        self.picker.dismiss()
    }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        if state == .stateDisconnected {
            self.disconnect()
        }
    }

    func textFieldShouldReturn(_ textField: UITextField) -> Bool {
        self.send()
        self.messageField.text = ""
        return true
    }

    func textView(_ textView: UITextView, shouldChangeTextIn range: NSRange, replacementText text: String) -> Bool {
        false
    }

    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) {
        let message = String(data: data, encoding: .utf8)!
        let formatted = "\(self.session.displayName(forPeer: peer)!): \(message)"
        self.messages.append(formatted)
        self.updateMessages()
    }
}
