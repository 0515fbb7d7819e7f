import ArgumentParser
import Foundation

/// The online-room options gk-chat and gk-voice share: `--online` (alone: a new room; with a
/// code: join it), `--rendezvous HOST:PORT[,…]` and `--online-only`. Each tool turns them into
/// its session's configuration and says which combinations it takes.
public struct OnlineArguments: ParsableArguments {
    /// What `--online` alone stands for once ``normalized(_:)`` has given it a value.
    public static let newRoom = "new"

    @Option(help: ArgumentHelp("Meet in an online room: alone, create one; with a code, join it.", valueName: "CODE"))
    public var online: String?

    @Option(help: "The rendezvous of online rooms: HOST:PORT, or several separated by commas, tried in turn (default: OGK_RENDEZVOUS, else 127.0.0.1:7878).")
    public var rendezvous: String?

    @Flag(help: "With --online: do not look for peers on the local network too.")
    public var onlineOnly = false

    public init() {}

    /// Whether `--online` was given.
    public var isOnline: Bool { self.online != nil }

    /// The code of the room to join; nil to create one (or without `--online`).
    public var joinCode: String? { self.online == Self.newRoom ? nil : self.online }

    /// `--rendezvous`, else `OGK_RENDEZVOUS`, else a rendezvous on this machine, as a list.
    public func rendezvousAddresses(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        (self.rendezvous ?? environment["OGK_RENDEZVOUS"] ?? "127.0.0.1:7878").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
    }

    /// `--online-only` needs `--online`.
    public func validate() throws {
        if self.onlineOnly, self.online == nil {
            throw ValidationError("--online-only goes with --online")
        }
    }

    /// The command line with a value after an `--online` that has none (the parser needs one).
    public static func normalized(_ arguments: [String]) -> [String] {
        var arguments = arguments
        if let index = arguments.firstIndex(of: "--online"), index == arguments.count - 1 || arguments[index + 1].hasPrefix("-") {
            arguments.insert(Self.newRoom, at: index + 1)
        }
        return arguments
    }

    /// A tool's `main`: parses the command line with ``normalized(_:)`` and runs the command.
    public static func main<Root: ParsableCommand>(_ root: Root.Type) async {
        do {
            var command = try root.parseAsRoot(Self.normalized(Array(CommandLine.arguments.dropFirst())))
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            root.exit(withError: error)
        }
    }
}
