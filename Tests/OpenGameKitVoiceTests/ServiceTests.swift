import NetworkImpairment
import Foundation
import GameKitTransport
import GameKitTraversal
import GameKitVoiceEngine
import NIOConcurrencyHelpers
import Testing

@testable import OpenGameKitVoice

/// A client that hands signalling straight to the other side's service, and real-time data too
/// when `realTime` (else it does what the protocol's default does: says it has no such channel).
final class LoopbackClient: GKVoiceChatClient, @unchecked Sendable {
    let id: String
    let realTime: Bool
    weak var other: GKVoiceChatService?
    /// Invitations are recorded ("invited alice 1234") and left for the test to answer, instead
    /// of accepted at once.
    var decides = false
    private let log = NIOLockedValueBox<[String]>([])
    /// The errors didNotStart and didStop brought, in order.
    let errors = NIOLockedValueBox<[any Error]>([])

    init(id: String, realTime: Bool = false) {
        self.id = id
        self.realTime = realTime
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, sendRealTime data: Data, toParticipantID participantID: String) {
        guard self.realTime else { return voiceChatService.clientHasNoRealTimeChannel() }
        self.other?.receivedRealTime(data, fromParticipantID: self.id)
    }

    var events: [String] { self.log.withLockedValue { $0 } }

    func record(_ event: String) {
        self.log.withLockedValue { $0.append(event) }
    }

    /// Waits (bounded, without blocking a thread) until an event starting with `prefix` is
    /// recorded.
    @discardableResult
    func wait(for prefix: String, seconds: Double = 15) async -> String? {
        _ = await ServiceTests.eventually(seconds) { self.events.contains { $0.hasPrefix(prefix) } }
        return self.events.first { $0.hasPrefix(prefix) }
    }

    func participantID() -> String { self.id }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, send data: Data, toParticipantID participantID: String) {
        self.other?.receivedData(data, fromParticipantID: self.id)
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didReceiveInvitationFromParticipantID participantID: String, callID: Int) {
        guard self.decides else {
            try? voiceChatService.acceptCallID(callID)
            return
        }
        self.record("invited \(participantID) \(callID)")
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStartWithParticipantID participantID: String) {
        self.record("didStart \(participantID)")
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didNotStartWithParticipantID participantID: String, error: Error?) {
        if let error { self.errors.withLockedValue { $0.append(error) } }
        self.record("didNotStart \(participantID) \(((error) as? GKVoiceChatServiceError)?.code.rawValue ?? 0)")
    }

    func voiceChatService(_ voiceChatService: GKVoiceChatService, didStopWithParticipantID participantID: String, error: Error?) {
        if let error { self.errors.withLockedValue { $0.append(error) } }
        self.record("didStop \(participantID) \(((error) as? GKVoiceChatServiceError)?.code.rawValue ?? 0)")
    }
}

/// A microphone playing a sine in real time.
final class SineCaptureDevice: AudioCaptureDevice, @unchecked Sendable {
    let name = "sine"
    private let frequency: Double
    private var phase = 0
    private let pacer = RealTimePacer()

    init(frequency: Double = 440) {
        self.frequency = frequency
    }

    func read(count: Int) throws(VoiceEngineError) -> [Int16]? {
        self.pacer.pace(count)
        defer { self.phase += count }
        return (0..<count).map { Int16(8000 * sin(2 * Double.pi * self.frequency * Double(self.phase + $0) / 16_000)) }
    }

    func close() {}
}

/// Two services in one process over the namespace's loopback (run inside scripts/sandbox).
@Suite("GKVoiceChatService over loopback", .serialized)
struct ServiceTests {
    static func pair(
        configure: (inout GKVoiceChatService.Configuration) -> Void = { _ in }, realTime: Bool = false
    ) -> (GKVoiceChatService, GKVoiceChatService, LoopbackClient, LoopbackClient) {
        // Each side its own tone, 440 and 620 Hz: the same tone both ways is one signal to an echo
        // canceller, which learns to take each side's tone out of its microphone with the other's
        // (seen once, when a starved test looked 25 s into a call: bob's meter had fallen).
        func configuration(tone: Double) -> GKVoiceChatService.Configuration {
            var configuration = GKVoiceChatService.Configuration()
            configuration.audio = .custom { (SineCaptureDevice(frequency: tone), MemoryPlaybackDevice()) }
            configuration.bindAddress = "127.0.0.1"
            configure(&configuration)
            return configuration
        }
        let alice = GKVoiceChatService(configuration: configuration(tone: 440))
        let bob = GKVoiceChatService(configuration: configuration(tone: 620))
        let aliceClient = LoopbackClient(id: "alice", realTime: realTime)
        let bobClient = LoopbackClient(id: "bob", realTime: realTime)
        aliceClient.other = bob
        bobClient.other = alice
        alice.client = aliceClient
        bob.client = bobClient
        alice.delegateQueue = DispatchQueue(label: "alice")
        bob.delegateQueue = DispatchQueue(label: "bob")
        return (alice, bob, aliceClient, bobClient)
    }

