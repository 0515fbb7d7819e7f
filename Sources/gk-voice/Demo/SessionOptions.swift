import ArgumentParser
import NetworkImpairment
import OpenGameKit

/// The session options of the commands with a screen (`demo`, `group`): who this peer is, where it
/// looks for others (interfaces, an online room), and how long it runs.
struct SessionOptions: ParsableArguments {
    @Option(help: "Your display name (default: the host name).")
    var name: String?

    @Option(help: "A network interface to use (repeatable; default: all, or OGK_DISCOVERY_INTERFACES).")
    var interface: [String] = []

    @Option(help: "Quit after this many seconds (for scripts).")
    var seconds: Double?

    /// `--online [CODE]`, `--rendezvous`, `--online-only`.
    @OptionGroup var online: OnlineArguments

    func validate() throws {
        if self.online.rendezvous != nil, !self.online.isOnline {
            throw ValidationError("--rendezvous goes with --online")
        }
    }

    /// The session's configuration: its interfaces, and the online room when `--online`.
    func configuration() -> GKSession.Configuration {
        var configuration = GKSession.Configuration(interfaceNames: self.interface.isEmpty ? nil : self.interface)
        if self.online.isOnline {
            let room: GKSession.Configuration.Online.Room = self.online.joinCode.map { .join(code: $0) } ?? .create
            configuration.online = .init(rendezvous: self.online.rendezvousAddresses(), room: room, alsoNearby: !self.online.onlineOnly)
        }
        return configuration
    }
}
