// The README's discovery example as a program of its own (ReadmeProgramTests runs it and
// stops it once it has found itself).
// BEGIN README EXAMPLE
import GameKitDiscovery

let discovery = try await DiscoveryEndpoint.start()
let type = ServiceType(sessionIdentifier: "chess")                     // _chess._udp
let me = PeerAdvertisement(peerID: "1234", displayName: "Alice", transportPort: 7000)

let registration = try discovery.register(ServiceDescription(
    instanceName: me.instanceName, serviceType: type, port: me.transportPort, txt: me.txtRecord))
print("advertised as", try await registration.registered())

let browser = try discovery.browse(type)
for await event in browser {
    switch event {
    case .found(let instance):
        print("found", PeerAdvertisement(txt: instance.txt)?.displayName ?? "?", instance.addresses)
    case .updated(let instance):
        print("updated", instance.name)
    case .lost(let instance):
        print("lost", instance.name)
    }
}
// END README EXAMPLE
