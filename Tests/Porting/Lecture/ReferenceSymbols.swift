// Every symbol of the Game Kit Framework Reference (seed 000), one line each, with the type
// Apple's SDK gives it in Swift. The lines type-check in both language modes (this file is part of
// gk-port and gk-port-swift5, which CI builds); `ReferenceTable.check()` runs them and checks the
// values the reference gives (codes, masks, defaults), so `gk-port symbols` fails if one is wrong.
import Foundation
import OpenGameKit
import OpenGameKitVoice

enum ReferenceTable {
    /// Runs every line; returns the lines whose values are wrong, and how many lines ran.
    static func check() -> (failures: [String], count: Int) {
        var failures: [String] = []
        var count = 0
        func line(_ name: String, _ ok: Bool) {
            count += 1
            if !ok { failures.append(name) }
        }
        // A session and a picker to ask; nothing here touches the network.
        let session: GKSession = GKSession(sessionID: "reference", displayName: "Reference", sessionMode: .peer)
        let picker = GKPeerPickerController()
        let voice: GKVoiceChatService = GKVoiceChatService.default()

        // MARK: GKPeerPickerController
        line("GKPeerPickerController: NSObject", (picker as NSObject).isEqual(picker))
        line("connectionTypesMask", { let k: ReferenceWritableKeyPath<GKPeerPickerController, GKPeerPickerConnectionType> = \.connectionTypesMask; return picker[keyPath: k] == .nearby }())
        line("delegate", { let k: ReferenceWritableKeyPath<GKPeerPickerController, (any GKPeerPickerControllerDelegate)?> = \.delegate; return picker[keyPath: k] == nil }())
        line("visible", { let k: KeyPath<GKPeerPickerController, Bool> = \.isVisible; return picker[keyPath: k] == false }())
        line("dismiss", { let f: (GKPeerPickerController) -> () -> Void = GKPeerPickerController.dismiss; _ = f; return true }())
        line("show", { let f: (GKPeerPickerController) -> () -> Void = GKPeerPickerController.show; _ = f; return true }())
        line("GKPeerPickerConnectionTypeOnline", GKPeerPickerConnectionType.online.rawValue == 1 << 0)
        line("GKPeerPickerConnectionTypeNearby", GKPeerPickerConnectionType.nearby.rawValue == 1 << 1)

        // MARK: GKSession
        line("GKSession: NSObject", (session as NSObject).isEqual(session) && !session.isEqual(GKSession(sessionID: "x", displayName: "y", sessionMode: .peer)))
        line("initWithSessionID:displayName:sessionMode:", { let f: (String?, String?, GKSessionMode) -> GKSession? = GKSession.init(sessionID:displayName:sessionMode:); return f(nil, nil, .server) != nil }())
        line("available", { let k: ReferenceWritableKeyPath<GKSession, Bool> = \.isAvailable; return session[keyPath: k] == false }())
        line("delegate", { let k: ReferenceWritableKeyPath<GKSession, (any GKSessionDelegate)?> = \.delegate; return session[keyPath: k] == nil }())
        line("disconnectTimeout", { let k: ReferenceWritableKeyPath<GKSession, TimeInterval> = \.disconnectTimeout; return session[keyPath: k] == 20 }())
        line("displayName", { let k: KeyPath<GKSession, String?> = \.displayName; return session[keyPath: k] == "Reference" }())
        line("peerID", { let k: KeyPath<GKSession, String?> = \.peerID; return session[keyPath: k].flatMap { UInt32($0) } != nil }())
        line("sessionID", { let k: KeyPath<GKSession, String?> = \.sessionID; return session[keyPath: k] == "reference" }())
        line("sessionMode", { let k: KeyPath<GKSession, GKSessionMode> = \.sessionMode; return session[keyPath: k] == .peer }())
        line("acceptConnectionFromPeer:error:", { let f: (GKSession) -> (String?) throws -> Void = GKSession.acceptConnection(fromPeer:); return (try? f(session)("1")) == nil }())
        line("cancelConnectToPeer:", { let f: (GKSession) -> (String?) -> Void = GKSession.cancelConnect(toPeer:); f(session)("1"); return true }())
        line("connectToPeer:withTimeout:", { let f: (GKSession) -> (String?, TimeInterval) -> Void = GKSession.connect(toPeer:withTimeout:); _ = f; return true }())
        line("denyConnectionFromPeer:", { let f: (GKSession) -> (String?) -> Void = GKSession.denyConnection(fromPeer:); f(session)("1"); return true }())
        line("disconnectFromAllPeers", { let f: (GKSession) -> () -> Void = GKSession.disconnectFromAllPeers; f(session)(); return true }())
        line("disconnectPeerFromAllPeers:", { let f: (GKSession) -> (String?) -> Void = GKSession.disconnectPeer(fromAllPeers:); f(session)("1"); return true }())
        line("displayNameForPeer:", { let f: (GKSession) -> (String?) -> String? = GKSession.displayName(forPeer:); return f(session)(session.peerID) == "Reference" && f(session)("1") == nil }())
        line("peersWithConnectionState:", { let f: (GKSession) -> (GKPeerConnectionState) -> [String]? = GKSession.peers(with:); return f(session)(.stateConnected) == [] }())
        line("sendData:toPeers:withDataMode:error:", { let f: (GKSession) -> (Data?, [Any]?, GKSendDataMode) throws -> Void = GKSession.send(_:toPeers:with:); return (try? f(session)(Data(), ["1"], .reliable)) == nil }())
        line("sendDataToAllPeers:withDataMode:error:", { let f: (GKSession) -> (Data?, GKSendDataMode) throws -> Void = GKSession.sendData(toAllPeers:with:); return (try? f(session)(nil, .unreliable)) == nil }())
        line("setDataReceiveHandler:withContext:", { let f: (GKSession) -> ((any GKSessionDataReceiveHandler)?, UnsafeMutableRawPointer?) -> Void = GKSession.setDataReceiveHandler(_:withContext:); f(session)(nil, nil); return true }())
        line("GKSendDataReliable", GKSendDataMode.reliable.rawValue == Int32(0))
        line("GKSendDataUnreliable", GKSendDataMode.unreliable.rawValue == Int32(1))
        line("GKSessionModeServer", GKSessionMode.server.rawValue == Int32(0))
        line("GKSessionModeClient", GKSessionMode.client.rawValue == Int32(1))
        line("GKSessionModePeer", GKSessionMode.peer.rawValue == Int32(2))
        line("GKPeerStateAvailable", GKPeerConnectionState.stateAvailable.rawValue == Int32(0))
        line("GKPeerStateUnavailable", GKPeerConnectionState.stateUnavailable.rawValue == Int32(1))
        line("GKPeerStateConnected", GKPeerConnectionState.stateConnected.rawValue == Int32(2))
        line("GKPeerStateDisconnected", GKPeerConnectionState.stateDisconnected.rawValue == Int32(3))
        line("GKPeerStateConnecting", GKPeerConnectionState.stateConnecting.rawValue == Int32(4))
        line("GKSessionErrorDomain", GKSessionErrorDomain == "com.apple.gamekit.GKSessionErrorDomain" && GKSessionError.errorDomain == GKSessionErrorDomain)
        line("GKSessionInvalidParameterError", GKSessionError.invalidParameterError.rawValue == 30500)
        line("GKSessionPeerNotFoundError", GKSessionError.peerNotFoundError.rawValue == 30501)
        line("GKSessionDeclinedError", GKSessionError.declinedError.rawValue == 30502)
        line("GKSessionTimedOutError", GKSessionError.timedOutError.rawValue == 30503)
        line("GKSessionCancelledError", GKSessionError.cancelledError.rawValue == 30504)
        line("GKSessionConnectionFailedError", GKSessionError.connectionFailedError.rawValue == 30505)
        line("GKSessionConnectionClosedError", GKSessionError.connectionClosedError.rawValue == 30506)
        line("GKSessionDataTooBigError", GKSessionError.dataTooBigError.rawValue == 30507)
        line("GKSessionNotConnectedError", GKSessionError.notConnectedError.rawValue == 30508)
        line("GKSessionCannotEnableError", GKSessionError.cannotEnableError.rawValue == 30509)
        line("GKSessionInProgressError", GKSessionError.inProgressError.rawValue == 30510)
        line("GKSessionConnectivityError", GKSessionError.connectivityError.rawValue == 30201)
        line("GKSessionTransportError", GKSessionError.transportError.rawValue == 30202)
        line("GKSessionInternalError", GKSessionError.internalError.rawValue == 30203)
        line("GKSessionUnknownError", GKSessionError.unknownError.rawValue == 30204)
        line("GKSessionSystemError", GKSessionError.systemError.rawValue == 30205)

        // MARK: GKVoiceChatService
        line("GKVoiceChatService: NSObject", (voice as NSObject).isEqual(voice))
        line("defaultVoiceChatService", { let f: () -> GKVoiceChatService? = GKVoiceChatService.default; return f() === voice }())
        line("client", { let k: ReferenceWritableKeyPath<GKVoiceChatService, (any GKVoiceChatClient)?> = \.client; return voice[keyPath: k] == nil }())
        line("inputMeteringEnabled", { let k: ReferenceWritableKeyPath<GKVoiceChatService, Bool> = \.isInputMeteringEnabled; return voice[keyPath: k] == false }())
        line("inputMeterLevel", { let k: KeyPath<GKVoiceChatService, Float> = \.inputMeterLevel; _ = voice[keyPath: k]; return true }())
        line("microphoneMuted", { let k: ReferenceWritableKeyPath<GKVoiceChatService, Bool> = \.isMicrophoneMuted; return voice[keyPath: k] == false }())
        line("outputMeteringEnabled", { let k: ReferenceWritableKeyPath<GKVoiceChatService, Bool> = \.isOutputMeteringEnabled; return voice[keyPath: k] == false }())
        line("outputMeterLevel", { let k: KeyPath<GKVoiceChatService, Float> = \.outputMeterLevel; _ = voice[keyPath: k]; return true }())
        line("remoteParticipantVolume", { let k: ReferenceWritableKeyPath<GKVoiceChatService, Float> = \.remoteParticipantVolume; return voice[keyPath: k] == 1 }())
        line("acceptCallID:error:", { let f: (GKVoiceChatService) -> (Int) throws -> Void = GKVoiceChatService.acceptCallID; return (try? f(voice)(7)) == nil }())
        line("denyCallID:", { let f: (GKVoiceChatService) -> (Int) -> Void = GKVoiceChatService.denyCallID; f(voice)(7); return true }())
        line("receivedData:fromParticipantID:", { let f: (GKVoiceChatService) -> (Data?, String?) -> Void = GKVoiceChatService.receivedData(_:fromParticipantID:); f(voice)(Data(), "1"); return true }())
        line("receivedRealTimeData:fromParticipantID:", { let f: (GKVoiceChatService) -> (Data?, String?) -> Void = GKVoiceChatService.receivedRealTime(_:fromParticipantID:); f(voice)(Data(), "1"); return true }())
        line("startVoiceChatWithParticipantID:error:", { let f: (GKVoiceChatService) -> (String?) throws -> Void = GKVoiceChatService.startVoiceChat(withParticipantID:); return (try? f(voice)("1")) == nil }())
        line("stopVoiceChatWithParticipantID:", { let f: (GKVoiceChatService) -> (String?) -> Void = GKVoiceChatService.stopVoiceChat(withParticipantID:); f(voice)("1"); return true }())
        line("GKVoiceChatServiceErrorDomain", GKVoiceChatServiceErrorDomain == "com.apple.gamekit.GKVoiceChatServiceErrorDomain")
        line("GKVoiceChatServiceInternalError", GKVoiceChatServiceError.internalError.rawValue == 32000)
        line("GKVoiceChatServiceNoRemotePacketsError", GKVoiceChatServiceError.noRemotePacketsError.rawValue == 32001)
        line("GKVoiceChatServiceUnableToConnectError", GKVoiceChatServiceError.unableToConnectError.rawValue == 32002)
        line("GKVoiceChatServiceRemoteParticipantHangupError", GKVoiceChatServiceError.remoteParticipantHangupError.rawValue == 32003)
        line("GKVoiceChatServiceInvalidCallIDError", GKVoiceChatServiceError.invalidCallIDError.rawValue == 32004)
        line("GKVoiceChatServiceAudioUnavailableError", GKVoiceChatServiceError.audioUnavailableError.rawValue == 32005)
        line("GKVoiceChatServiceUninitializedClientError", GKVoiceChatServiceError.uninitializedClientError.rawValue == 32006)
        line("GKVoiceChatServiceClientMissingRequiredMethodsError", GKVoiceChatServiceError.clientMissingRequiredMethodsError.rawValue == 32007)
        line("GKVoiceChatServiceRemoteParticipantBusyError", GKVoiceChatServiceError.remoteParticipantBusyError.rawValue == 32008)
        line("GKVoiceChatServiceRemoteParticipantCancelledError", GKVoiceChatServiceError.remoteParticipantCancelledError.rawValue == 32009)
        line("GKVoiceChatServiceRemoteParticipantResponseInvalidError", GKVoiceChatServiceError.remoteParticipantResponseInvalidError.rawValue == 32010)
        line("GKVoiceChatServiceRemoteParticipantDeclinedInviteError", GKVoiceChatServiceError.remoteParticipantDeclinedInviteError.rawValue == 32011)
        line("GKVoiceChatServiceMethodCurrentlyInvalidError", GKVoiceChatServiceError.methodCurrentlyInvalidError.rawValue == 32012)
        line("GKVoiceChatServiceNetworkConfigurationError", GKVoiceChatServiceError.networkConfigurationError.rawValue == 32013)
        line("GKVoiceChatServiceUnsupportedRemoteVersionError", GKVoiceChatServiceError.unsupportedRemoteVersionError.rawValue == 32014)
        line("GKVoiceChatServiceOutOfMemoryError", GKVoiceChatServiceError.outOfMemoryError.rawValue == 32015)
        line("GKVoiceChatServiceInvalidParameterError", GKVoiceChatServiceError.invalidParameterError.rawValue == 32016)

        // MARK: The protocols, each method through the protocol as Apple's SDK declares it
        let all = EveryDelegateMethod()
        let pickerDelegate: any GKPeerPickerControllerDelegate = all
        line("peerPickerController:didConnectPeer:toSession:", { let f: (GKPeerPickerController, String, GKSession) -> Void = pickerDelegate.peerPickerController(_:didConnectPeer:to:); f(picker, "1", session); return all.calls.last == "didConnectPeer" }())
        line("peerPickerController:didSelectConnectionType:", { let f: (GKPeerPickerController, GKPeerPickerConnectionType) -> Void = pickerDelegate.peerPickerController(_:didSelect:); f(picker, .online); return all.calls.last == "didSelect" }())
        line("peerPickerController:sessionForConnectionType:", { let f: (GKPeerPickerController, GKPeerPickerConnectionType) -> GKSession = pickerDelegate.peerPickerController(_:sessionFor:); return f(picker, .nearby) === all.session }())
        line("peerPickerControllerDidCancel:", { let f: (GKPeerPickerController) -> Void = pickerDelegate.peerPickerControllerDidCancel; f(picker); return all.calls.last == "didCancel" }())
        let sessionDelegate: any GKSessionDelegate = all
        line("session:connectionWithPeerFailed:withError:", { let f: (GKSession, String, Error) -> Void = sessionDelegate.session(_:connectionWithPeerFailed:withError:); f(session, "1", GKSessionError(.declinedError)); return all.calls.last == "connectionWithPeerFailed" }())
        line("session:didFailWithError:", { let f: (GKSession, Error) -> Void = sessionDelegate.session(_:didFailWithError:); f(session, GKSessionError(.cannotEnableError)); return all.calls.last == "didFailWithError" }())
        line("session:didReceiveConnectionRequestFromPeer:", { let f: (GKSession, String) -> Void = sessionDelegate.session(_:didReceiveConnectionRequestFromPeer:); f(session, "1"); return all.calls.last == "didReceiveConnectionRequest" }())
        line("session:peer:didChangeState:", { let f: (GKSession, String, GKPeerConnectionState) -> Void = sessionDelegate.session(_:peer:didChange:); f(session, "1", .stateConnected); return all.calls.last == "didChangeState" }())
        let client: any GKVoiceChatClient = all
        line("participantID", { let f: () -> String = client.participantID; return f() == "1234" }())
        line("voiceChatService:didNotStartWithParticipantID:error:", { let f: (GKVoiceChatService, String, Error?) -> Void = client.voiceChatService(_:didNotStartWithParticipantID:error:); f(voice, "1", nil); return all.calls.last == "didNotStart" }())
        line("voiceChatService:didReceiveInvitationFromParticipantID:callID:", { let f: (GKVoiceChatService, String, Int) -> Void = client.voiceChatService(_:didReceiveInvitationFromParticipantID:callID:); f(voice, "1", 7); return all.calls.last == "didReceiveInvitation" }())
        line("voiceChatService:didStartWithParticipantID:", { let f: (GKVoiceChatService, String) -> Void = client.voiceChatService(_:didStartWithParticipantID:); f(voice, "1"); return all.calls.last == "didStart" }())
        line("voiceChatService:didStopWithParticipantID:error:", { let f: (GKVoiceChatService, String, Error?) -> Void = client.voiceChatService(_:didStopWithParticipantID:error:); f(voice, "1", nil); return all.calls.last == "didStop" }())
        line("voiceChatService:sendData:toParticipantID:", { let f: (GKVoiceChatService, Data, String) -> Void = client.voiceChatService(_:send:toParticipantID:); f(voice, Data(), "1"); return all.calls.last == "sendData" }())
        line("voiceChatService:sendRealTimeData:toParticipantID:", { let f: (GKVoiceChatService, Data, String) -> Void = client.voiceChatService(_:sendRealTime:toParticipantID:); f(voice, Data(), "1"); return all.calls.last == "sendRealTimeData" }())
        let handler: any GKSessionDataReceiveHandler = all
        line("receiveData:fromPeer:inSession:context:", { let f: (Data, String, GKSession, UnsafeMutableRawPointer?) -> Void = handler.receiveData(_:fromPeer:inSession:context:); f(Data(), "1", session, nil); return all.calls.last == "receiveData" }())

        // MARK: Errors as Swift imports Game Kit's
        line("catch GKSessionError.dataTooBigError", {
            do { throw GKSessionError(.dataTooBigError) } catch GKSessionError.dataTooBigError { return true } catch { return false }
        }())
        line("GKSessionError as NSError", { let e = GKSessionError(.declinedError) as NSError; return e.domain == GKSessionErrorDomain && e.code == 30502 }())
        line("catch GKVoiceChatServiceError.uninitializedClientError", {
            do { try GKVoiceChatService().startVoiceChat(withParticipantID: "1") } catch GKVoiceChatServiceError.uninitializedClientError { return true } catch { return false }
            return false
        }())
        line("GKVoiceChatServiceError.code", { let e = GKVoiceChatServiceError(.remoteParticipantBusyError); return e.code == .remoteParticipantBusyError && (e as NSError).code == 32008 }())
        return (failures, count)
    }
}

