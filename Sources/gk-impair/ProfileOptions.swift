import ArgumentParser
import NIOCore
import NetworkImpairment

// MARK: - Forward options

/// The impairment options for client → target (and, unless overridden, target → client).
struct ProfileOptions: ParsableArguments {
    @Option(help: "Independent drop probability per datagram, 0...1.")
    var loss: Double?

    @Option(name: .customLong("burst-loss"), help: "Average loss of Gilbert–Elliott bursts, 0..<1 (needs --burst-length).")
    var burstLoss: Double?

    @Option(name: .customLong("burst-length"), help: "Mean burst length in datagrams, at least 1.")
    var burstLength: Double?

    @Option(name: .customLong("delay-ms"), help: "Fixed one-way delay in milliseconds.")
    var delayMilliseconds: Double?

    @Option(name: .customLong("jitter-ms"), help: "Extra uniformly random delay in 0...X milliseconds per datagram.")
    var jitterMilliseconds: Double?

    @Option(help: "Probability that a datagram is held back by --reorder-delay-ms, 0...1.")
    var reorder: Double?

    @Option(name: .customLong("reorder-delay-ms"), help: "How long a reordered datagram is held back, in milliseconds.")
    var reorderDelayMilliseconds: Double?

    @Option(help: "Probability that a datagram is delivered twice, 0...1.")
    var duplicate: Double?

    @Option(help: "Probability that a datagram has one bit flipped, 0...1.")
    var corrupt: Double?

    var overrides: ProfileOverrides {
        ProfileOverrides(
            prefix: "--",
            loss: self.loss,
            burstLoss: self.burstLoss,
            burstLength: self.burstLength,
            delayMilliseconds: self.delayMilliseconds,
            jitterMilliseconds: self.jitterMilliseconds,
            reorder: self.reorder,
            reorderDelayMilliseconds: self.reorderDelayMilliseconds,
            duplicate: self.duplicate,
            corrupt: self.corrupt
        )
    }
}

// MARK: - Backward options

/// Per-field overrides for target → client; each one replaces the forward value.
struct BackwardProfileOptions: ParsableArguments {
    @Flag(name: .customLong("backward-perfect"), help: "Do not impair target → client at all (--back-* options still apply).")
    var perfect = false

    @Option(name: .customLong("back-loss"), help: "Like --loss, for target → client only.")
    var loss: Double?

    @Option(name: .customLong("back-burst-loss"), help: "Like --burst-loss, for target → client only.")
    var burstLoss: Double?

    @Option(name: .customLong("back-burst-length"), help: "Like --burst-length, for target → client only.")
    var burstLength: Double?

    @Option(name: .customLong("back-delay-ms"), help: "Like --delay-ms, for target → client only.")
    var delayMilliseconds: Double?

    @Option(name: .customLong("back-jitter-ms"), help: "Like --jitter-ms, for target → client only.")
    var jitterMilliseconds: Double?

    @Option(name: .customLong("back-reorder"), help: "Like --reorder, for target → client only.")
    var reorder: Double?

    @Option(name: .customLong("back-reorder-delay-ms"), help: "Like --reorder-delay-ms, for target → client only.")
    var reorderDelayMilliseconds: Double?

    @Option(name: .customLong("back-duplicate"), help: "Like --duplicate, for target → client only.")
    var duplicate: Double?

    @Option(name: .customLong("back-corrupt"), help: "Like --corrupt, for target → client only.")
    var corrupt: Double?

    var overrides: ProfileOverrides {
        ProfileOverrides(
            prefix: "--back-",
            loss: self.loss,
            burstLoss: self.burstLoss,
            burstLength: self.burstLength,
            delayMilliseconds: self.delayMilliseconds,
            jitterMilliseconds: self.jitterMilliseconds,
            reorder: self.reorder,
            reorderDelayMilliseconds: self.reorderDelayMilliseconds,
            duplicate: self.duplicate,
            corrupt: self.corrupt
        )
    }
}
