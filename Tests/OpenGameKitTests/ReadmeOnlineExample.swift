import OpenGameKit

/// The README's online example, as written there (flush left, so that its text matches byte for
/// byte); `OnlineSessionTests.theReadmeExampleMeetsInARoom` runs it against a real rendezvous.
// swift-format-ignore
func readmeOnlineExample(rendezvous: String) async throws -> (GKSession, GKSession) {
// BEGIN README EXAMPLE
var configuration = GKSession.Configuration()
configuration.online = .init(rendezvous: rendezvous, room: .create)
let host: GKSession = GKSession(sessionID: "chess", displayName: "Alice", sessionMode: .peer, configuration: configuration)
host.isAvailable = true
let code = try await host.waitForRoomCode()          // e.g. "7K3Q-XM4F-9ABR": tell your friend

var joining = GKSession.Configuration()
joining.online = .init(rendezvous: rendezvous, room: .join(code: code))
let friend: GKSession = GKSession(sessionID: "chess", displayName: "Bob", sessionMode: .peer, configuration: joining)
friend.isAvailable = true                            // Alice appears as .stateAvailable
// END README EXAMPLE
return (host, friend)
}
