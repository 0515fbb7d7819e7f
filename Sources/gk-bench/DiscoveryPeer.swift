import ArgumentParser
import Foundation

/// The two discovery implementations the benchmark runs, as programs that speak the same
/// command line and JSON lines: our `gk-mdns` and python-zeroconf's test peer
/// (Tests/Peers/zeroconf_peer.py, run with the repo's `.venv/bin/python`).
///
/// Both print `{"event":"registering"}` once their sockets are open and
/// `{"event":"registered"}` once the name is theirs; then they answer queries until standard
/// input ends, withdraw (goodbye packets) and print `{"event":"unregistered"}`. A browser prints
/// `{"event":"browsing"}`, then `found`, `updated` and `lost`. Every line carries `mono_ns`, the
/// monotonic clock of `NIODeadline.now()` (CLOCK_MONOTONIC on Linux), comparable across processes.
enum DiscoveryPeer: String, CaseIterable {
    case opengamekit
    case zeroconf

    /// The event after which the registering process sends nothing more on its own until it is
    /// withdrawn. python-zeroconf reports `registered` after probing and `announced` after its
    /// three announcements (225 ms apart), and withdrawing sooner waits for them; our responder
    /// reports `registered` at its first announcement and cancels the rest when withdrawn.
    var settledEvent: String {
        switch self {
        case .opengamekit: "registered"
        case .zeroconf: "announced"
        }
    }

    /// Where the peer programs are.
    struct Programs {
        /// gk-mdns, from the same directory as this gk-bench.
        var gkMDNS: String
        /// The venv's interpreter and the zeroconf peer script, under the repo root.
        var python: String
        var zeroconfPeer: String

        init(repoRoot: String?) throws {
            let binaries = URL(fileURLWithPath: ProjectLayout.executable).deletingLastPathComponent()
            self.gkMDNS = binaries.appendingPathComponent("gk-mdns").path
            guard FileManager.default.isExecutableFile(atPath: self.gkMDNS) else {
                throw ValidationError("\(self.gkMDNS) is missing: build the gk-mdns product in the same configuration as gk-bench")
            }
            guard let root = repoRoot.map({ URL(fileURLWithPath: $0) }) ?? ProjectLayout.root else {
                throw ValidationError("cannot find the repo root (scripts/sandbox); pass --repo-root")
            }
            self.python = root.appendingPathComponent(".venv/bin/python").path
            self.zeroconfPeer = root.appendingPathComponent("Tests/Peers/zeroconf_peer.py").path
            guard FileManager.default.isExecutableFile(atPath: self.python) else {
                throw ValidationError("\(self.python) is missing: run scripts/peers-venv")
            }
            guard FileManager.default.fileExists(atPath: self.zeroconfPeer) else {
                throw ValidationError("\(self.zeroconfPeer) is missing (wrong --repo-root?)")
            }
        }

        /// The executable and arguments that run `peer` with `arguments` (a subcommand and its
        /// options, common to both programs).
        func command(_ peer: DiscoveryPeer, _ arguments: [String]) -> (String, [String]) {
            switch peer {
            // The sandbox's namespace has only lo; name it rather than rely on the default
            // choice (every up, multicast interface with an address: the same here).
            case .opengamekit: (self.gkMDNS, arguments + ["--interface", "lo"])
            // python-zeroconf's default (InterfaceChoice.All, IPv4 only) is 127.0.0.1 here.
            case .zeroconf: (self.python, [self.zeroconfPeer] + arguments)
            }
        }
    }
}

/// A benchmark pair: who registers and who browses, written `registrar->browser`.
struct DiscoveryPair: CustomStringConvertible {
    var registrar: DiscoveryPeer
    var browser: DiscoveryPeer

    /// The four pairs of a run, in the order they run.
    static let all = [
        DiscoveryPair(registrar: .opengamekit, browser: .opengamekit),
        DiscoveryPair(registrar: .zeroconf, browser: .zeroconf),
        DiscoveryPair(registrar: .zeroconf, browser: .opengamekit),
        DiscoveryPair(registrar: .opengamekit, browser: .zeroconf),
    ]

    var description: String { "\(self.registrar.rawValue)->\(self.browser.rawValue)" }

    init(registrar: DiscoveryPeer, browser: DiscoveryPeer) {
        self.registrar = registrar
        self.browser = browser
    }

    init(_ text: String) throws {
        let parts = text.components(separatedBy: "->")
        guard parts.count == 2, let registrar = DiscoveryPeer(rawValue: parts[0]), let browser = DiscoveryPeer(rawValue: parts[1]) else {
            throw ValidationError("a pair is registrar->browser, each opengamekit or zeroconf; got '\(text)'")
        }
        self.init(registrar: registrar, browser: browser)
    }
}
