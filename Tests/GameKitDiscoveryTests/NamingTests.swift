import Testing

@testable import GameKitDiscovery

@Suite("Game Kit naming: service types and the peer TXT layout")
struct NamingTests {
    @Test(arguments: ["chat", "Chess-2", "a", "x1y2z3", "abcdefghijklmno"])
    func aSessionIDThatIsAValidServiceNameIsUsedAsIs(id: String) {
        let type = ServiceType(sessionIdentifier: id)
        #expect(type.name == id)
        #expect(!type.isTCP)
        #expect(type.description == "_\(id)._udp")
    }

    @Test(arguments: ["", "com.example.chess", "abcdefghijklmnop", "123", "-chat", "chat-", "a--b", "über", "two words", String(repeating: "x", count: 300)])
    func anyOtherSessionIDIsHashedIntoAValidName(id: String) {
        let type = ServiceType(sessionIdentifier: id)
        #expect(ServiceType.isValidServiceName(type.name))
        #expect(type.name.count == 15)
        #expect(type.name.hasPrefix("gk"))
        #expect(ServiceType(sessionIdentifier: id) == type)  // deterministic
    }

    @Test func theHashIsPinnedSoThatEveryImplementationAgrees() {
        // Expected values computed independently with Python:
        //   "gk" + base64.b32encode(hashlib.sha256(id.encode()).digest()).decode().lower()[:13]
        #expect(ServiceType(sessionIdentifier: "com.example.chess").name == "gkmuzjioyg6zhx5")
        #expect(ServiceType(sessionIdentifier: "").name == "gk4oymiquy7qobj")
        #expect(ServiceType(sessionIdentifier: "com.example.chess") != ServiceType(sessionIdentifier: "com.example.checkers"))
    }

    @Test func base32MatchesRFC4648Vectors() {
        // RFC 4648 §10: BASE32("foobar") = "MZXW6YTBOI======".
        #expect(ServiceType.base32(Array("foobar".utf8), characters: 10) == "mzxw6ytboi")
        #expect(ServiceType.base32(Array("f".utf8), characters: 2) == "my")
    }

    @Test func theInstanceNameFitsALabelAndKeepsThePeerID() {
        let long = PeerAdvertisement(peerID: "4294967295", displayName: String(repeating: "é", count: 100), transportPort: 7000)
        #expect(long.instanceName.utf8.count <= 63)
        #expect(long.instanceName.hasSuffix(" [4294967295]"))
        #expect((try? DNSName(instance: long.instanceName, in: ServiceType(sessionIdentifier: "x").domainName)) != nil)
        #expect(PeerAdvertisement(peerID: "12", displayName: "Bob", transportPort: 1).instanceName == "Bob [12]")
    }

    @Test func theTXTRecordRoundTripsAndStaysWithinItsLimits() {
        let advertisement = PeerAdvertisement(
            peerID: "4294967295", displayName: String(repeating: "😀", count: 200), isBusy: true,
            transportPort: 65535, keyFingerprint: [UInt8](repeating: 0xAB, count: 32))
        let txt = advertisement.txtRecord
        #expect(txt.strings.allSatisfy { $0.count <= 255 })
        #expect(txt.wireLength < 1300 / 2)
        #expect(String(decoding: txt.strings[0], as: UTF8.self) == "v=1")
        let read = PeerAdvertisement(txt: txt)
        #expect(read?.peerID == "4294967295")
        #expect(read?.isBusy == true)
        #expect(read?.transportPort == 65535)
        #expect(read?.keyFingerprint == [UInt8](repeating: 0xAB, count: 32))
        #expect(read?.protocolVersion == 1)
        #expect(read.map { advertisement.displayName.hasPrefix($0.displayName) } == true)
        #expect(read?.displayName.utf8.count ?? 0 <= 252)
    }

    @Test func aTXTRecordWithoutPeerIDOrPortIsNotAPeer() {
        #expect(PeerAdvertisement(txt: try! TXTRecord(["tp": "7000"])) == nil)
        #expect(PeerAdvertisement(txt: try! TXTRecord(["id": "1"])) == nil)
        #expect(PeerAdvertisement(txt: try! TXTRecord(["id": "1", "tp": "x"])) == nil)
        let minimal = PeerAdvertisement(txt: try! TXTRecord(["id": "1", "tp": "9"]))
        #expect(minimal?.displayName == "1")
        #expect(minimal?.isBusy == false)
    }

    @Test func txtKeysCompareWithoutCaseAndTheFirstOccurrenceWins() throws {
        let txt = try TXTRecord(strings: [Array("Key=one".utf8), Array("key=two".utf8), Array("flag".utf8), Array("empty=".utf8)])
        #expect(txt["KEY"] == "one")
        #expect(txt.bytes(for: "flag") == [])
        #expect(txt["empty"] == "")
        #expect(txt["missing"] == nil)
        #expect(throws: TXTRecordError.stringTooLong(256)) { try TXTRecord(strings: [[UInt8](repeating: 65, count: 256)]) }
        var record = TXTRecord()
        #expect(throws: TXTRecordError.invalidKey("a=b")) { try record.set("a=b", "x") }
        #expect(throws: TXTRecordError.invalidKey("")) { try record.set("", "x") }
        #expect(TXTRecord().wireLength == 1)
    }

    @Test(arguments: ["_chat._udp", "_chat._udp.local.", "_web._tcp", "_Chat._UDP"])
    func serviceTypesParse(text: String) throws {
        _ = try ServiceType(text)
    }

    @Test(arguments: ["chat._udp", "_chat", "_chat._sctp", "_._udp", "_toolongservicename._udp", "_a b._udp"])
    func badServiceTypesAreRefused(text: String) {
        #expect(throws: ServiceTypeError.self) { try ServiceType(text) }
    }
}

