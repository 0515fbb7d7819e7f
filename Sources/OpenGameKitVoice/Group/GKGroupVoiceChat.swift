import Foundation
import GameKitVoiceEngine
import Logging
import NIOConcurrencyHelpers
import NIOCore
import OpenGameKit

/// Voice for every member of a session at once (a Swift-only addition: Game Kit's voice chat
/// has two participants). Each member that starts the session's group chat hears every other
/// member that has, and is heard by them.
///
/// ```swift
/// let chat = GKGroupVoiceChat(session: session)
/// try chat.start()
/// for await event in chat.events {
///     if case .activeSpeakerChanged(let peerID?) = event { print("\(peerID) is talking") }
/// }
/// ```
///
/// Media travels on the session's own links (encrypted, through the session's server for its
/// clients, through the online relay when a peer is reached that way) on a channel of its own:
/// the application's data handler never sees it. Each member sends its microphone once, as one
/// stream for all, and mixes what the others send (each with its own jitter buffer, volume and
/// meter); in a server-mode session, clients' streams go through the server, which forwards them
/// without decoding. docs/PROTOCOL.md §19 has the messages and the rules.
///
/// Every method may be called from any thread.
public final class GKGroupVoiceChat: @unchecked Sendable {
    /// Audio and engine options. Changes apply at the next ``start()``.
    public struct Configuration: Sendable {
        /// The audio devices (default: PulseAudio's default source and sink).
        public var audio = VoiceAudioDevices.pulseAudio()
        /// The voice engine (codec, echo canceller, jitter buffers).
        public var engine = VoiceEngine.Configuration()
        /// When someone counts as speaking, and when the active speaker changes.
        public var speakers = ActiveSpeakerDetector<UInt32>.Configuration()
        /// Where the chat logs (swift-log): joins, leaves and failures at debug.
        public var logger = Logger(label: "opengamekit.voice.group")

        /// The defaults.
        public init() {}
    }

    /// What happens in the call, in the order it happened on each thread that saw it.
    public enum Event: Sendable, Hashable {
        /// A member joined the call (it is heard from now on).
        case participantJoined(String)
        /// A member left the call, or the session lost it.
        case participantLeft(String)
        /// A participant (this member included, by its own peer ID) started or stopped speaking.
        case speakingChanged(String, isSpeaking: Bool)
        /// The dominant speaker changed (nil: the last one left the call).
        case activeSpeakerChanged(String?)
        /// The chat stopped: ``stop()`` was called (nil), or the audio devices failed.
        case stopped(GKVoiceChatServiceError?)
    }

    /// Counters.
    public struct Statistics: Sendable, Hashable {
        /// Channel messages that could not be read.
        public var malformedMessages = 0
        /// Messages ignored: media from a member not in the call, anything while out of it.
        public var ignoredMessages = 0
        /// Sends the session refused (a peer disconnected as the frame went out).
        public var failedSends = 0
        /// The voice engine's counters, while running.
        public var engine: GroupVoiceEngine.Statistics?
    }

    private struct Media {
        var engine: GroupVoiceEngine
        var loop: AudioLoop
        var generation: Int
    }

    private struct State {
        var configuration: Configuration
        var membership = GroupVoiceMembership()
        var media: Media?
        var generation = 0
        var watch: Task<Void, Never>?
        var muted = false
        var statistics = Statistics()
    }

    /// The session whose members talk.
    public let session: GKSession
    private let ownID: UInt32
    private let clock = MonotonicVoiceClock()
    private let state: NIOLockedValueBox<State>
    /// The readers of ``events``, under a lock of their own (a reader's termination takes it).
    private let subscribers = StreamSubscribers<Event>()

    /// A group chat for `session`'s members (not started).
    public init(session: GKSession, configuration: Configuration = Configuration()) {
        self.session = session
        self.ownID = UInt32(session.peerID) ?? 0
        self.state = NIOLockedValueBox(State(configuration: configuration))
    }

