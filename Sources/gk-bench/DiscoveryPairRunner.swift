import ArgumentParser
import Foundation
import NIOCore
import NetworkImpairment

/// Runs one discovery pair in the current namespace: one browser for the whole run, then, round
/// after round, a register process with a fresh instance name that is started, seen, withdrawn
/// and seen to go. Prints one JSON line with the pair's percentiles.
/// `gk-bench discovery` runs this inside a fresh sandbox per pair.
///
/// Times, all on the monotonic clock of `NIODeadline.now()` (CLOCK_MONOTONIC on Linux, which the
/// peers print as `mono_ns`):
/// - appear = the browser's `found` for the instance − this process's clock just before it
///   spawned the register process. It includes the register process's own start-up (for
///   python-zeroconf, the interpreter and its imports), as a user launching a program sees.
///   `appear_after_registering` subtracts the register process's `registering` line instead
///   (printed once its sockets are open), leaving probing, announcing and the browser's work.
/// - disappear = the browser's `lost` for the instance − this process's clock just before it
///   closed the register process's standard input (the register process then withdraws).
///
/// The input is closed once the browser has found the instance and the register process has
/// settled (see `DiscoveryPeer.settledEvent`), plus a short quiet time.
struct DiscoveryPairRunner: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "discovery-pair", abstract: "Run one discovery pair (used by gk-bench itself).", shouldDisplay: false)

    @Option(help: "registrar->browser, e.g. zeroconf->opengamekit.")
    var impl: String

    @Option var rounds: Int

    @Option(help: "The service type for this pair, e.g. _bench1._udp.")
    var type: String

    @Option(help: "Seconds to wait for a found or a lost event before the round counts as failed.")
    var roundTimeout: Double = 10

    @Option(help: "The repo root (holding .venv and Tests/Peers); default: found from this executable.")
    var repoRoot: String?

    /// Quiet time between the register process settling and its withdrawal.
    static let settleSeconds = 0.3

    func validate() throws {
        guard self.rounds > 0 else { throw ValidationError("--rounds must be positive") }
        guard self.roundTimeout > 0 else { throw ValidationError("--round-timeout must be positive") }
    }

    func run() throws {
        try NetworkSandbox.requireIsolation()
        let pair = try DiscoveryPair(self.impl)
        let programs = try DiscoveryPeer.Programs(repoRoot: self.repoRoot)
        // Every child has a --seconds bound of its own, beyond which it stops by itself.
        let browserSeconds = Double(self.rounds) * (3 * self.roundTimeout + 20) + 30
        let (program, arguments) = programs.command(pair.browser, ["browse", "--type", self.type, "--seconds", "\(Int(browserSeconds))"])
        let browser = ChildProcess(program, arguments, name: "browser", input: true, captureErrors: true)
        try browser.start()
        var result = DiscoveryPairResult(pair: pair)
        if browser.waitForObject(timeout: 15, where: { $0["event"] as? String == "browsing" }) != nil {
            for round in 1...self.rounds {
                result.add(self.runRound(round, pair: pair, programs: programs, browser: browser))
            }
        } else {
            result.errors.append("browser did not start: \(browser.errorTail ?? "no message")")
            result.failed = self.rounds
        }
        browser.closeInput()
        if !browser.waitForExit(timeout: 15) { browser.terminate() }
        let data = try JSONSerialization.data(withJSONObject: result.json(rounds: self.rounds), options: [.sortedKeys])
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    /// One round: register, wait for found, withdraw, wait for lost, wait for the exit.
    private func runRound(_ round: Int, pair: DiscoveryPair, programs: DiscoveryPeer.Programs, browser: ChildProcess) -> DiscoveryRound {
        var outcome = DiscoveryRound()
        let name = "bench-\(round)"
        let seconds = Int(3 * self.roundTimeout + 10)
        let (program, arguments) = programs.command(
            pair.registrar, ["register", "--type", self.type, "--name", name, "--port", "\(7000 + round)", "--seconds", "\(seconds)"]
        )
        let register = ChildProcess(program, arguments, name: name, input: true, captureErrors: true)
        self.measure(round, name: name, pair: pair, register: register, browser: browser, into: &outcome)
        // Withdraw (if not done yet) and let the process end before the next round.
        register.closeInput()
        if !register.waitForExit(timeout: 15) {
            register.terminate()
            outcome.fail("round \(round): the register process did not exit after withdrawing")
        }
        return outcome
    }

    /// Starts `register` and measures its appearance and disappearance at `browser`.
    private func measure(_ round: Int, name: String, pair: DiscoveryPair, register: ChildProcess, browser: ChildProcess, into outcome: inout DiscoveryRound) {
        let spawned = NIODeadline.now().uptimeNanoseconds
        do {
            try register.start()
        } catch {
            outcome.fail("round \(round): cannot start the register process: \(error)")
            return
        }
        guard let found = browser.waitForObject(timeout: self.roundTimeout, where: { Self.event($0, "found", about: name) }),
            let foundAt = found["mono_ns"] as? Int
        else {
            outcome.fail("round \(round): no found within \(self.roundTimeout) s" + (register.errorTail.map { " (register: \($0))" } ?? ""))
            return
        }
        outcome.appearNanoseconds = foundAt - Int(spawned)
        if let registering = register.objects.first(where: { $0["event"] as? String == "registering" })?["mono_ns"] as? Int {
            outcome.appearAfterRegisteringNanoseconds = foundAt - registering
        }

        guard register.waitForObject(timeout: self.roundTimeout, where: { $0["event"] as? String == pair.registrar.settledEvent }) != nil else {
            outcome.fail("round \(round): the register process never printed \(pair.registrar.settledEvent)")
            return
        }
        Thread.sleep(forTimeInterval: Self.settleSeconds)

        let closed = NIODeadline.now().uptimeNanoseconds
        register.closeInput()
        guard let lost = browser.waitForObject(timeout: self.roundTimeout, where: { Self.event($0, "lost", about: name) }),
            let lostAt = lost["mono_ns"] as? Int
        else {
            outcome.fail("round \(round): no lost within \(self.roundTimeout) s of withdrawing")
            return
        }
        guard lostAt >= Int(closed) else {
            outcome.fail("round \(round): lost before the withdrawal")
            return
        }
        outcome.disappearNanoseconds = lostAt - Int(closed)
    }

    /// Whether `object` is the browser's `event` line about instance `name`.
    private static func event(_ object: [String: Any], _ event: String, about name: String) -> Bool {
        guard object["event"] as? String == event else { return false }
        return object["instance"] as? String == name || (object["name"] as? String)?.hasPrefix(name + ".") == true
    }
}

