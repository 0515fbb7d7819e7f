import Crypto
import Testing

@testable import GameKitOnline

@Suite("Relay tickets")
struct RelayTicketTests {
    static let issuer = Curve25519.Signing.PrivateKey()
    static let holder = Curve25519.Signing.PrivateKey()
    static let ticket = RelayTicket(
        room: RoomHandle(rawValue: 99), peerID: 7, expiresAt: 2_000_000, byteLimit: 1000, holderKey: Array(holder.publicKey.rawRepresentation))

    @Test("A ticket verifies against its issuer until it expires")
    func ticketsVerify() throws {
        let bytes = try Self.ticket.signed(by: Self.issuer)
        #expect(bytes.count == RelayTicket.size)
        #expect(try RelayTicket.verify(bytes, issuers: [Self.issuer.publicKey], nowMilliseconds: 1_999_999) == Self.ticket)
        #expect(throws: RelayTicket.Rejection.expired) { try RelayTicket.verify(bytes, issuers: [Self.issuer.publicKey], nowMilliseconds: 2_000_000) }
    }

    @Test("Forged, altered and malformed tickets are refused")
    func forgeriesAreRefused() throws {
        let other = Curve25519.Signing.PrivateKey()
        let forged = try Self.ticket.signed(by: other)
        #expect(throws: RelayTicket.Rejection.forged) { try RelayTicket.verify(forged, issuers: [Self.issuer.publicKey], nowMilliseconds: 0) }
        let genuine = try Self.ticket.signed(by: Self.issuer)
        for index in [1, 9, 13, 21, 29, 40, RelayTicket.bodySize + 3] {
            var altered = genuine
            altered[index] ^= 0x01
            #expect(throws: RelayTicket.Rejection.forged) { try RelayTicket.verify(altered, issuers: [Self.issuer.publicKey], nowMilliseconds: 0) }
        }
        #expect(throws: RelayTicket.Rejection.malformed) { try RelayTicket.verify(Array(genuine.dropLast()), issuers: [Self.issuer.publicKey], nowMilliseconds: 0) }
        var version = genuine
        version[0] = 2
        #expect(throws: RelayTicket.Rejection.malformed) { try RelayTicket.verify(version, issuers: [Self.issuer.publicKey], nowMilliseconds: 0) }
        // A relay trusting several issuers accepts each one's.
        #expect(try RelayTicket.verify(forged, issuers: [Self.issuer.publicKey, other.publicKey], nowMilliseconds: 0) == Self.ticket)
    }

    @Test("An allocation must be signed by the ticket's holder, over that ticket and time")
    func allocationsAreSignedByTheHolder() throws {
        let bytes = try Self.ticket.signed(by: Self.issuer)
        guard case .allocate(let time, let ticket, let signature) = try RelayMessage.allocation(ticket: bytes, timestampMilliseconds: 5, holder: Self.holder) else {
            Issue.record("not an allocation")
            return
        }
        #expect(RelayMessage.isSignedByHolder(Self.ticket, timestamp: time, ticketBytes: ticket, signature: signature))
        #expect(!RelayMessage.isSignedByHolder(Self.ticket, timestamp: time + 1, ticketBytes: ticket, signature: signature))
        guard case .allocate(_, _, let stolen) = try RelayMessage.allocation(ticket: bytes, timestampMilliseconds: 5, holder: Curve25519.Signing.PrivateKey()) else { return }
        #expect(!RelayMessage.isSignedByHolder(Self.ticket, timestamp: time, ticketBytes: ticket, signature: stolen))
    }
}
