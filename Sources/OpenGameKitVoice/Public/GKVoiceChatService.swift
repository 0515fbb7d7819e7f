import Logging
import Foundation
import GameKitTransport
import GameKitTraversal
import GameKitVoiceEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import OpenGameKit

/// Voice chat between two participants: call signalling through the application's client, a
/// media connection of its own (direct, through NAT via STUN, relayed via TURN, or through the
/// client's real-time channel when no UDP path works), and the voice engine between the audio
/// devices and that connection.
///
/// ```swift
/// let voice = GKVoiceChatService.default()
/// voice.client = myClient                 // participantID() and send(_:toParticipantID:)
/// try voice.startVoiceChat(withParticipantID: "1234")
/// // … the client hands what arrives to voice.receivedData(_:fromParticipantID:)
/// ```
///
/// One chat at a time: an invitation while another chat is being set up or running is answered
/// busy. Every method may be called from any thread; the client is called on ``delegateQueue``.
/// The class has the shape Swift gives Apple's: an open `NSObject` subclass, implicitly unwrapped
/// strings where Apple's header has no nullability.
open class GKVoiceChatService: NSObject, @unchecked Sendable {
    /// Network, audio and timing options (a Swift-only addition). Changes apply to the next chat.
    public struct Configuration: Sendable {
        /// STUN servers that tell this host its address outside a NAT.
        public var stunServers: [RealTimeConnection.STUNServer] = []
        /// TURN servers (the first is used) that relay media when no direct path works.
        public var turnServers: [RealTimeConnection.TURNServer] = []
        /// Media only through the TURN relay.
        public var relayOnly = false
        /// The local address of the media socket: "::" (the default) for every interface, IPv6
        /// and IPv4 on one dual-stack socket ("0.0.0.0" on a host without IPv6); "0.0.0.0" for
        /// IPv4 only; or one address.
        public var bindAddress = "::"
        /// Interfaces whose addresses are offered as host candidates (nil: every one that is up).
        public var interfaceNames: [String]?
        /// The audio devices.
        public var audio = VoiceAudioDevices.pulseAudio()
        /// Where the service logs (swift-log), under the label `opengamekit.voice`: each step of
        /// a call (signalling sent, invitations, set-up, start, stop and why) at debug; its media
        /// connection's candidates and checks log under `opengamekit.realtime`.
        public var logger = Logger(label: "opengamekit.voice")
        /// The voice engine (codec, echo canceller, jitter buffer).
        public var engine = VoiceEngine.Configuration()
        /// Seconds an invitation may go unanswered (32002 after).
        public var invitationTimeout: TimeInterval = 30
        /// Seconds connectivity checks may take before the client's real-time channel is tried
        /// (or the chat fails with 32002).
        public var pathTimeout: TimeInterval = 2.5
        /// Seconds a running chat may go without media before it ends with 32001.
        public var mediaTimeout: TimeInterval = 10

        /// The defaults: no servers, PulseAudio's default devices.
        public init() {}

        var timing: VoiceCallMachine.Timing {
            func amount(_ seconds: TimeInterval) -> TimeAmount { .nanoseconds(Int64(max(0.001, min(seconds, 86_400)) * 1e9)) }
            return .init(invitationTimeout: amount(self.invitationTimeout), pathTimeout: amount(self.pathTimeout), mediaTimeout: amount(self.mediaTimeout))
        }

        var connection: RealTimeConnection.Configuration {
            var configuration = RealTimeConnection.Configuration()
            configuration.stunServers = self.stunServers
            configuration.turnServers = self.turnServers
            configuration.relayOnly = self.relayOnly
            configuration.bindAddress = self.bindAddress
            configuration.interfaceNames = self.interfaceNames
            return configuration
        }
    }

    private static let shared = GKVoiceChatService()

    /// The shared service (Game Kit's `defaultVoiceChatService`); never nil.
    open class func `default`() -> GKVoiceChatService! { GKVoiceChatService.shared }

    /// Whether voice chat can run here: true (Game Kit's `isVoIPAllowed`).
    open class func isVoIPAllowed() -> Bool { true }

    let lock = NIOLock()
    var state: State
    let loop: EventLoop
    private let callbacks = NIOLockedValueBox(Callbacks())
    private let clientCalls = OrderedDelivery()
    /// The readers of ``events``, under a lock of their own (a reader's termination takes it).
    let eventSubscribers = StreamSubscribers<Event>()

    struct Callbacks {
        weak var client: (any GKVoiceChatClient)?
        var queue = DispatchQueue.main
        /// Signalling that arrived while no client was set, delivered when one is.
        var held: [(data: Data, participant: String, at: NIODeadline)] = []
    }