    deinit {
        // Released while running: the participants are told, as by stop().
        let (media, effects, watch) = self.state.withLockedValue { state -> (Media?, [GroupVoiceMembership.Effect], Task<Void, Never>?) in
            (state.media, state.media == nil ? [] : state.membership.leave(), state.watch)
        }
        // Cancelled with no lock held: cancelling runs the sequence's termination, which takes
        // the session's.
        watch?.cancel()
        guard let media else { return }
        for case .send(let message, let peers) in effects {
            try? self.session.send(message.encoded(), onChannel: SessionChannel.groupVoice, toPeers: peers, reliable: true)
        }
        self.session.setReceiver(forChannel: SessionChannel.groupVoice, nil)
        media.loop.shutDown()
    }

    /// The options for the next start.
    public var configuration: Configuration {
        get { self.state.withLockedValue { $0.configuration } }
        set { self.state.withLockedValue { $0.configuration = newValue } }
    }

    // MARK: - Starting and stopping

    /// Whether this member is in the call.
    public var isRunning: Bool { self.state.withLockedValue { $0.media != nil } }

    /// Joins the session's call: opens the audio devices, tells the connected members, and
    /// from then on hears every member in the call (and members that connect and join later).
    /// Starting a running chat does nothing.
    ///
    /// - Throws: ``GKVoiceChatServiceError/Code/audioUnavailableError`` when the devices cannot
    ///   be opened; ``GKVoiceChatServiceError/Code/internalError`` when the engine cannot start.
    public func start() throws {
        let configuration = self.state.withLockedValue { $0.configuration }
        guard !self.isRunning else { return }
        let devices: (AudioCaptureDevice, AudioPlaybackDevice)
        do {
            devices = try configuration.audio.open()
        } catch {
            throw GKVoiceChatServiceError(
                .audioUnavailableError, "The audio devices could not be opened (\(configuration.audio.summary)): \(error.localizedDescription)",
                underlying: error)
        }
        let engine: GroupVoiceEngine
        do {
            final class Weak: @unchecked Sendable { weak var engine: GroupVoiceEngine? }
            let made = Weak()
            engine = try GroupVoiceEngine(
                localParticipant: self.ownID, configuration: configuration.engine, speakers: configuration.speakers,
                send: { [weak self] packet, destination in self?.sendMedia(packet, to: destination) },
                onChange: { [weak self] changes in
                    guard let engine = made.engine else { return }
                    self?.speakersChanged(changes, engine: engine)
                })
            made.engine = engine
        } catch {
            devices.0.close()
            devices.1.close()
            throw GKVoiceChatServiceError(.internalError, "The voice engine could not start: \(error.localizedDescription)", underlying: error)
        }
        let loop = AudioLoop(engine: engine, capture: devices.0, playback: devices.1, clock: self.clock)
        // Subscribed before the connected peers are read, so none connects unseen in between.
        let changes = self.session.peerChanges
        self.session.setReceiver(forChannel: SessionChannel.groupVoice) { [weak self] data, peer in self?.receive(data, from: peer) }
        let started = self.state.withLockedValue { state -> ([GroupVoiceMembership.Effect], Int)? in
            // Another start won the race: it runs, this one's devices close.
            guard state.media == nil else { return nil }
            state.generation += 1
            engine.isMicrophoneMuted = state.muted
            state.media = Media(engine: engine, loop: loop, generation: state.generation)
            state.watch = Task { [weak self] in
                for await change in changes {
                    guard let self, let peer = UInt32(change.peerID) else { return }
                    self.peerChanged(peer, connected: change.state == .stateConnected)
                }
            }
            return (state.membership.join(connected: self.session.connectedPeerNumbers), state.generation)
        }
        guard let (effects, generation) = started else {
            devices.0.close()
            devices.1.close()
            return
        }
        configuration.logger.debug("group voice started", metadata: ["session": "\(self.session.peerID ?? "")"])
        loop.start { [weak self] failure in self?.audioEnded(failure, generation: generation) }
        self.apply(effects)
    }

