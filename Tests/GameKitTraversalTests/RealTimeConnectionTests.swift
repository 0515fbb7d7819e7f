import NetworkImpairment
import Testing

@testable import GameKitTraversal

@Suite struct RealTimeConnectionTests {
    /// A real-time connection owns its port, as a transport endpoint does (no SO_REUSEADDR: with
    /// it, Linux hands out ephemeral ports already held).
    @Test func aRealTimePortInUseCannotBeBoundAgain() async throws {
        try NetworkSandbox.requireIsolation()
        var configuration = RealTimeConnection.Configuration()
        configuration.bindAddress = "127.0.0.1"
        let first = try await RealTimeConnection.open(configuration: configuration)
        configuration.port = Int(first.localAddress.port)
        await #expect(throws: (any Error).self) {
            let second = try await RealTimeConnection.open(configuration: configuration)
            second.close()
        }
        first.close()
    }
}
