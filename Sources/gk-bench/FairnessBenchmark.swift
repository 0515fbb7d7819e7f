import ArgumentParser
import Foundation
import NetworkImpairment

/// `gk-bench fairness`: bulk flows through a real kernel bottleneck at a router. Senders here,
/// a router in a second namespace joined by a veth (`scripts/veth-pair`), receivers in a third
/// behind it; the router's egress toward the receivers is a token bucket (`tc tbf`, 20 Mbit/s by
/// default, drop-tail) with a shallow, a medium and a deep queue. The queue is at the router, not
/// on the senders' own interface: there, Linux's TCP small queues would hold kernel TCP to about
/// two packets in it (measured: cwnd 21, 2 packets in flight), which no remote bottleneck does.
/// Each of ours (a reliable stream of 1000-byte messages), kernel TCP and ENet alone gives the
/// capacity; then ours beside TCP (with the system's congestion control, and with CUBIC, Linux's
/// default, when the system's is another), beside ENet and beside a second of ours, for the same
/// time, and kernel TCP beside ENet for reference (how the anchors share with each other). A flow's
/// *share* is its rate over half the capacity (the most any one flow reached alone): 1 is fair.
/// Every figure is measured in this run; targets are checked against them, not asserted.
struct FairnessBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fairness", abstract: "Shares of a kernel bottleneck (tbf at a router namespace): ours beside TCP, ENet and ours.")

    @Flag(help: "Print one JSON line per run (the table goes to standard error).")
    var json = false

    @Flag(help: "3-second runs: checks the harness, not for figures.")
    var quick = false

    @Option(help: "Seconds of each run (default 20; 3 with --quick).")
    var seconds: Double?

    @Option(help: "The bottleneck's rate, as tc writes it.")
    var rate = "20mbit"

    @Option(help: "Queues to try, NAME:LATENCY (tbf's queue as the delay it may add), comma-separated.")
    var queues = "shallow:10ms,medium:20ms,deep:100ms"

    @Option(help: "Where the bottleneck is: `router` (a namespace between senders and receivers) or `sender` (the senders' own interface, where TCP small queues limit kernel TCP).")
    var bottleneck = "router"

    /// The programs of one implementation: (executable, arguments before the role, work, wait
    /// mode, arguments for the client only).
    static func program(_ impl: String, root: URL) -> (String, [String], work: String, wait: [String], client: [String]) {
        switch impl {
        case "tcp": (root.appendingPathComponent("benchmarks/bin/kernel_anchor").path, [], "tcp-stream", ["--wait", "block"], [])
        case "tcp-cubic": (root.appendingPathComponent("benchmarks/bin/kernel_anchor").path, [], "tcp-stream", ["--wait", "block"], ["--congestion", "cubic"])
        case "enet": (root.appendingPathComponent("benchmarks/bin/enet_anchor").path, [], "stream", ["--wait", "block"], [])
        default: (ProjectLayout.executable, ["transport-peer"], "stream", [], [])
        }
    }

    /// The system's TCP congestion control (`net.ipv4.tcp_congestion_control`), as kernel TCP
    /// uses it; read once.
    static let systemCongestionControl: String =
        (try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_congestion_control", encoding: .utf8))?
        .trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"

    /// How the table names a flow or a pair of flows (`opengamekit+tcp`): ours, and kernel TCP
    /// with its congestion control (`system`, the one plain `tcp` ran with).
    static func label(_ flows: String, system: String = Self.systemCongestionControl) -> String {
        flows.split(separator: "+").map { impl -> String in
            switch impl {
            case "opengamekit": "ours"
            case "tcp": "tcp-\(system)"
            default: String(impl)
            }
        }.joined(separator: "+")
    }

    func run() throws {
        try NetworkSandbox.requireIsolation()
        guard let root = ProjectLayout.root else { throw ValidationError("cannot find the project root (scripts/sandbox)") }
        guard let peer = ProcessInfo.processInfo.environment["OGK_PEER_NETNS"] else {
            // Outside the veth pair: run this command again inside it.
            let child = ChildProcess(
                root.appendingPathComponent("scripts/veth-pair").path, ["--", ProjectLayout.executable] + CommandLine.arguments.dropFirst(), name: "veth-pair")
            try child.start()
            // At most nine runs per queue, each its time and a few seconds to start and stop.
            let queues = Double(self.queues.split(separator: ",").count)
            let limit = queues * 9 * ((self.seconds ?? (self.quick ? 3 : 20)) + 8) + 120
            if !child.waitForExit(timeout: limit) { child.terminate() }
            for line in child.lines { print(line) }
            return
        }
        let seconds = self.seconds ?? (self.quick ? 3 : 20)
        guard ["router", "sender"].contains(self.bottleneck) else { throw ValidationError("--bottleneck: router or sender") }
        let atRouter = self.bottleneck == "router"
        // At the router: receivers in a third namespace behind it. At the sender: receivers in the
        // second namespace, and the queue on this side's own interface.
        let receivers = atRouter ? try Self.receiverNamespace(behind: peer) : nil
        let receiverPath = receivers?.path ?? peer
        let receiverAddress = atRouter ? Self.receiverAddress : "10.107.0.2"
        defer {
            receivers?.holder.terminate()
            if atRouter { _ = Self.shell("ip route del \(Self.receiverNetwork) 2>/dev/null") } else { _ = Self.shell("tc qdisc del dev ogk0 root") }
        }
        var lines: [[String: Any]] = []
        var table = "queue    flows               rates MB/s          shares         \n"
        for queue in self.queues.split(separator: ",") {
            let parts = queue.split(separator: ":").map(String.init)
            guard parts.count == 2 else { throw ValidationError("--queues: NAME:LATENCY, e.g. shallow:10ms") }
            let queueDevice = atRouter ? "nsenter --net=\(peer) -- tc qdisc replace dev ogk3" : "tc qdisc replace dev ogk0"
            guard Self.shell("\(queueDevice) root tbf rate \(self.rate) burst 32kbit latency \(parts[1])") else {
                throw ValidationError("tc could not set the bottleneck")
            }
            var alone: [String: Double] = [:]
            let cubic = Self.systemCongestionControl == "cubic" ? [] : ["tcp-cubic"]
            for impl in ["opengamekit", "tcp"] + cubic + ["enet"] {
                let rates = try self.run([impl], seconds: seconds, root: root, receivers: receiverPath, address: receiverAddress)
                alone[impl] = rates[0]
                lines.append([
                    "work": "fairness", "queue": parts[0], "flows": impl, "mb_per_s": rates[0], "tcp_congestion_control": Self.systemCongestionControl,
                    "bottleneck": self.bottleneck,
                ])
                table += "\(parts[0].padding(toLength: 9, withPad: " ", startingAt: 0))\(Self.label(impl).padding(toLength: 20, withPad: " ", startingAt: 0))\(String(format: "%.2f", rates[0]))\n"
            }
            let capacity = alone.values.max() ?? 0
            // The last pair is a reference: how kernel TCP itself shares with ENet.
            let pairs = [("opengamekit", "tcp")] + cubic.map { ("opengamekit", $0) } + [("opengamekit", "enet"), ("opengamekit", "opengamekit"), ("tcp", "enet")]
            for (first, other) in pairs {
                let rates = try self.run([first, other], seconds: seconds, root: root, receivers: receiverPath, address: receiverAddress)
                let shares = rates.map { capacity > 0 ? $0 / (capacity / 2) : 0 }
                var line: [String: Any] = [
                    "work": "fairness", "queue": parts[0], "flows": "\(first)+\(other)", "mb_per_s": rates[0], "other_mb_per_s": rates[1],
                    "tcp_congestion_control": Self.systemCongestionControl, "bottleneck": self.bottleneck,
                    "share": Self.round(shares[0]), "other_share": Self.round(shares[1]), "capacity_mb_per_s": capacity,
                ]
                if first == "tcp" || other == "enet" {
                    // Targets are beside kernel TCP and between two of ours; ENet's pairs show
                    // how it shares, for reference.
                    line["target"] = "reference"
                } else if other == "opengamekit" {
                    let ratio = rates[1] > 0 ? rates[0] / rates[1] : 0
                    line["ratio"] = Self.round(ratio)
                    line["target"] = (0.8...1.25).contains(ratio) ? "met" : "missed"
                } else {
                    line["target"] = shares.allSatisfy { (0.5...1.5).contains($0) } ? "met" : "missed"
                }
                lines.append(line)
                let names = Self.label("\(first)+\(other)")
                table += "\(parts[0].padding(toLength: 9, withPad: " ", startingAt: 0))\(names.padding(toLength: 20, withPad: " ", startingAt: 0))"
                table += String(format: "%.2f / %.2f", rates[0], rates[1]).padding(toLength: 20, withPad: " ", startingAt: 0)
                table += String(format: "%.2f / %.2f", shares[0], shares[1]).padding(toLength: 15, withPad: " ", startingAt: 0)
                table += "\(line["target"]!)\n"
            }
        }
        table += "  -> targets: beside kernel TCP each flow 0.5–1.5 of a fair share; two of ours within 0.8–1.25 of each other (bottleneck at the \(self.bottleneck))\n"
        if self.json { for line in lines { emitJSONLine(line) } }
        (self.json ? FileHandle.standardError : FileHandle.standardOutput).write(Data(table.utf8))
    }

    static func round(_ value: Double) -> Double { (value * 100).rounded() / 100 }

    /// One line of the table for a JSON line of this benchmark.
    static func describe(_ line: [String: Any]) -> String {
        func number(_ key: String) -> String { (line[key] as? Double).map { String(format: "%.2f", $0) } ?? "-" }
        let flows = Self.label(line["flows"] as? String ?? "", system: line["tcp_congestion_control"] as? String ?? "system")
        let head = "fairness \(line["queue"] ?? "") \(flows): \(number("mb_per_s"))"
        guard line["other_mb_per_s"] != nil else { return head + " MB/s alone" }
        return head + " / \(number("other_mb_per_s")) MB/s, shares \(number("share")) / \(number("other_share"))"
            + ((line["ratio"] as? Double).map { String(format: ", ratio %.2f", $0) } ?? "") + " -> \(line["target"] ?? "")"
    }

    @discardableResult
    static func shell(_ command: String) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// The receivers' network, behind the router, and the receivers' address in it.
    static let receiverNetwork = "10.108.0.0/24"
    static let receiverAddress = "10.108.0.2"

    /// A third namespace for the receivers, behind the router (`peer`, the far end of
    /// `scripts/veth-pair`): a veth `ogk3` (router, 10.108.0.1) to `ogk4` (receivers, 10.108.0.2),
    /// forwarding on in the router, routes both ways. The namespace lives as long as its holder
    /// process (killed when this process dies, by `setpriv --pdeathsig`).
    static func receiverNamespace(behind peer: String) throws -> (holder: ChildProcess, path: String) {
        let holder = ChildProcess("/usr/bin/unshare", ["--net", "--", "setpriv", "--pdeathsig", "KILL", "--", "sleep", "86400"], name: "receivers")
        try holder.start()
        let path = "/proc/\(holder.processIdentifier)/ns/net"
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net")) ?? ""
        // Wait (bounded) until the holder is in a namespace of its own.
        for _ in 0..<100 {
            if let id = try? FileManager.default.destinationOfSymbolicLink(atPath: path), id != own,
                (try? String(contentsOfFile: "/proc/\(holder.processIdentifier)/comm", encoding: .utf8))?.hasPrefix("sleep") == true
            {
                break
            }
            usleep(50_000)
        }
        let router = "nsenter --net=\(peer) --"
        let receivers = "nsenter --net=\(path) --"
        let steps = [
            "\(router) ip link add ogk3 type veth peer name ogk4",
            "\(router) ip link set ogk4 netns \(holder.processIdentifier)",
            "\(router) ip link set ogk3 up",
            "\(router) ip addr add 10.108.0.1/24 dev ogk3",
            "\(router) sysctl -qw net.ipv4.ip_forward=1",
            "\(receivers) ip link set lo up",
            "\(receivers) ip link set ogk4 up",
            "\(receivers) ip addr add \(Self.receiverAddress)/24 dev ogk4",
            "\(receivers) ip route add default via 10.108.0.1",
            "ip route replace \(Self.receiverNetwork) via 10.107.0.2",
        ]
        for step in steps where !Self.shell(step) {
            holder.terminate()
            throw ValidationError("could not set up the receivers' namespace: \(step)")
        }
        return (holder, path)
    }

    /// Runs one bulk flow per implementation at once for `seconds`; returns each flow's rate
    /// (MB/s) as its receiver counted it.
    func run(_ implementations: [String], seconds: Double, root: URL, receivers: String, address: String) throws -> [Double] {
        var servers: [ChildProcess] = []
        defer { for server in servers where !server.waitForExit(timeout: 1) { server.terminate() } }
        for (index, impl) in implementations.enumerated() {
            let (program, prefix, work, wait, _) = Self.program(impl, root: root)
            let server = ChildProcess(
                "/usr/bin/nsenter",
                ["--net=\(receivers)", "--", program] + prefix + [
                    "server", "--host", address, "--port", "\(7100 + index)", "--work", work, "--count", "1000000000", "--size", "1000",
                    "--timeout", "\(Int(seconds) + 3)",
                ] + wait, name: "\(impl) server")
            try server.start()
            guard server.waitForLine("ready", timeout: 10) else { throw ValidationError("\(impl) server did not start") }
            servers.append(server)
        }
        var clients: [ChildProcess] = []
        for (index, impl) in implementations.enumerated() {
            let (program, prefix, work, wait, clientOnly) = Self.program(impl, root: root)
            let client = ChildProcess(
                program, prefix + [
                    "client", "--host", address, "--port", "\(7100 + index)", "--work", work, "--count", "1000000000", "--size", "1000",
                    "--timeout", "\(Int(seconds))",
                ] + wait + clientOnly, name: "\(impl) client")
            try client.start()
            clients.append(client)
        }
        for client in clients where !client.waitForExit(timeout: seconds + 15) { client.terminate() }
        return servers.map { server in
            _ = server.waitForExit(timeout: 10)
            let delivered = server.lastJSONObject?["delivered"] as? Int ?? 0
            return Double(delivered) * 1000 / seconds / 1e6
        }
    }
}
