// The README's async server as a program of its own (ReadmeProgramTests connects a
// gk-session to it).
// BEGIN README EXAMPLE
import Foundation
import OpenGameKit

let session = GKSession(sessionID: "checkers", displayName: "Alice", sessionMode: .server, password: "swordfish")
session.isAvailable = true
for await request in session.connectionRequests {
    try session.acceptConnection(fromPeer: request.peerID)
    try await session.write(Data("welcome, \(request.displayName ?? "stranger")".utf8), toPeers: [request.peerID], with: .reliable)
}
// END README EXAMPLE