    /// Waits (bounded, without blocking a thread: the cooperative pool has two here, and the
    /// async suites beside these need them) until `condition` holds.
    static func eventually(_ seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
        await waitUntil(seconds: seconds, condition)
    }

    @Test("A call connects directly, carries audio both ways, and hangs up with 32003")
    func directCall() async throws {
        let (alice, bob, aliceClient, bobClient) = Self.pair()
        bob.isOutputMeteringEnabled = true
        try alice.startVoiceChat(withParticipantID: "bob")
        #expect(await aliceClient.wait(for: "didStart") == "didStart bob")
        #expect(await bobClient.wait(for: "didStart") == "didStart alice")
        #expect(alice.currentPath == .direct && bob.currentPath == .direct)
        #expect(await Self.eventually { (bob.engineStatistics?.packetsReceived ?? 0) > 50 && bob.outputMeterLevel > -30 })
        #expect((alice.engineStatistics?.packetsReceived ?? 0) > 0)
        // Muting reaches the far side as silence.
        alice.isMicrophoneMuted = true
        #expect(await Self.eventually { bob.outputMeterLevel < -60 })
        alice.stopVoiceChat(withParticipantID: "bob")
        #expect(await bobClient.wait(for: "didStop") == "didStop alice 32003")
        #expect(await aliceClient.wait(for: "didStop") == "didStop bob 0")
        #expect(alice.currentParticipantID == nil && bob.currentParticipantID == nil)
    }

    @Test("No UDP path: media goes through the client's real-time channel")
    func clientFallback() async throws {
        // Relay-only without a TURN server leaves no candidate pair at all.
        let (alice, bob, aliceClient, bobClient) = Self.pair(configure: { $0.relayOnly = true; $0.pathTimeout = 2 }, realTime: true)
        try alice.startVoiceChat(withParticipantID: "bob")
        #expect(await aliceClient.wait(for: "didStart") == "didStart bob")
        #expect(await bobClient.wait(for: "didStart") == "didStart alice")
        #expect(alice.currentPath == .client && bob.currentPath == .client)
        #expect(await Self.eventually { (bob.engineStatistics?.packetsReceived ?? 0) > 50 && (alice.engineStatistics?.packetsReceived ?? 0) > 50 })
        bob.stopVoiceChat(withParticipantID: "alice")
        #expect(await aliceClient.wait(for: "didStop") == "didStop bob 32003")
    }

    @Test("No UDP path and no client channel: 32002 on both sides")
    func noPath() async throws {
        let (alice, bob, aliceClient, bobClient) = Self.pair(configure: { $0.relayOnly = true })
        defer { withExtendedLifetime(bob) {} }
        try alice.startVoiceChat(withParticipantID: "bob")
        #expect(await aliceClient.wait(for: "didNotStart") == "didNotStart bob 32002")
        #expect(await bobClient.wait(for: "didNotStart") == "didNotStart alice 32002")
    }

    @Test("Without a client, starting throws 32006; bad IDs and calls throw their codes")
    func misuse() async throws {
        let service = GKVoiceChatService()
        #expect(throws: GKVoiceChatServiceError(.uninitializedClientError)) { try service.startVoiceChat(withParticipantID: "bob") }
        let (alice, bob, aliceClient, bobClient) = Self.pair()
        defer { withExtendedLifetime((bob, aliceClient, bobClient)) {} }
        #expect(throws: GKVoiceChatServiceError(.invalidParameterError)) { try alice.startVoiceChat(withParticipantID: "") }
        #expect(throws: GKVoiceChatServiceError(.invalidCallIDError)) { try alice.acceptCallID(-1) }
        #expect(throws: GKVoiceChatServiceError(.invalidCallIDError)) { try alice.acceptCallID(42) }
        let error = GKVoiceChatServiceError(.remoteParticipantBusyError) as NSError
        #expect(error.domain == GKVoiceChatServiceErrorDomain && error.code == 32008)
        #expect("\(GKVoiceChatServiceError.remoteParticipantBusyError)" == "GKVoiceChatServiceRemoteParticipantBusyError (32008)")
    }