    /// Leaves the call: tells the participants, closes the devices. Stopping a chat that is not
    /// running does nothing.
    public func stop() {
        self.end(generation: nil, error: nil)
    }

    private func end(generation: Int?, error: GKVoiceChatServiceError?) {
        let taken = self.state.withLockedValue { state -> (Media, [GroupVoiceMembership.Effect], Logger, Task<Void, Never>?)? in
            guard let media = state.media, generation == nil || media.generation == generation else { return nil }
            state.media = nil
            defer { state.watch = nil }
            return (media, state.membership.leave(), state.configuration.logger, state.watch)
        }
        guard let (media, effects, logger, watch) = taken else { return }
        // Cancelled with no lock held: cancelling runs the peer changes' termination (a lock of
        // the session's) on this thread while Swift holds the watching task's status lock.
        watch?.cancel()
        self.session.setReceiver(forChannel: SessionChannel.groupVoice, nil)
        self.apply(effects, engine: media.engine)
        media.loop.shutDown()
        logger.debug("group voice stopped", metadata: ["error": "\(error.map { "\($0)" } ?? "none")"])
        self.emit([.stopped(error)])
    }

    private func audioEnded(_ failure: VoiceEngineError?, generation: Int) {
        guard let failure else { return }
        self.end(generation: generation, error: GKVoiceChatServiceError(.audioUnavailableError, "The audio devices failed: \(failure)", underlying: failure))
    }

    // MARK: - Participants, controls and meters

    /// The other members in the call, in the order they joined.
    public var participants: [String] { self.state.withLockedValue { $0.membership.participants.map(String.init) } }

    /// Whether this member's microphone is off (the others hear silence). Default false.
    public var isMicrophoneMuted: Bool {
        get { self.state.withLockedValue { $0.muted } }
        set {
            self.state.withLockedValue { state in
                state.muted = newValue
                state.media?.engine.isMicrophoneMuted = newValue
            }
        }
    }

    /// A participant's volume here, 0…1 (nil: not in the call).
    public func volume(ofParticipant peerID: String) -> Float? {
        guard let peer = UInt32(peerID) else { return nil }
        return self.engine?.volume(of: peer)
    }

    /// Sets a participant's volume here, 0…1 (clamped; 1 at joining). False when the peer is not
    /// in the call.
    @discardableResult
    public func setVolume(_ volume: Float, ofParticipant peerID: String) -> Bool {
        guard let peer = UInt32(peerID) else { return false }
        return self.engine?.setVolume(volume, of: peer) ?? false
    }

    /// What a participant plays here (after its volume), smoothed over 300 ms, in dBFS (nil: not
    /// in the call).
    public func level(ofParticipant peerID: String) -> Float? {
        guard let peer = UInt32(peerID) else { return nil }
        return self.engine?.level(of: peer)
    }

    /// The microphone's smoothed level in dBFS (after echo cancellation, before mute).
    public var inputLevel: Float { self.engine?.inputLevel ?? LevelMeter.floor }

    /// The dominant speaker (this member included, by its peer ID); nil before anyone spoke.
    public var activeSpeaker: String? { self.engine?.activeSpeaker.map(String.init) }

    /// Everyone speaking now (this member included).
    public var speakers: Set<String> { Set(self.engine?.speakers.map(String.init) ?? []) }

    /// A snapshot of the counters.
    public var statistics: Statistics {
        let (statistics, engine) = self.state.withLockedValue { state in
            var statistics = state.statistics
            statistics.ignoredMessages = state.membership.ignored
            return (statistics, state.media?.engine)
        }
        var snapshot = statistics
        snapshot.engine = engine?.currentStatistics
        return snapshot
    }

    /// The call's events from now on, until the chat is released; each access is a sequence of
    /// its own.
    public var events: AsyncStream<Event> {
        self.subscribers.makeStream(bufferingPolicy: .bufferingNewest(256))
    }

    private var engine: GroupVoiceEngine? { self.state.withLockedValue { $0.media?.engine } }

    // MARK: - Driving

