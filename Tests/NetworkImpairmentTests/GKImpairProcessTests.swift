import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import NetworkImpairment

/// `gk-impair` as a process: its output contract (`listening HOST PORT`, one JSON line of
/// statistics, exit 0 on SIGINT) and its refusals. Run through `scripts/sandbox`; skipped
/// when the executable is not built next to the test bundle.
@Suite("gk-impair process")
struct GKImpairProcessTests {
    /// `gk-impair` in the build directory that holds this test bundle.
    static let executable: URL? = {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidate = directory.appendingPathComponent("gk-impair")
        return FileManager.default.isExecutableFile(atPath: candidate.path) ? candidate : nil
    }()

    // MARK: - Running the process

    /// A started `gk-impair` with its output collected as it arrives.
    final class RunningRelay: Sendable {
        let process: Process
        private let output = NIOLockedValueBox(Data())
        private let errors = NIOLockedValueBox(Data())

        init(arguments: [String], environment: [String: String]? = nil) throws {
            let process = Process()
            process.executableURL = GKImpairProcessTests.executable
            process.arguments = arguments
            if let environment { process.environment = environment }
            let stdout = Pipe()
            let stderr = Pipe()
            process.standardOutput = stdout
            process.standardError = stderr
            for (pipe, box) in [(stdout, self.output), (stderr, self.errors)] {
                pipe.fileHandleForReading.readabilityHandler = { handle in
                    let data = handle.availableData
                    if data.isEmpty {
                        handle.readabilityHandler = nil
                    } else {
                        box.withLockedValue { $0.append(data) }
                    }
                }
            }
            self.process = process
            try process.run()
        }

        var lines: [String] {
            String(decoding: self.output.withLockedValue { $0 }, as: UTF8.self).split(separator: "\n").map(String.init)
        }

        var errorText: String {
            String(decoding: self.errors.withLockedValue { $0 }, as: UTF8.self)
        }

        /// Waits (bounded) until stdout has `count` lines.
        func waitForLines(_ count: Int) async -> [String] {
            let deadline = ContinuousClock.now + .seconds(15)
            while self.lines.count < count, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            return self.lines
        }

        /// Waits (bounded) for the process to exit, killing it if it does not; returns its status.
        func waitForExit() async -> Int32 {
            let deadline = ContinuousClock.now + .seconds(15)
            while self.process.isRunning, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            if self.process.isRunning {
                kill(self.process.processIdentifier, SIGKILL)
                self.process.waitUntilExit()
                return -1
            }
            // Let the pipes drain.
            try? await Task.sleep(for: .milliseconds(50))
            return self.process.terminationStatus
        }
    }

    // MARK: - Tests

    @Test(
        "gk-impair prints its address, relays with the seeded loss, and reports JSON statistics on SIGINT",
        .enabled(if: executable != nil, "gk-impair is not built next to the test bundle")
    )
    func relaysAndReportsOnInterrupt() async throws {
        try NetworkSandbox.requireIsolation()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let target = try await UDPPeer.bind(on: group, echo: true)
        let client = try await UDPPeer.bind(on: group, echo: false)
        let relay = try RunningRelay(arguments: [
            "--listen", "127.0.0.1:0", "--target", "127.0.0.1:\(target.address.port!)",
            "--loss", "0.25", "--seed", "7", "--duration", "60",
        ])

        let first = await relay.waitForLines(1).first ?? ""
        let words = first.split(separator: " ")
        #expect(words.count == 3 && words[0] == "listening" && words[1] == "127.0.0.1")
        if words.count == 3, let port = Int(words[2]) {
            let profile = ImpairmentProfile(loss: 0.25)
            let count = 200
            let expected = expectedRelayOutcome(forward: profile, backward: profile, seed: 7, count: count)
            let address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
            for start in stride(from: 0, to: count, by: 40) {
                for index in start..<start + 40 {
                    try await client.send(numbered(index), to: address)
                }
                #expect(await client.waitForReceived(atLeast: expected.atClient.filter { $0 < start + 40 }.count))
            }
            #expect(client.receivedPayloads.map(number(of:)) == expected.atClient)

            relay.process.interrupt()
            #expect(await relay.waitForExit() == 0)
            let lines = relay.lines
            #expect(lines.count == 2)
            let report = try JSONDecoder().decode([String: ImpairmentStatistics].self, from: Data((lines.last ?? "").utf8))
            #expect(lines.last?.hasPrefix(#"{"forward":{"#) == true)
            #expect(report["forward"]?.submitted == count)
            #expect(report["forward"]?.dropped == count - expected.atTarget.count)
            #expect(report["backward"]?.submitted == expected.atTarget.count)
            #expect(report["backward"]?.delivered == expected.atClient.count)
        } else {
            relay.process.terminate()
            _ = await relay.waitForExit()
        }
        await client.close()
        await target.close()
        try await group.shutdownGracefully()
    }

    @Test(
        "gk-impair rejects bad arguments with a message and a non-zero exit",
        .enabled(if: executable != nil, "gk-impair is not built next to the test bundle"),
        arguments: [
            (["--listen", "127.0.0.1:0", "--target", "127.0.0.1:9", "--loss", "5"], "--loss"),
            (["--listen", "127.0.0.1:0", "--target", "127.0.0.1:0"], "port"),
            (["--listen", "::1:0", "--target", "127.0.0.1:9"], "brackets"),
            (["--listen", "127.0.0.1:0", "--target", "127.0.0.1:9", "--burst-loss", "0.1"], "--burst-length"),
            (["--listen", "127.0.0.1:0", "--target", "127.0.0.1:9", "--reorder", "0.1"], "--reorder-delay-ms"),
            (["--listen", "gamehost.invalid:0", "--target", "127.0.0.1:9"], "numeric"),
            (["--target", "127.0.0.1:9"], "--listen"),
        ]
    )
    func rejectsBadArguments(arguments: [String], mentioned: String) async throws {
        let relay = try RunningRelay(arguments: arguments)
        #expect(await relay.waitForExit() != 0)
        #expect(relay.errorText.contains(mentioned))
        #expect(relay.lines.isEmpty)
    }

    @Test(
        "gk-impair refuses to run outside scripts/sandbox",
        .enabled(if: executable != nil, "gk-impair is not built next to the test bundle")
    )
    func refusesToRunOutsideSandbox() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["OGK_SANDBOX"] = nil
        let relay = try RunningRelay(
            arguments: ["--listen", "127.0.0.1:0", "--target", "127.0.0.1:9", "--duration", "1"],
            environment: environment
        )
        #expect(await relay.waitForExit() != 0)
        #expect(relay.errorText.contains("scripts/sandbox"))
        #expect(relay.lines.isEmpty)
    }
}
