import ArgumentParser
import Foundation
import NetworkImpairment

/// Runs one (implementation, work) pair: a server process, then a client process, on loopback in
/// the current namespace; prints the client's JSON line with the server's delivered count added.
/// `gk-bench transport` runs this inside a fresh sandbox per pair.
struct PairRunner: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "transport-pair", abstract: "Run one benchmark pair (used by gk-bench itself).", shouldDisplay: false)

    @Option var impl: String
    @Option var work: String
    @Option var count: Int
    @Option var size: Int
    @Option var timeout: Double = 120
    @Option var port = 7001
    @Option(help: "gk-impair's impairment options (space-separated): the client reaches the server through that relay, seed 1.")
    var relay: String?

    func run() throws {
        try NetworkSandbox.requireIsolation()
        let (program, prefix) = try self.programFor(self.impl)
        let common = ["--work", self.anchorWork, "--count", "\(self.count)", "--size", "\(self.size)", "--timeout", "\(Int(self.timeout))"]
            + self.waitMode
        let server = ChildProcess(program, prefix + ["server", "--port", "\(self.port)"] + common, name: "server")
        try server.start()
        guard server.waitForLine("ready", timeout: 10) else {
            server.terminate()
            throw ValidationError("\(self.impl) server did not start")
        }
        let relay = try self.startRelay()
        let clientPort = relay?.port ?? self.port
        let client = ChildProcess(program, prefix + ["client", "--host", "127.0.0.1", "--port", "\(clientPort)"] + common, name: "client")
        try client.start()
        let clientExited = client.waitForExit(timeout: self.timeout + 10)
        if !clientExited { client.terminate() }
        if !server.waitForExit(timeout: 5) { server.terminate() }
        relay?.process.terminate()
        var line = client.lastJSONObject ?? ["impl": self.impl, "delivered": 0, "error": "client produced no result"]
        line["work"] = self.work
        line["impl"] = self.impl
        if let serverDelivered = server.lastJSONObject?["delivered"] { line["server_delivered"] = serverDelivered }
        let data = try JSONSerialization.data(withJSONObject: line, options: [.sortedKeys])
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    /// gk-impair between client and server when `--relay` is given: its process and the port
    /// the client sends to.
    private func startRelay() throws -> (process: ChildProcess, port: Int)? {
        guard let options = self.relay else { return nil }
        let path = URL(fileURLWithPath: ProjectLayout.executable).deletingLastPathComponent().appendingPathComponent("gk-impair").path
        guard FileManager.default.isExecutableFile(atPath: path) else { throw ValidationError("\(path) is missing: build gk-impair") }
        let arguments = ["--listen", "127.0.0.1:0", "--target", "127.0.0.1:\(self.port)", "--seed", "1", "--duration", "\(Int(self.timeout) + 15)"]
            + options.split(separator: " ").map(String.init)
        let process = ChildProcess(path, arguments, name: "relay")
        try process.start()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let line = process.lines.first(where: { $0.hasPrefix("listening ") }), let port = line.split(separator: " ").last.flatMap({ Int($0) }) {
                return (process, port)
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        process.terminate()
        throw ValidationError("gk-impair did not start: \(process.lines)")
    }

    /// The work name the programs understand.
    private var anchorWork: String {
        switch (self.impl, self.work) {
        case ("tcp", "stream"): "tcp-stream"
        case ("tcp", _): "tcp-pingpong"
        case ("udp", _), ("udp-epoll", _): "udp-pingpong"
        default: self.work
        }
    }

    /// How each anchor waits for its socket. ENet busy-polls (its best shot). The kernel anchors
    /// block in the kernel as a plain program does; `udp-epoll` sleeps in epoll_wait, as any
    /// event-driven program (this transport's NIO event loop included) must.
    private var waitMode: [String] {
        switch self.impl {
        case "enet": ["--wait", "spin"]
        case "tcp", "udp": ["--wait", "block"]
        case "udp-epoll": ["--wait", "epoll"]
        default: []
        }
    }

    private func programFor(_ impl: String) throws -> (String, [String]) {
        switch impl {
        case "opengamekit":
            return (ProjectLayout.executable, ["transport-peer"])
        case "enet", "tcp", "udp", "udp-epoll":
            guard let root = ProjectLayout.root else { throw ValidationError("cannot find the project root (scripts/sandbox)") }
            let name = impl == "enet" ? "enet_anchor" : "kernel_anchor"
            let path = root.appendingPathComponent("benchmarks/bin/\(name)").path
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw ValidationError("\(path) is missing: run make -C benchmarks")
            }
            return (path, [])
        default:
            throw ValidationError("unknown implementation '\(impl)'")
        }
    }
}
