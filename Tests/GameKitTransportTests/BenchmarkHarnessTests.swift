import Foundation
import NetworkImpairment
import Testing

/// gk-bench's transport harness on a twentieth of the work: every implementation runs, delivers
/// everything, and the JSON carries the named fields. Figures are not looked at (timings are
/// never asserted in tests).
@Suite("Benchmark harness", .serialized)
struct BenchmarkHarnessTests {
    @Test func transportBenchmarkProducesCompleteJSONForEveryImplementation() async throws {
        let result = try await SandboxScript.run(
            "gk-bench transport --quick --json --only reliable-1000,pingpong-unreliable-64 2>/dev/null",
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
        let ratios = lines.filter { $0["impl"] == nil }
        #expect(ratios.count == 2)
        #expect(ratios.allSatisfy { $0["ratio_vs_enet"] is Double })
    }

    /// gk-bench's discovery harness, one round per pair: every pair (gk-mdns and python-zeroconf
    /// from .venv, each registering and browsing) completes its round and the JSON carries the
    /// named fields. Times are not looked at.
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
