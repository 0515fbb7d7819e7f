import ArgumentParser

/// `gk-bench`: the project's benchmarks, each measured side by side with its anchor in one run.
@main
struct GKBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-bench",
        abstract: "OpenGameKit benchmarks, side by side with their anchors.",
        discussion: "Run inside the project's network sandbox: scripts/sandbox .build/release/gk-bench transport (or discovery, session, voice, voice-call)",
        subcommands: [TransportBenchmark.self, FairnessBenchmark.self, DiscoveryBenchmark.self, SessionBenchmark.self, LanBenchmark.self, OnlineBenchmark.self, VoiceBenchmark.self, VoiceCallBenchmark.self, TransportPeer.self, PairRunner.self, TransportAllocations.self, DiscoveryPairRunner.self]
    )
}