/// An object implementing every delegate, client and handler method exactly as Apple's SDK
/// declares it, recording which was called.
final class EveryDelegateMethod: NSObject, GKPeerPickerControllerDelegate, GKSessionDelegate, GKVoiceChatClient, GKSessionDataReceiveHandler {
    var calls: [String] = []
    let session: GKSession = GKSession(sessionID: "reference", displayName: "Delegate", sessionMode: .peer)

    func peerPickerController(_ picker: GKPeerPickerController, didSelect type: GKPeerPickerConnectionType) { calls.append("didSelect") }
    func peerPickerController(_ picker: GKPeerPickerController, sessionFor type: GKPeerPickerConnectionType) -> GKSession { session }
    func peerPickerController(_ picker: GKPeerPickerController, didConnectPeer peerID: String, to session: GKSession) { calls.append("didConnectPeer") }
    func peerPickerControllerDidCancel(_ picker: GKPeerPickerController) { calls.append("didCancel") }

    func session(_ session: GKSession, peer peerID: String, didChange state: GKPeerConnectionState) { calls.append("didChangeState") }
    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) { calls.append("didReceiveConnectionRequest") }
    func session(_ session: GKSession, connectionWithPeerFailed peerID: String, withError error: Error) { calls.append("connectionWithPeerFailed") }
    func session(_ session: GKSession, didFailWithError error: Error) { calls.append("didFailWithError") }

    func participantID() -> String { "1234" }
    func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String) { calls.append("sendData") }
    func voiceChatService(_ voiceChatService: GKVoiceChatService, sendRealTime data: Data, toParticipantID participantID: String) { calls.append("sendRealTimeData") }
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didReceiveInvitationFromParticipantID participantID: String, callID: Int) { calls.append("didReceiveInvitation") }
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStartWithParticipantID participantID: String) { calls.append("didStart") }
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didNotStartWithParticipantID participantID: String, error: Error?) { calls.append("didNotStart") }
    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?) { calls.append("didStop") }

    func receiveData(_ data: Data, fromPeer peer: String, inSession session: GKSession, context: UnsafeMutableRawPointer?) { calls.append("receiveData") }
}

/// Game Kit's classes are open: an application may subclass them, as on the iPhone. (They are
/// thread-safe, so Sendable; Swift 6 asks a subclass to say so again.)
final class CountingSession: GKSession, @unchecked Sendable {
    var sends = 0

    override func sendData(toAllPeers data: Data!, with mode: GKSendDataMode) throws {
        sends += 1
        try super.sendData(toAllPeers: data, with: mode)
    }
}

final class TitledPicker: GKPeerPickerController, @unchecked Sendable {
    override func show() { super.show() }
}

final class QuietVoiceChatService: GKVoiceChatService, @unchecked Sendable {
    override var remoteParticipantVolume: Float {
        get { super.remoteParticipantVolume }
        set { super.remoteParticipantVolume = min(newValue, 0.5) }
    }
}
