import ArgumentParser
import NetworkImpairment

/// gk-voice: the voice chat demo of the lecture notes (`gk-voice demo`, the default), group voice
/// with everyone of a session (`gk-voice group`), and a headless call over a rendezvous server
/// for scripts (`gk-voice call`).
@main
struct GKVoice: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-voice",
        abstract: "Talk to a peer: find it with the picker, then a voice chat (the Game Kit lecture's voice demo).",
        subcommands: [DemoCommand.self, GroupCommand.self, CallCommand.self],
        defaultSubcommand: DemoCommand.self)

    /// `--online` may stand without its code: it then means a new room.
    static func main() async {
        await OnlineArguments.main(Self.self)
    }
}
