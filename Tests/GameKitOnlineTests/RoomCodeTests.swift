import Testing

@testable import GameKitOnline

@Suite("Room codes")
struct RoomCodeTests {
    @Test("Six symbols of Crockford's base32 carry 30 bits, and read back")
    func codesRoundTrip() throws {
        for value: UInt32 in [0, 1, 31, 32, 0x1234_5678 & 0x3FFF_FFFF, (1 << 30) - 1] {
            let code = try #require(RoomCode(value: value))
            #expect(code.description.count == 6)
            #expect(RoomCode(code.description) == code)
            #expect(RoomCode(code.displayed) == code)
        }
        #expect(RoomCode(value: 0)?.description == "000000")
        #expect(RoomCode(value: (1 << 30) - 1)?.description == "ZZZZZZ")
        #expect(RoomCode(value: 1 << 30) == nil)
    }

    @Test("What people type is forgiven: case, I/L for 1, O for 0, hyphens and spaces")
    func typingIsForgiven() {
        let code = RoomCode("7K1-0XM")
        #expect(code != nil)
        #expect(RoomCode("7k1 0xm") == code)
        #expect(RoomCode("7KI-OXM") == code)
        #expect(RoomCode("7kl0xm") == code)
        #expect(code?.displayed == "7K1-0XM")
    }

    @Test("Anything else is refused", arguments: ["", "7K10X", "7K10XMM", "7K10XU", "7K10X!", "ÄK10XM", "7K1_0XM"])
    func badCodesAreRefused(text: String) {
        #expect(RoomCode(text) == nil)
    }
}