/// What one round measured; a nil time was not measured (see `failure`).
struct DiscoveryRound {
    var appearNanoseconds: Int?
    var appearAfterRegisteringNanoseconds: Int?
    var disappearNanoseconds: Int?
    var failure: String?

    mutating func fail(_ message: String) {
        self.failure = self.failure.map { "\($0); \(message)" } ?? message
    }
}

/// A pair's rounds, summed up into its JSON line.
struct DiscoveryPairResult {
    var pair: DiscoveryPair
    var appear: [Double] = []
    var appearAfterRegistering: [Double] = []
    var disappear: [Double] = []
    var failed = 0
    var errors: [String] = []

    init(pair: DiscoveryPair) {
        self.pair = pair
    }

    mutating func add(_ round: DiscoveryRound) {
        func milliseconds(_ nanoseconds: Int) -> Double { Double(nanoseconds) / 1e6 }
        if let value = round.appearNanoseconds { self.appear.append(milliseconds(value)) }
        if let value = round.appearAfterRegisteringNanoseconds { self.appearAfterRegistering.append(milliseconds(value)) }
        if let value = round.disappearNanoseconds { self.disappear.append(milliseconds(value)) }
        if let failure = round.failure {
            self.failed += 1
            self.errors.append(failure)
        }
    }

    func json(rounds: Int) -> [String: Any] {
        func percentile(_ samples: [Double], _ fraction: Double) -> Any {
            guard let value = Percentiles(samples).value(at: fraction) else { return NSNull() }
            return (value * 10).rounded() / 10
        }
        var line: [String: Any] = [
            "work": "discovery", "impl": self.pair.description, "rounds": rounds, "failed": self.failed,
            "appear_ms_p50": percentile(self.appear, 0.5), "appear_ms_p90": percentile(self.appear, 0.9),
            "appear_after_registering_ms_p50": percentile(self.appearAfterRegistering, 0.5),
            "appear_after_registering_ms_p90": percentile(self.appearAfterRegistering, 0.9),
            "disappear_ms_p50": percentile(self.disappear, 0.5), "disappear_ms_p90": percentile(self.disappear, 0.9),
        ]
        if !self.errors.isEmpty { line["errors"] = self.errors }
        return line
    }
}
