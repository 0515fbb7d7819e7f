import ArgumentParser
import NIOCore
import NetworkImpairment
import Testing

@Suite("HOST[:PORT] options")
struct EndpointArgumentTests {
    @Test("Without a port, the default; IPv6 in brackets, with or without a port")
    func defaultPorts() throws {
        let cases: [(String, String, Int)] = [
            ("10.201.0.1", "10.201.0.1", 3478), ("10.201.0.1:9", "10.201.0.1", 9), ("[2001:db8::1]", "2001:db8::1", 3478),
            ("[2001:db8::1]:5349", "2001:db8::1", 5349), ("localhost", "127.0.0.1", 3478),
        ]
        for (text, ip, port) in cases {
            let address = try EndpointArgument.parse(text, option: "--stun", defaultPort: 3478)
            #expect(address == (try SocketAddress(ipAddress: ip, port: port)), "\(text)")
        }
    }

    @Test("Bad addresses are refused with the option's name and a hint", arguments: [
        ("2001:db8::1", "write IPv6 addresses in brackets"), ("[2001:db8::1", "expected [IPV6]:PORT"), ("stun.example:3478", "is not a numeric"),
        ("10.0.0.1:0", "from 1 to 65535"), ("[]", "the address in brackets is empty"), (":3478", "the host is missing"),
    ])
    func refuses(text: String, hint: String) {
        do {
            _ = try EndpointArgument.parse(text, option: "--stun", defaultPort: 3478)
            Issue.record("\(text) was accepted")
        } catch {
            let message = String(describing: error)
            #expect(message.contains("--stun") && message.contains(hint), "\(message)")
        }
    }
}
