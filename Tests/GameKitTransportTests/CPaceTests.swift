import Testing

@testable import GameKitTransport

/// CPACE-RISTR255-SHA512 against draft-irtf-cfrg-cpace's own vectors (Appendix B, "CPace using
/// group ristretto255 and hash SHA-512", and the string utilities of Appendix A).
@Suite("CPace")
struct CPaceTests {
    enum Vector {
        static let password = Array("Password".utf8)
        static let channel = KeyScheduleTests.bytes("0b415f696e69746961746f720b425f726573706f6e646572")
        static let sessionID = KeyScheduleTests.bytes("7e4b4791d6a8ef019b936c79fb7f2c57")
        static let generator = "222b6b195fe84b1652badb6f6a3ae3d24341e7306967f0b8115b40d5698c7e56"
        static let ya = KeyScheduleTests.bytes("da3d23700a9e5699258aef94dc060dfda5ebb61f02a5ea77fad53f4ff0976d08")
        static let yb = KeyScheduleTests.bytes("d2316b454718c35362d83d69df6320f38578ed5984651435e2949762d900b80d")
        static let initiatorShare = "d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b9157"
        static let responderShare = "3ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f7258"
        static let sharedPoint = "80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f"
        static let intermediateKey =
            "b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dcae7b35cd2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c3fa2068af7900447"
        // "Test case for scalar_mult with valid inputs" and the invalid encodings after it.
        static let validScalar = KeyScheduleTests.bytes("7cd0e075fa7955ba52c02759a6c90dbbfc10e6d40aea8d283e407d88cf538a05")
        static let validElement = KeyScheduleTests.bytes("2c3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")
        static let validProduct = "7c13645fe790a468f62c39beb7388e541d8405d1ade69d1778c5fe3e7f6b600e"
        static let invalidEncoding = KeyScheduleTests.bytes("2b3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")
        static let identity = [UInt8](repeating: 0, count: 32)
    }

    @Test func stringUtilitiesMatchTheDraft() {
        #expect(KeyScheduleTests.hex(CPace.prependLength([])) == "00")
        #expect(KeyScheduleTests.hex(CPace.prependLength(Array("1234".utf8))) == "0431323334")
        #expect(Array(CPace.prependLength(Array(0..<127)).prefix(2)) == [0x7F, 0x00])
        #expect(Array(CPace.prependLength(Array(0..<128)).prefix(3)) == [0x80, 0x01, 0x00])
        let parts: [[UInt8]] = [Array("1234".utf8), Array("5".utf8), [], Array("678".utf8)]
        #expect(KeyScheduleTests.hex(CPace.lengthValueConcatenation(parts)) == "043132333401350003363738")
        let transcript = CPace.transcript(
            initiatorShare: Array("123".utf8), initiatorData: Array("PartyA".utf8), responderShare: Array("234".utf8), responderData: Array("PartyB".utf8))
        #expect(KeyScheduleTests.hex(transcript) == "03313233065061727479410332333406506172747942")
    }

    @Test func generatorStringAndGeneratorMatchTheDraft() {
        let string = CPace.generatorString(password: Vector.password, channel: Vector.channel, sessionID: Vector.sessionID)
        #expect(string.count == 170)
        #expect(KeyScheduleTests.hex(string.prefix(28)) == "11435061636552697374726574746f3235350850617373776f726464")
        #expect(KeyScheduleTests.hex(CPace.generator(password: Vector.password, channel: Vector.channel, sessionID: Vector.sessionID)) == Vector.generator)
    }

    @Test func sharesSharedPointAndIntermediateKeyMatchTheDraft() throws {
        let generator = CPace.generator(password: Vector.password, channel: Vector.channel, sessionID: Vector.sessionID)
        let ya = try #require(CPace.multiply(Vector.ya, generator))
        let yb = try #require(CPace.multiply(Vector.yb, generator))
        #expect(KeyScheduleTests.hex(ya) == Vector.initiatorShare)
        #expect(KeyScheduleTests.hex(yb) == Vector.responderShare)
        let initiatorPoint = try #require(CPace.multiply(Vector.ya, yb))
        let responderPoint = try #require(CPace.multiply(Vector.yb, ya))
        #expect(KeyScheduleTests.hex(initiatorPoint) == Vector.sharedPoint)
        #expect(initiatorPoint == responderPoint)
        let isk = CPace.intermediateKey(
            sessionID: Vector.sessionID, sharedPoint: initiatorPoint,
            initiatorShare: ya, initiatorData: Array("ADa".utf8), responderShare: yb, responderData: Array("ADb".utf8))
        #expect(KeyScheduleTests.hex(isk) == Vector.intermediateKey)
    }

    @Test func scalarMultiplicationVerifiesItsInput() {
        #expect(CPace.multiply(Vector.validScalar, Vector.validElement).map(KeyScheduleTests.hex) == Vector.validProduct)
        // Not an encoding of a group element, and the identity: both abort.
        #expect(CPace.multiply(Vector.validScalar, Vector.invalidEncoding) == nil)
        #expect(CPace.multiply(Vector.validScalar, Vector.identity) == nil)
        // Wrong lengths never reach libsodium.
        #expect(CPace.multiply(Vector.validScalar, Array(Vector.validElement.prefix(31))) == nil)
        #expect(CPace.multiply(Array(Vector.validScalar.prefix(31)), Vector.validElement) == nil)
    }

    @Test func differentPasswordsGiveDifferentPointsAndFreshScalarsDiffer() throws {
        let right = CPace.generator(password: Array("swordfish".utf8), channel: [], sessionID: [])
        let wrong = CPace.generator(password: Array("swordfisH".utf8), channel: [], sessionID: [])
        #expect(right != wrong)
        let (a, b) = (CPace.randomScalar(), CPace.randomScalar())
        #expect(a != b)
        let shareA = try #require(CPace.multiply(a, right))
        let shareB = try #require(CPace.multiply(b, wrong))
        #expect(CPace.multiply(a, shareB) != CPace.multiply(b, shareA))
    }
}
