import Foundation
import NetworkImpairment
import Testing

/// Heap allocations per 1000-byte message in steady state, sender and receiver together, counted
/// by ordo-one's malloc interposer in `gk-bench transport-allocations` (a count, not a time).
/// The ceilings are the figures this build reached (debug: the tests' build) plus the spread seen
/// between runs (acknowledgements and timers fall differently from run to run, ±1); a change that
/// adds an allocation per message fails here.
@Suite("Allocations per message")
struct AllocationTests {
    static let reliableCeiling = 34.0
    static let unreliableCeiling = 37.5

    static var interposer: String { SandboxScript.binaries.appendingPathComponent("libMallocInterposerSwift.so").path }

    /// The allocations line of `result`: every message delivered, counted, within the pins.
    static func checkFigures(_ result: SandboxScript.Result, path: String) throws {
        let line = try #require(result.objects.first { $0["work"] as? String == "allocations" }, "\(result.lines)")
        #expect(line["path"] as? String == path, "\(line)")
        let perMessage = line["allocations_per_message"] as? [String: Any] ?? [:]
        let reliable = try #require(perMessage["reliable"] as? Double, "\(line)")
        let unreliable = try #require(perMessage["unreliable"] as? Double, "\(line)")
        #expect(line["reliable_delivered"] as? Int == 1000, "\(line)")
        #expect((line["unreliable_delivered"] as? Int ?? 0) >= 900, "\(line)")
        // Something was counted at all (the interposer was loaded and hooked).
        #expect(reliable > 1 && unreliable > 1, "\(line)")
        #expect(reliable <= Self.reliableCeiling, "\(path) reliable: \(reliable) allocations per message, pinned at \(Self.reliableCeiling)")
        #expect(unreliable <= Self.unreliableCeiling, "\(path) unreliable: \(unreliable) allocations per message, pinned at \(Self.unreliableCeiling)")
    }

    @Test func steadyStateAllocationsStayWithinThePinnedFigures() async throws {
        let result = try await SandboxScript.run("env LD_PRELOAD=\(Self.interposer) gk-bench transport-allocations --bursts 10", timeout: 120)
        try Self.checkFigures(result, path: "lan")
    }

    /// An online session's link through the relay (the endpoints in a room of a gk-rendezvous in
    /// the same sandbox, no direct paths): the relay's header is written in place in the send
    /// buffer and the payload of a relayed datagram is a slice of what was read, so a relayed
    /// message stays within the LAN's pinned figures.
    @Test func aRelayedMessageCostsNoMoreAllocationsThanALANOne() async throws {
        let result = try await SandboxScript.run(
            """
            d=$(mktemp -d)
            gk-rendezvous --listen 127.0.0.1:7878 > $d/r &
            R=$!
            \(SandboxScript.awaitListening("$d/r"))
            env LD_PRELOAD=\(Self.interposer) gk-bench transport-allocations --bursts 10 --rendezvous 127.0.0.1:7878
            kill $R; wait; rm -rf $d
            """, timeout: 120)
        try Self.checkFigures(result, path: "relayed")
    }

    @Test func withoutTheInterposerTheCommandRefusesToGuess() async throws {
        let result = try await SandboxScript.run("gk-bench transport-allocations 2>&1", timeout: 60)
        #expect(result.status == 2, "\(result.lines)")
        #expect(result.lines.contains { $0.contains("LD_PRELOAD=") }, "\(result.lines)")
    }
}