    private func receive(_ data: ByteBuffer, from peer: UInt32) {
        let message: GroupVoiceMessage
        do {
            message = try GroupVoiceMessage.decode(data.readableBytesView)
        } catch {
            self.state.withLockedValue { $0.statistics.malformedMessages += 1 }
            return
        }
        if case .media(let packet) = message {
            let engine = self.state.withLockedValue { $0.membership.acceptsMedia(from: peer) ? $0.media?.engine : nil }
            engine?.receive(packet, from: peer, atMilliseconds: self.clock.milliseconds())
            return
        }
        let effects = self.state.withLockedValue { $0.membership.received(message, from: peer) }
        self.apply(effects)
    }

    private func peerChanged(_ peer: UInt32, connected: Bool) {
        let effects = self.state.withLockedValue { state in
            connected ? state.membership.peerConnected(peer) : state.membership.peerDisconnected(peer)
        }
        self.apply(effects)
    }

    /// Carries out the membership's effects, outside the lock (the session's calls take its own).
    private func apply(_ effects: [GroupVoiceMembership.Effect], engine given: GroupVoiceEngine? = nil) {
        guard !effects.isEmpty else { return }
        let (engine, logger) = self.state.withLockedValue { (given ?? $0.media?.engine, $0.configuration.logger) }
        var events: [Event] = []
        for effect in effects {
            switch effect {
            case .send(let message, let peers):
                self.send(message.encoded(), to: peers, reliable: true)
            case .add(let peer):
                do {
                    try engine?.add(peer)
                    logger.debug("participant joined", metadata: ["peer": "\(peer)"])
                    events.append(.participantJoined(String(peer)))
                } catch {
                    logger.warning("participant not heard", metadata: ["peer": "\(peer)", "error": "\(error)"])
                }
            case .remove(let peer):
                engine?.remove(peer)
                logger.debug("participant left", metadata: ["peer": "\(peer)"])
                events.append(.participantLeft(String(peer)))
            }
        }
        self.emit(events)
    }

    private func sendMedia(_ packet: [UInt8], to destination: GroupVoiceEngine.Destination) {
        let peers: [UInt32]
        switch destination {
        case .everyone: peers = self.state.withLockedValue { $0.membership.participants }
        case .participant(let peer): peers = [peer]
        }
        guard !peers.isEmpty else { return }
        self.send(GroupVoiceMessage.media(packet).encoded(), to: peers, reliable: false)
    }

    /// Sends to all `peers` at once, or (when one of them has just gone) to each that can still
    /// be reached.
    private func send(_ bytes: [UInt8], to peers: [UInt32], reliable: Bool) {
        do {
            try self.session.send(bytes, onChannel: SessionChannel.groupVoice, toPeers: peers, reliable: reliable)
        } catch {
            var failed = peers.count == 1 ? 1 : 0
            if peers.count > 1 {
                for peer in peers {
                    do { try self.session.send(bytes, onChannel: SessionChannel.groupVoice, toPeers: [peer], reliable: reliable) } catch { failed += 1 }
                }
            }
            if failed > 0 { self.state.withLockedValue { $0.statistics.failedSends += failed } }
        }
    }

    private func speakersChanged(_ changes: [GroupVoiceEngine.Change], engine: GroupVoiceEngine) {
        let events = changes.map { change -> Event in
            switch change {
            case .speaking(let peer, let speaking): .speakingChanged(String(peer), isSpeaking: speaking)
            case .activeSpeaker(let peer): .activeSpeakerChanged(peer.map(String.init))
            }
        }
        // A frame the audio thread finished after stop() says nothing more.
        self.emit(events, from: engine)
    }

    /// Hands events to every subscriber, under the chat's lock so that they keep the order the
    /// state changed in (a reader's termination takes the subscribers' own lock, never this
    /// one); when `engine` is given, only while it is the running one.
    private func emit(_ events: [Event], from engine: GroupVoiceEngine? = nil) {
        guard !events.isEmpty else { return }
        self.state.withLockedValue { state in
            if let engine, state.media?.engine !== engine { return }
            self.subscribers.yield(events)
        }
    }
}
