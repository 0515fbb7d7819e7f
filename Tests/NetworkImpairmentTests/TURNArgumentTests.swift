import NetworkImpairment
import Testing

@Suite("TURN server options")
struct TURNArgumentTests {
    @Test("USER:PASSWORD@HOST[:PORT] is split at the first colon and the last @")
    func parses() throws {
        let plain = try #require(TURNArgument("ogk:secret@10.201.0.1"))
        #expect(plain == TURNArgument("ogk:secret@10.201.0.1"))
        #expect((plain.username, plain.password, plain.address) == ("ogk", "secret", "10.201.0.1"))
        let odd = try #require(TURNArgument("me:pa:ss@word@[2001:db8::1]:3478"))
        #expect((odd.username, odd.password, odd.address) == ("me", "pa:ss@word", "[2001:db8::1]:3478"))
    }

    @Test("Anything else is refused", arguments: ["ogk@host", "ogk:secret@", "host:3478", "", ":@"])
    func refuses(text: String) {
        #expect(TURNArgument(text) == nil)
    }
}