    /// Signalling held while no client is set, at most (older messages make room).
    public static let heldSignalLimit = 32
    /// How long held signalling stays deliverable: an invitation older than this has been
    /// given up by its caller.
    public static let heldSignalLifetime = TimeAmount.seconds(10)

    /// A service of its own (several can run in one process, e.g. in tests).
    public init(configuration: Configuration = Configuration()) {
        self.state = State(configuration: configuration)
        self.loop = MultiThreadedEventLoopGroup.singleton.next()
        super.init()
    }

    /// A service of its own with the default configuration.
    public override convenience init() {
        self.init(configuration: Configuration())
    }

    // MARK: - Properties

    /// The application's client (held weakly). Signalling that arrived before it was set (an
    /// invitation sent while this side was still making its client) is delivered now, if it
    /// is less than ``heldSignalLifetime`` old.
    open var client: (any GKVoiceChatClient)! {
        get { self.callbacks.withLockedValue { $0.client } }
        set {
            let held = self.callbacks.withLockedValue { callbacks -> [(data: Data, participant: String, at: NIODeadline)] in
                callbacks.client = newValue
                guard newValue != nil else { return [] }
                defer { callbacks.held = [] }
                return callbacks.held
            }
            let now = NIODeadline.now()
            for signal in held where now - signal.at < Self.heldSignalLifetime {
                self.receivedData(signal.data, fromParticipantID: signal.participant)
            }
        }
    }

    /// Where the client is called: the main queue unless changed (a Swift-only addition).
    public var delegateQueue: DispatchQueue {
        get { self.callbacks.withLockedValue { $0.queue } }
        set { self.callbacks.withLockedValue { $0.queue = newValue } }
    }

    /// The options for the next chat.
    public var configuration: Configuration {
        get { self.lock.withLock { self.state.configuration } }
        set { self.lock.withLock { self.state.configuration = newValue } }
    }

    /// Whether the microphone is off (the far side hears silence). Default false.
    open var isMicrophoneMuted: Bool {
        get { self.lock.withLock { self.state.muted } }
        set {
            let engine = self.lock.withLock {
                self.state.muted = newValue
                return self.state.media?.engine
            }
            engine?.isMicrophoneMuted = newValue
        }
    }

    /// Scales the far side's voice, 0 to 1 (default 1).
    open var remoteParticipantVolume: Float {
        get { self.lock.withLock { self.state.volume } }
        set {
            let volume = newValue.isFinite ? min(1, max(0, newValue)) : 1
            let engine = self.lock.withLock {
                self.state.volume = volume
                return self.state.media?.engine
            }
            engine?.remoteVolume = volume
        }
    }

    /// Whether ``inputMeterLevel`` is kept up to date.
    open var isInputMeteringEnabled: Bool {
        get { self.lock.withLock { self.state.inputMetering } }
        set { self.lock.withLock { self.state.inputMetering = newValue } }
    }

    /// Whether ``outputMeterLevel`` is kept up to date.
    open var isOutputMeteringEnabled: Bool {
        get { self.lock.withLock { self.state.outputMetering } }
        set { self.lock.withLock { self.state.outputMetering = newValue } }
    }

    /// The local voice's level in dB (full scale 0), after echo cancellation; meaningful while
    /// ``isInputMeteringEnabled``, else 0.
    open var inputMeterLevel: Float { self.meter(\.inputMetering) { $0.inputLevel } }

    /// The far side's voice level in dB as played (after ``remoteParticipantVolume``);
    /// meaningful while ``isOutputMeteringEnabled``, else 0.
    open var outputMeterLevel: Float { self.meter(\.outputMetering) { $0.outputLevel } }

    /// A meter's reading: 0 while it is off, −100 dB while no chat runs.
    private func meter(_ enabled: KeyPath<State, Bool>, _ read: (VoiceEngine) -> Float) -> Float {
        let (on, engine) = self.lock.withLock { (self.state[keyPath: enabled], self.state.media?.engine) }
        guard on else { return 0 }
        return engine.map(read) ?? -100
    }

    /// The participant of the current chat (set up or running), if any (a Swift-only addition).
    public var currentParticipantID: String? { self.lock.withLock { self.state.machine.call?.participant } }

    /// How media travels in the running chat, if one runs (a Swift-only addition).
    public var currentPath: RealTimePath? {
        self.lock.withLock {
            if case .connected(let path)? = self.state.machine.call?.phase { return path }
            return nil
        }
    }

    /// The voice engine's counters for the running chat (a Swift-only addition).
    public var engineStatistics: VoiceEngine.Statistics? { self.lock.withLock { self.state.media?.engine.currentStatistics } }

