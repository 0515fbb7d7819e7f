#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The guard that keeps this project's test traffic off real networks.
///
/// Tests, benchmarks and `gk-impair` open real sockets and may blast datagrams at high rates,
/// and the transport itself uses multicast discovery. None of that may ever leave the
/// machine. `scripts/sandbox` runs a command in a private network namespace that has only a
/// loopback interface (and, for some tests, the project's own `ogk*` veth pairs) and exports
/// `OGK_SANDBOX=1`. Every program that opens a socket calls ``requireIsolation()`` first and
/// refuses to run anywhere else.
public enum NetworkSandbox {
    // MARK: - Error

    /// Thrown by ``requireIsolation()`` when the process is not inside `scripts/sandbox`.
    public struct NotIsolatedError: Error, CustomStringConvertible, Equatable {
        /// What was wrong (the environment variable, or the interfaces that are visible).
        public let reason: String

        /// The reason and how to fix it.
        public var description: String {
            "refusing to open sockets: \(self.reason). Run it through scripts/sandbox, "
                + "e.g. `scripts/sandbox swift test` (it creates a private network namespace with only loopback)."
        }
    }

    // MARK: - Checking

    /// Returns normally only inside `scripts/sandbox`: the environment has `OGK_SANDBOX=1`
    /// and every network interface of this process's network namespace is `lo` or starts
    /// with `ogk` (the project's veth pairs).
    ///
    /// Call it before opening any socket. The interface check catches a process that
    /// inherited `OGK_SANDBOX=1` but runs in the host's network namespace. Interfaces are
    /// read from `/proc/net/dev`, which always shows the calling process's namespace;
    /// `/sys/class/net` is not used because it shows the namespace that mounted sysfs (the
    /// host's, inside `scripts/sandbox`). Where `/proc/net/dev` does not exist (not Linux)
    /// this always throws.
    ///
    /// A test that needs interfaces named like a real machine's (e.g. `docker0`, to check that
    /// discovery leaves container bridges alone) creates them inside the sandbox and names them
    /// in `OGK_SANDBOX_EXTRA_INTERFACES` (comma separated). They are accepted only while this
    /// process's network namespace is not the one `scripts/sandbox` was started in (it exports
    /// that one's identity as `OGK_SANDBOX_OUTER_NETNS`): a process that inherited the variables
    /// but runs outside is still refused.
    public static func requireIsolation() throws(NotIsolatedError) {
        let marker = getenv("OGK_SANDBOX").map { String(cString: $0) }
        let interfaces = self.readFile("/proc/net/dev").map(self.interfaceNames(procNetDev:))
        let declared = getenv("OGK_SANDBOX_EXTRA_INTERFACES").map { String(cString: $0).split(separator: ",").map(String.init) } ?? []
        let own = self.namespace("/proc/self/ns/net")
        let outer = getenv("OGK_SANDBOX_OUTER_NETNS").map { String(cString: $0) }
        let isPrivate = own != nil && outer != nil && own != outer
        if let error = self.isolationProblem(sandboxVariable: marker, interfaces: interfaces, declared: declared, privateNamespace: isPrivate) {
            throw error
        }
    }

    /// The pure decision behind ``requireIsolation()``: `nil` when isolated, otherwise why not.
    /// `declared` names are accepted only in a `privateNamespace`.
    static func isolationProblem(
        sandboxVariable: String?, interfaces: [String]?, declared: [String] = [], privateNamespace: Bool = false
    ) -> NotIsolatedError? {
        guard sandboxVariable == "1" else {
            return NotIsolatedError(reason: "the environment variable OGK_SANDBOX is not 1")
        }
        guard let interfaces else {
            return NotIsolatedError(reason: "/proc/net/dev cannot be read, so network isolation cannot be checked")
        }
        let accepted = privateNamespace ? Set(declared) : []
        let foreign = interfaces.filter { $0 != "lo" && !$0.hasPrefix("ogk") && !accepted.contains($0) }.sorted()
        guard foreign.isEmpty else {
            return NotIsolatedError(
                reason: "OGK_SANDBOX is 1 but network interfaces other than lo and ogk* are visible (\(foreign.joined(separator: ", ")))"
            )
        }
        return nil
    }

    // MARK: - Reading the interfaces

    /// The interface names in the text of `/proc/net/dev` (two header lines, then one
    /// `name: counters...` line per interface).
    static func interfaceNames(procNetDev text: String) -> [String] {
        text.split(separator: "\n").dropFirst(2).compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].trimmingPrefix(while: { $0 == " " })
            return name.isEmpty ? nil : String(name)
        }
    }

    /// The target of a namespace link (`net:[4026531840]`), nil when it cannot be read.
    private static func namespace(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The whole file, read with plain POSIX calls (files in /proc report a size of 0).
    private static func readFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            contents.append(contentsOf: chunk[..<count])
        }
        return String(decoding: contents, as: UTF8.self)
    }
}
