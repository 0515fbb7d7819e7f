import Foundation

/// The picker's stand-in as its session's delegate while it is visible: the session calls it on
/// its delegate queue, and it passes each event, with the peer's display name, to the picker.
final class PickerSessionEvents: GKSessionDelegate, @unchecked Sendable {
    struct Event: @unchecked Sendable {
        enum Kind {
            case peerChanged(GKPeerPickerPeer, GKPeerConnectionState)
            case request(GKPeerPickerPeer)
            case failed(GKPeerPickerPeer, any Error)
            case sessionFailed(any Error)
        }
        let session: GKSession
        let kind: Kind
    }

    private weak var picker: GKPeerPickerController?
    /// The showing of the picker this stand-in serves.
    private let showing: UInt64

    init(picker: GKPeerPickerController, showing: UInt64) {
        self.picker = picker
        self.showing = showing
    }

    private func forward(_ session: GKSession, _ kind: Event.Kind) {
        self.picker?.sessionEvent(Event(session: session, kind: kind), showing: self.showing)
    }

    private func peer(_ peerID: String, in session: GKSession) -> GKPeerPickerPeer {
        GKPeerPickerPeer(peerID: peerID, displayName: session.displayName(forPeer: peerID) ?? peerID)
    }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) {
        self.forward(session, .peerChanged(self.peer(peerID, in: session), state))
    }

    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        self.forward(session, .request(self.peer(peerID, in: session)))
    }

    func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) {
        self.forward(session, .failed(self.peer(peerID, in: session), error))
    }

    func session(_ session: GKSession, didFailWithError error: Error) {
        self.forward(session, .sessionFailed(error))
    }
}
