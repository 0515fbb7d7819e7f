import ArgumentParser
import Foundation
import GameKitDiscovery
import NIOCore
import NIOPosix
import NetworkImpairment

#if canImport(Glibc)
import Glibc
#endif

/// `gk-mdns`: the discovery module on the command line — advertise a service or browse for a
/// type, printing one JSON line per event. It speaks the same output format as the tests'
/// python-zeroconf peer (Tests/Peers/zeroconf_peer.py), so tests and the benchmark drive both
/// alike.
@main
struct GKMDNS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gk-mdns",
        abstract: "Advertise or browse DNS-SD services over multicast DNS.",
        subcommands: [Register.self, Browse.self]
    )
}

/// Options both subcommands share.
struct CommonOptions: ParsableArguments {
    @Option(help: "Service type, e.g. _chat._udp.")
    var type: String

    @Option(name: .customLong("interface"), help: "Interface name to use (repeatable; default: all multicast interfaces).")
    var interfaces: [String] = []

    @Flag(help: "IPv4 only.")
    var ipv4Only = false

    @Flag(help: "IPv6 only.")
    var ipv6Only = false

    @Option(help: "Stop after this many seconds.")
    var seconds: Double = 30

    @Flag(help: "Do not stop at end of standard input.")
    var ignoreStdin = false

    var configuration: DiscoveryConfiguration {
        var configuration = DiscoveryConfiguration()
        if !self.interfaces.isEmpty { configuration.interfaceNames = self.interfaces }
        configuration.useIPv4 = !self.ipv6Only
        configuration.useIPv6 = !self.ipv4Only
        return configuration
    }

    func serviceType() throws -> ServiceType {
        do {
            return try ServiceType(self.type)
        } catch {
            throw ValidationError("invalid service type \(self.type)")
        }
    }

    /// Waits until the time is up, standard input ends, or SIGINT, SIGTERM or SIGHUP arrives.
    func waitUntilDone() async {
        let stop = StopCondition()
        if !self.ignoreStdin {
            // A blocking read on a thread of its own.
            Thread.detachNewThread {
                var byte: UInt8 = 0
                while read(0, &byte, 1) > 0 {}
                stop.fire("end of input")
            }
        }
        _ = await stop.wait(seconds: self.seconds)
    }
}

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Advertise a service until stopped, then say goodbye.")

    @OptionGroup var common: CommonOptions

    @Option(help: "Instance name.")
    var name: String

    @Option(help: "Port in the SRV record.")
    var port: UInt16

    @Option(help: "TXT entry key=value, key= or key (repeatable).")
    var txt: [String] = []

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        ToolLogging.bootstrap()
        var record = TXTRecord()
        for entry in self.txt {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            try record.set(String(parts[0]), parts.count > 1 ? String(parts[1]) : nil)
        }
        let discovery = try await DiscoveryEndpoint.start(configuration: self.common.configuration)
        let type = try self.common.serviceType()
        JSONLines.line(["event": "registering"])
        let port = self.port
        let registration = try discovery.register(ServiceDescription(instanceName: self.name, serviceType: type, port: port, txt: record)) { event in
            switch event {
            case .registered(_, let name):
                JSONLines.line(["event": "registered", "name": name.description, "instance": name.firstLabel, "port": Int(port)])
            case .renamed(_, let name):
                JSONLines.line(["event": "renamed", "name": name.description])
            }
        }
        await self.common.waitUntilDone()
        let name = registration.name?.description ?? ""
        registration.withdraw()
        await discovery.shutdown()
        JSONLines.line(["event": "unregistered", "name": name])
    }
}

struct Browse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Browse for a service type, printing found, updated and lost instances.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        try NetworkSandbox.requireIsolation()
        ToolLogging.bootstrap()
        let discovery = try await DiscoveryEndpoint.start(configuration: self.common.configuration)
        let browser = try discovery.browse(try self.common.serviceType())
        browser.onEvent = { event in
            let instance = event.instance
            var fields: [String: Any] = ["name": instance.name.description, "instance": instance.instanceName]
            switch event {
            case .found: fields["event"] = "found"
            case .updated: fields["event"] = "updated"
            case .lost: fields["event"] = "lost"
            }
            if case .lost = event {} else {
                fields["port"] = Int(instance.port)
                fields["host"] = instance.host.description
                fields["addresses"] = instance.addresses.map { $0.address.description }
                fields["scoped_addresses"] = instance.addresses.map(\.description)
                // Each key once, its first value; a bare key is null (as the python peer prints it).
                var txt: [String: Any] = [:]
                for string in instance.txt.strings {
                    let parts = string.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
                    let key = String(decoding: parts[0], as: UTF8.self)
                    if txt[key] == nil { txt[key] = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : NSNull() }
                }
                fields["txt"] = txt
            }
            JSONLines.line(fields)
        }
        JSONLines.line(["event": "browsing"])
        await self.common.waitUntilDone()
        browser.cancel()
        await discovery.shutdown()
        JSONLines.line(["event": "stopped"])
    }
}