    // MARK: - Calls

    /// Invites `participantID` to a chat; the client's `didStart`, or `didNotStart` with the
    /// reason, follows. Throws ``GKVoiceChatServiceError/Code/uninitializedClientError`` without
    /// a client, ``GKVoiceChatServiceError/Code/invalidParameterError`` for a nil or empty ID and
    /// ``GKVoiceChatServiceError/Code/methodCurrentlyInvalidError`` while another chat is set up
    /// or runs. Inviting someone whose invitation is waiting accepts it.
    open func startVoiceChat(withParticipantID participantID: String!) throws {
        let participantID = try self.checkedParticipant(participantID)
        let callID = UInt32.random(in: 1...UInt32.max)
        try self.perform { machine, now throws(GKVoiceChatServiceError) in try machine.start(participantID, callID: callID, now: now) }
    }

    /// `participantID`, if a chat with it may be started: a client is set and the ID is not
    /// empty.
    func checkedParticipant(_ participantID: String?) throws(GKVoiceChatServiceError) -> String {
        guard self.client != nil else {
            throw GKVoiceChatServiceError(.uninitializedClientError, "The voice chat service has no client: set `client` first.")
        }
        guard let participantID, !participantID.isEmpty else {
            throw GKVoiceChatServiceError(.invalidParameterError, "The participant ID is empty.")
        }
        return participantID
    }

    /// Ends the chat (or the invitation) with `participantID`; the client's `didStop` follows
    /// with no error, and the other side hears a hang-up, cancel or denial.
    open func stopVoiceChat(withParticipantID participantID: String!) {
        guard let participantID else { return }
        self.perform { machine, _ in machine.stop(participantID) }
    }

    /// Accepts the invitation `callID`. Throws ``GKVoiceChatServiceError/Code/invalidCallIDError``
    /// for an unknown call and ``GKVoiceChatServiceError/Code/methodCurrentlyInvalidError`` for
    /// one already accepted.
    open func acceptCallID(_ callID: Int) throws {
        guard let id = UInt32(exactly: callID) else { throw GKVoiceChatServiceError(.invalidCallIDError) }
        try self.perform { machine, now throws(GKVoiceChatServiceError) in try machine.accept(id, now: now) }
    }

    /// Declines the invitation `callID` (the inviter hears 32011). Unknown IDs are ignored.
    open func denyCallID(_ callID: Int) {
        guard let id = UInt32(exactly: callID) else { return }
        self.perform { machine, _ in machine.deny(id) }
    }

    /// Signalling from `participantID` that the client received; blobs that are not this
    /// service's are ignored, or end a pending invitation with 32010.
    open func receivedData(_ arbitraryData: Data!, fromParticipantID participantID: String!) {
        guard let arbitraryData, let participantID else { return }
        let unheard = self.callbacks.withLockedValue { callbacks -> Bool in
            guard callbacks.client == nil else { return false }
            if callbacks.held.count >= Self.heldSignalLimit { callbacks.held.removeFirst() }
            callbacks.held.append((arbitraryData, participantID, .now()))
            return true
        }
        if unheard {
            self.configuration.logger.debug("signalling held until a client is set", metadata: ["from": "\(participantID)"])
            return
        }
        let local = self.client?.participantID() ?? ""
        let callID = UInt32.random(in: 1...UInt32.max)
        self.perform { machine, now in machine.receive(Array(arbitraryData), from: participantID, localParticipant: local, callID: callID, now: now) }
    }

    /// Media from `participantID` that arrived through the client's real-time channel.
    open func receivedRealTime(_ audio: Data!, fromParticipantID participantID: String!) {
        guard let data = audio, let participantID, !data.isEmpty else { return }
        let connection = self.lock.withLock { () -> RealTimeConnection? in
            guard self.state.machine.call?.participant == participantID else { return nil }
            return self.state.connection
        }
        connection?.receiveFromClient(Array(data))
    }

    /// Called by the default `sendRealTime` of a client that has no real-time channel.
    func clientHasNoRealTimeChannel() {
        self.lock.withLock { self.state.clientLacksRealTime = true }
    }

    // MARK: - Calling the client

    /// Runs `body` with the client on the delegate queue, in order: at once when the call that
    /// led here was made on that queue (so `stopVoiceChat` has sent its hang-up through the client
    /// before it returns, as Game Kit's did), else queued.
    func withClient(_ body: @escaping @Sendable (any GKVoiceChatClient) -> Void) {
        self.clientCalls.run(on: self.delegateQueue) {
            guard let client = self.client else { return }
            body(client)
        }
    }
}