    /// The README's placeholder servers on a network with no default route (the sandbox has
    /// none): sends to them fail with ENETUNREACH, which used to close the media socket and end
    /// the call although the host candidates reach each other. Now they are not sent at all.
    @Test("STUN and TURN servers with no route to them do not stop a call on a direct path")
    func unreachableServersDoNotStopTheCall() async throws {
        let (alice, bob, aliceClient, bobClient) = Self.pair(configure: {
            $0.stunServers = [.init(host: "192.0.2.10")]
            $0.turnServers = [.init(host: "192.0.2.10", username: "me", password: "secret")]
        })
        try alice.startVoiceChat(withParticipantID: "bob")
        #expect(await aliceClient.wait(for: "didStart") == "didStart bob", "alice heard \(aliceClient.events)")
        #expect(await bobClient.wait(for: "didStart") == "didStart alice", "bob heard \(bobClient.events)")
        alice.stopVoiceChat(withParticipantID: "bob")
        #expect(await bobClient.wait(for: "didStop") != nil)
        withExtendedLifetime((alice, bob)) {}
    }

    /// An invitation that arrives before the callee has set its client is held and answered
    /// once the client is set (it used to be dropped, and the call failed).
    @Test("Signalling that arrives before the client is set is delivered when it is")
    func signallingWaitsForTheClient() async throws {
        let (alice, bob, aliceClient, bobClient) = Self.pair()
        bob.client = nil
        try alice.startVoiceChat(withParticipantID: "bob")
        try await Task.sleep(for: .milliseconds(300))
        #expect(!aliceClient.events.contains { $0.hasPrefix("did") })
        bob.client = bobClient
        #expect(await aliceClient.wait(for: "didStart") == "didStart bob", "alice heard \(aliceClient.events)")
        #expect(await bobClient.wait(for: "didStart") == "didStart alice", "bob heard \(bobClient.events)")
        alice.stopVoiceChat(withParticipantID: "bob")
        #expect(await bobClient.wait(for: "didStop") != nil)
        withExtendedLifetime((alice, bob)) {}
    }

    @Test("Audio devices that cannot open end the chat with 32005, and the other side hears why")
    func audioUnavailable() async throws {
        let (alice, bob, aliceClient, bobClient) = Self.pair(configure: {
            $0.audio = .files(input: "/nonexistent/input.wav", output: "/nonexistent/output.wav")
        })
        defer { withExtendedLifetime(bob) {} }
        bob.configuration.audio = .silent
        try alice.startVoiceChat(withParticipantID: "bob")
        #expect(await aliceClient.wait(for: "didNotStart") == "didNotStart bob 32005")
        #expect(await bobClient.wait(for: "did") != nil)
        // The error says which device failed and why, and keeps the engine's error.
        let error = try #require(aliceClient.errors.withLockedValue { $0.first } as? GKVoiceChatServiceError)
        #expect(error.localizedDescription.hasPrefix("The audio devices could not be opened (WAV file /nonexistent/input.wav as microphone"))
        #expect(error.localizedDescription.hasSuffix("WAV file: /nonexistent/input.wav does not exist."), "\(error.localizedDescription)")
        guard case .wavFile? = error.underlyingError as? VoiceEngineError else {
            Issue.record("underlying: \(String(describing: error.underlyingError))")
            return
        }
        #expect((error as NSError).userInfo[NSUnderlyingErrorKey] != nil)
        // Bob hears alice's own account, not a hang-up: 32002 before his start, 32003 after it.
        let heard = try #require(bobClient.errors.withLockedValue { $0.first } as? GKVoiceChatServiceError)
        let started = bobClient.events.contains("didStart alice")
        #expect(heard.code == (started ? .remoteParticipantHangupError : .unableToConnectError), "\(bobClient.events)")
        let sentence = started ? "alice ended the voice chat after a failure on its side: " : "alice could not set the voice chat up: "
        #expect(heard.localizedDescription.hasPrefix(sentence + "The audio devices could not be opened (WAV file /nonexistent/input.wav"), "\(heard.localizedDescription)")
        let cause = try #require(heard.underlyingError as? GKVoiceChatServiceError)
        #expect(cause.code == .audioUnavailableError && cause.localizedDescription.hasPrefix("The audio devices could not be opened"))
    }
}
