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

/// The whole code a player reads to friends: nameplate, secret part and check symbol
/// (PROTOCOL §18.2).
@Suite("Room invitations")
struct RoomInvitationTests {
    /// Written by an independent implementation (`scripts/room-code-vectors.py`).
    @Test(
        "Nameplate, secret and check symbol read as the reference writes them",
        arguments: [
            (0x3FFF_FFFF, 0, "ZZZZ-ZZ00-000S"), (0, 0, "0000-0000-0000"), (0x3FFF_FFFF, 0x1FF_FFFF, "ZZZZ-ZZZZ-ZZZK"),
            (0x1234_5678 & 0x3FFF_FFFF, 0x0AB_CDEF, "938N-KRAQ-KFFJ"),
        ] as [(UInt32, UInt32, String)])
    func vectors(nameplate: UInt32, secret: UInt32, displayed: String) throws {
        let code = try #require(RoomCode(value: nameplate))
        let invitation = try #require(RoomInvitation(nameplate: code, secret: secret))
        #expect(invitation.displayed == displayed)
        #expect(RoomInvitation(displayed) == invitation)
        #expect(invitation.nameplate.value == nameplate && invitation.secret == secret)
        // The nameplate is the first six symbols: what the rendezvous is given.
        #expect(invitation.description.hasPrefix(invitation.nameplate.description))
    }

    @Test func secretsOutsideTwentyFiveBitsAreRefused() {
        #expect(RoomInvitation(nameplate: RoomCode(value: 1)!, secret: 1 << 25) == nil)
        #expect(RoomInvitation.bytes(ofSecret: 0x01AB_CDEF) == [0x01, 0xAB, 0xCD, 0xEF])
    }

    @Test func typingIsForgiven() throws {
        let code = try #require(RoomInvitation("7K10-XM4F-9ABT"))
        #expect(RoomInvitation("7k10xm4f9abt") == code)
        #expect(RoomInvitation("7KIO XM4F 9ABT") == code)
        #expect(RoomInvitation("7kl0-xm4f-9abt") == code)
        #expect(RoomInvitation(" 7K1 0XM-4F9 ABT ") == code)
    }

    @Test(
        "What is not a code says why",
        arguments: [
            ("7K3-QXM", RoomInvitation.ParseError.wrongLength(6)), ("7K3Q-XM4F-9ABRR", .wrongLength(13)), ("", .wrongLength(0)),
            ("7K3Q-XM4F-9ABU", .notASymbol("U")), ("7K3Q_XM4F", .notASymbol("_")), ("ÄK3Q-XM4F-9ABR", .notASymbol("Ä")),
            ("7K3Q-XM4F-9ABS", .typo),
        ] as [(String, RoomInvitation.ParseError)])
    func refused(text: String, error: RoomInvitation.ParseError) {
        #expect(throws: error) { try RoomInvitation(parsing: text) }
        #expect(RoomInvitation.problem(typed: text)?.hasPrefix("'\(text)' is not a room code: \(error).") == true)
    }

    /// Every single mistyped symbol and every swap of two different neighbours, at every
    /// position of a few codes, fails the check.
    @Test func everyOneSymbolTypoAndEverySwapIsCaught() throws {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        var tried = 0
        for seed: UInt32 in [0, 1, 0x1F_0F0F, 0x3FFF_FFFF] {
            let code = try #require(RoomCode(value: seed))
            let invitation = try #require(RoomInvitation(nameplate: code, secret: seed & 0x1FF_FFFF))
            let symbols = Array(invitation.description)
            for position in symbols.indices {
                for replacement in alphabet where replacement != symbols[position] {
                    var typed = symbols
                    typed[position] = replacement
                    #expect(throws: RoomInvitation.ParseError.typo) { try RoomInvitation(parsing: String(typed)) }
                    tried += 1
                }
                if position + 1 < symbols.count, symbols[position] != symbols[position + 1] {
                    var typed = symbols
                    typed.swapAt(position, position + 1)
                    #expect(throws: RoomInvitation.ParseError.typo) { try RoomInvitation(parsing: String(typed)) }
                    tried += 1
                }
            }
        }
        #expect(tried >= 4 * 12 * 31)
    }
}
