import Foundation
import GameKitTransport
import NetworkImpairment
import Testing

/// gk-bench's transport harness on a twentieth of the work: every implementation runs, delivers
/// everything, and the JSON carries the named fields. Figures are not looked at (timings are
/// never asserted in tests). Each run has a network namespace of its own (SandboxScript), and no
/// test judges a figure, so they run at once: serialized, they were the transport pass's last
/// 50 s.
@Suite("Benchmark harness")
struct BenchmarkHarnessTests {
    @Test func transportBenchmarkProducesCompleteJSONForEveryImplementation() async throws {
        let result = try await SandboxScript.run(
            "gk-bench transport --quick --json --only reliable-1000,pingpong-unreliable-64,allocations 2>/dev/null",
            timeout: 300
        )
        let lines = result.objects
        let measured = lines.filter { $0["impl"] != nil }
        #expect(Set(measured.compactMap { $0["impl"] as? String }) == ["opengamekit", "enet", "tcp", "udp", "udp-epoll"])
        for line in measured {
            for key in ["work", "impl", "msgs_per_s", "mb_per_s", "p50_us", "p99_us", "delivered", "expected"] {
                #expect(line.keys.contains(key), "\(line["impl"] ?? "?") lacks \(key)")
            }
            let delivered = line["delivered"] as? Int ?? -1
            let expected = line["expected"] as? Int ?? 0
            if (line["work"] as? String)?.hasSuffix("unreliable-64") == true {
                // Unreliable: a process starved of CPU may lose a few (seen with ENet in CI).
                #expect(delivered <= expected && delivered >= expected * 9 / 10, "\(line)")
            } else {
                #expect(delivered == expected, "\(line)")
            }
        }
        // Our lines say which cipher the link used and what ran it.
        for line in measured where line["impl"] as? String == "opengamekit" {
            #expect(["ChaCha20-Poly1305", "AES-256-GCM"].contains(line["cipher"] as? String ?? ""), "\(line)")
            #expect(line["cipher_backend"] as? String == TransportEndpoint.packetCipherBackend, "\(line)")
        }
        // Allocations per message, counted with the malloc interposer (AllocationTests pins them).
        let allocations = try #require(lines.first { $0["work"] as? String == "allocations" }, "\(lines)")
        let perMessage = allocations["allocations_per_message"] as? [String: Any] ?? [:]
        #expect(perMessage["reliable"] is Double && perMessage["unreliable"] is Double, "\(allocations)")
        let ratios = lines.filter { $0["impl"] == nil && $0["work"] as? String != "allocations" }
        #expect(ratios.count == 2)
        #expect(ratios.allSatisfy { $0["ratio_vs_enet"] is Double })
        // The ping-pong's latency ratios against ENet and the kernel's UDP, by name.
        let pingPong = try #require(ratios.first { $0["work"] as? String == "pingpong-unreliable-64" })
        for key in ["p50_ratio_vs_enet", "p99_ratio_vs_enet", "p50_ratio_vs_udp", "p99_ratio_vs_udp"] {
            #expect(pingPong[key] is Double, "\(key): \(pingPong)")
        }
    }

    /// A timed work item through the impairment relay (5 ms each way, 5 % loss, seed 1): both
    /// implementations run through gk-impair, what arrived in the time counts, in order, and the
    /// ratio is given.
    @Test func aTimedRelayItemCountsWhatArrivedThroughTheRelay() async throws {
        let result = try await SandboxScript.run(
            "gk-bench transport --quick --json --only reliable-500-delay5-loss5 2>/dev/null", timeout: 300)
        let measured = result.objects.filter { $0["impl"] != nil }
        #expect(Set(measured.compactMap { $0["impl"] as? String }) == ["opengamekit", "enet"], "\(result.lines)")
        for line in measured {
            let delivered = line["delivered"] as? Int ?? 0
            #expect(delivered > 0 && delivered <= line["expected"] as? Int ?? 0, "\(line)")
            #expect((line["msgs_per_s"] as? Double ?? 0) > 0, "\(line)")
            #expect(line["error"] == nil, "\(line)")
        }
        let ratio = try #require(result.objects.first { $0["impl"] == nil })
        #expect(ratio["work"] as? String == "reliable-500-delay5-loss5" && ratio["ratio_vs_enet"] is Double, "\(ratio)")
    }

    /// gk-bench's discovery harness, one round per pair: every pair (gk-mdns and python-zeroconf
    /// from .venv, each registering and browsing) completes its round and the JSON carries the
    /// named fields. Times are not looked at.
    /// `gk-bench fairness` through a real token bucket at a router namespace: every flow alone and
    /// every pair ran and carried data, with its share and the target's verdict computed from the run.
    @Test func fairnessBenchmarkRunsEveryFlowThroughTheBottleneck() async throws {
        let result = try await SandboxScript.run("gk-bench fairness --seconds 2 --queues deep:100ms --json 2>/dev/null", timeout: 300)
        let lines = result.objects.filter { $0["work"] as? String == "fairness" }
        let flows = Set(lines.compactMap { $0["flows"] as? String })
        // Kernel TCP with the system's congestion control, and with CUBIC when that is another.
        let system = try #require(lines.first?["tcp_congestion_control"] as? String)
        let cubic: Set<String> = system == "cubic" ? [] : ["tcp-cubic", "opengamekit+tcp-cubic"]
        #expect(
            flows == Set(["opengamekit", "tcp", "enet", "opengamekit+tcp", "opengamekit+enet", "opengamekit+opengamekit", "tcp+enet"]).union(cubic),
            "\(result.lines)")
        for line in lines {
            #expect((line["mb_per_s"] as? Double ?? 0) > 0, "\(line)")
            #expect(line["queue"] as? String == "deep")
            // By default the queue is at a router between senders and receivers.
            #expect(line["bottleneck"] as? String == "router", "\(line)")
            guard (line["flows"] as? String)?.contains("+") == true else { continue }
            #expect(line["share"] is Double && line["other_share"] is Double && line["capacity_mb_per_s"] is Double, "\(line)")
            #expect(["met", "missed", "reference"].contains(line["target"] as? String ?? ""), "\(line)")
        }
        // Two of ours: the ratio the target is judged on.
        #expect(lines.first { $0["flows"] as? String == "opengamekit+opengamekit" }?["ratio"] is Double)
    }

    @Test func discoveryBenchmarkCompletesARoundForEveryPair() async throws {
        let result = try await SandboxScript.run("gk-bench discovery --quick --rounds 1 --json 2>/dev/null", timeout: 300)
        let lines = result.objects
        let measured = lines.filter { $0["impl"] != nil }
        #expect(
            Set(measured.compactMap { $0["impl"] as? String })
                == ["opengamekit->opengamekit", "zeroconf->zeroconf", "zeroconf->opengamekit", "opengamekit->zeroconf"]
        )
        for line in measured {
            for key in ["work", "impl", "rounds", "failed", "appear_ms_p50", "appear_ms_p90", "disappear_ms_p50", "disappear_ms_p90"] {
                #expect(line.keys.contains(key), "\(line["impl"] ?? "?") lacks \(key)")
            }
            #expect(line["rounds"] as? Int == 1, "\(line)")
            #expect(line["failed"] as? Int == 0, "\(line)")
        }
        let ratios = lines.filter { $0["impl"] == nil }
        #expect(ratios.count == 1)
        #expect(ratios.first?.keys.contains("appear_ratio_vs_zeroconf") == true)
    }
}
