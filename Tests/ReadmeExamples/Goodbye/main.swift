import Foundation
import OpenGameKit

// The README's "Ending a session" example in a program of its own (GoodbyeProcessTests stops
// it with SIGTERM): a session that accepts every request, until SIGTERM.
// Usage: gk-readme-goodbye SESSION-ID NAME

final class Accepter: NSObject, GKSessionDelegate {
    func session(_ session: GKSession, didReceiveConnectionRequestFromPeer peerID: String) {
        try? session.acceptConnection(fromPeer: peerID)
    }
}

let arguments = CommandLine.arguments
let accepter = Accepter()
let session: GKSession = GKSession(sessionID: arguments[1], displayName: arguments[2], sessionMode: .peer)
session.delegate = accepter
session.isAvailable = true

// BEGIN README EXAMPLE
signal(SIGTERM, SIG_IGN)
let terminate = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .main)
terminate.setEventHandler {
    GKSession.closeAll()
    exit(0)
}
terminate.resume()
// END README EXAMPLE

FileHandle.standardOutput.write(Data("ready\n".utf8))
dispatchMain()
