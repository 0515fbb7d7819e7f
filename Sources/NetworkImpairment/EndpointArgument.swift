import ArgumentParser
import NIOCore

/// Parses the `HOST:PORT` options of the project's tools (gk-impair's `--listen` and `--target`,
/// gk-rendezvous's `--listen` and `--relay-address`).
///
/// IPv6 addresses are written in brackets (`[::1]:9000`) so that the last colon is always
/// the port separator; a bare IPv6 address is rejected with a hint rather than guessed at.
/// Only numeric addresses (and `localhost`, meaning 127.0.0.1) are accepted: resolving a
/// name could send a DNS query, and arguments are parsed before the sandbox check.
public enum EndpointArgument {
    /// Returns the socket address for `text`, or throws a `ValidationError` naming `option`.
    public static func parse(_ text: String, option: String, allowPortZero: Bool) throws -> SocketAddress {
        let (host, portText) = try self.split(text, option: option)
        guard let port = Int(portText), (allowPortZero ? 0 : 1)...65_535 ~= port else {
            let range = allowPortZero ? "0 to 65535" : "1 to 65535"
            throw ValidationError("\(option) \(text): the port must be a number from \(range)")
        }
        let numericHost = host == "localhost" ? "127.0.0.1" : host
        guard let address = try? SocketAddress(ipAddress: numericHost, port: port) else {
            throw ValidationError("\(option) \(text): '\(host)' is not a numeric IPv4 or IPv6 address")
        }
        return address
    }

    /// As ``parse(_:option:allowPortZero:)``, but the port may be left out (`HOST`, `[IPV6]`):
    /// then it is `defaultPort`.
    public static func parse(_ text: String, option: String, defaultPort: Int) throws -> SocketAddress {
        let portless = text.hasPrefix("[") ? text.hasSuffix("]") : !text.contains(":")
        // A bare IPv6 address (two colons or more) goes on as it is, to get parse's hint.
        return try self.parse(portless ? "\(text):\(defaultPort)" : text, option: option, allowPortZero: false)
    }

    // MARK: - Splitting

    private static func split(_ text: String, option: String) throws -> (host: String, port: Substring) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"),
                text[text.index(after: close)...].hasPrefix(":")
            else {
                throw ValidationError("\(option) \(text): expected [IPV6]:PORT, for example [::1]:9000")
            }
            let host = String(text[text.index(after: text.startIndex)..<close])
            let port = text[text.index(close, offsetBy: 2)...]
            guard !host.isEmpty else {
                throw ValidationError("\(option) \(text): the address in brackets is empty")
            }
            return (host, port)
        }
        guard let colon = text.lastIndex(of: ":") else {
            throw ValidationError("\(option) \(text): expected HOST:PORT, for example 127.0.0.1:9000")
        }
        let host = String(text[..<colon])
        guard !host.isEmpty else {
            throw ValidationError("\(option) \(text): the host is missing, for example 127.0.0.1:9000")
        }
        guard !host.contains(":") else {
            throw ValidationError("\(option) \(text): write IPv6 addresses in brackets, for example [::1]:9000")
        }
        return (host, text[text.index(after: colon)...])
    }
}
