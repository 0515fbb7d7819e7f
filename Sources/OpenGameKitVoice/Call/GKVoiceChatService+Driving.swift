import Foundation
import GameKitTransport
import GameKitTraversal
import GameKitVoiceEngine
import NIOCore

/// The service's driver: it runs the call machine under the service's lock and carries out
/// what the machine asks for (media connection, signalling through the client, audio, client
/// callbacks) outside it.
extension GKVoiceChatService {
    /// Everything the service keeps between calls.
    struct State {
        var configuration: GKVoiceChatService.Configuration
        var machine: VoiceCallMachine
        /// Bumped, under the lock, in the step that ends a chat: late results of older chats are
        /// recognised by it and dropped, and the next chat never runs under an ended one's number.
        var generation = 0
        var connection: RealTimeConnection?
        var keyExchange: RealTimeKeyExchange?
        var media: Media?
        var timer: Scheduled<Void>?
        var muted = false
        var volume: Float = 1
        var inputMetering = false
        var outputMetering = false
        var clientLacksRealTime = false
        /// The cause of a set-up failure this side found (a device that would not open, …) in
        /// the chat of `generation`, given to the client with the code the machine reports for it.
        var setUpFailure: (generation: Int, error: GKVoiceChatServiceError)?
        /// The async face's subscribers and waiting calls.
        var waiting = AsyncWaiting()

        init(configuration: GKVoiceChatService.Configuration) {
            self.configuration = configuration
            self.machine = VoiceCallMachine(timing: configuration.timing)
        }
    }

    /// A running chat's audio.
    struct Media {
        var engine: VoiceEngine
        var loop: AudioLoop
    }

    /// Runs one machine step under the lock, then its actions. `then`, if given, runs under the
    /// lock right after a step that did not throw, before the step's outcomes are published.
    func perform<E: Error>(
        _ step: (inout VoiceCallMachine, NIODeadline) throws(E) -> [VoiceCallMachine.Action], then: ((inout State) -> Void)? = nil
    ) throws(E) {
        try self.run(onlyIn: nil, step, then: then)
    }

    /// As ``perform(_:then:)``, but only while the chat of `generation` is the current one.
    func perform(ifCurrent generation: Int, _ step: (inout VoiceCallMachine, NIODeadline) -> [VoiceCallMachine.Action]) {
        self.run(onlyIn: generation, step, then: nil)
    }

    private func run<E: Error>(
        onlyIn expected: Int?, _ step: (inout VoiceCallMachine, NIODeadline) throws(E) -> [VoiceCallMachine.Action], then: ((inout State) -> Void)?
    ) throws(E) {
        self.lock.lock()
        let generation = self.state.generation
        guard expected == nil || expected == generation else { return self.lock.unlock() }
        let actions: [VoiceCallMachine.Action]
        do {
            actions = try step(&self.state.machine, .now())
        } catch {
            self.lock.unlock()
            throw error
        }
        then?(&self.state)
        // Outcomes are worded, published and handed to waiting calls in the machine's order.
        var errors: [GKVoiceChatServiceError?] = []
        var resumptions: [() -> Void] = []
        for action in actions {
            let error = self.outcomeErrorLocked(action, generation: generation)
            errors.append(error)
            resumptions += self.state.waiting.publishLocked(action, error: error, generation: generation, to: self.eventSubscribers)
        }
        var released: Released?
        if actions.contains(.tearDown) {
            released = Released(connection: self.state.connection, media: self.state.media)
            self.state.connection = nil
            self.state.keyExchange = nil
            self.state.media = nil
            self.state.setUpFailure = nil
            self.state.generation += 1
        }
        self.rescheduleTimer()
        self.lock.unlock()
        for resume in resumptions { resume() }
        self.execute(actions, errors: errors, released: released, generation: generation)
    }

    /// What an ended chat held, taken under the lock in the step that ended it.
    struct Released {
        var connection: RealTimeConnection?
        var media: Media?
    }

    /// Records, under the lock, why this side could not set up the chat of `generation`, for the
    /// client's `didNotStart` and for the other side (a failed message).
    func recordSetUpFailure(_ failure: GKVoiceChatServiceError, generation: Int) {
        self.lock.withLock {
            guard self.state.generation == generation else { return }
            self.state.setUpFailure = (generation, failure)
        }
        self.configuration.logger.debug("voice chat set-up failed", metadata: ["reason": "\(failure.localizedDescription)"])
        self.perform(ifCurrent: generation) { machine, _ in machine.setUpFailed(failure.code, reason: failure.localizedDescription) }
    }

    /// Under the lock.
    private func rescheduleTimer() {
        self.state.timer?.cancel()
        self.state.timer = nil
        guard let deadline = self.state.machine.nextDeadline else { return }
        let generation = self.state.generation
        self.state.timer = self.loop.scheduleTask(deadline: deadline) { [weak self] in
            self?.perform(ifCurrent: generation) { machine, now in machine.handleTimeout(now: now) }
        }
    }

    private func execute(_ actions: [VoiceCallMachine.Action], errors: [GKVoiceChatServiceError?], released: Released?, generation: Int) {
        let logger = self.lock.withLock { self.state.configuration.logger }
        for (action, error) in zip(actions, errors) {
            logger.debug("call step", metadata: ["step": "\(action)"])
            switch action {
            case .gather:
                self.gather(generation: generation)
            case .send(let message, let participant):
                let data = Data(message.encoded())
                self.withClient { client in client.voiceChatService(self, send: data, toParticipantID: participant) }
            case .askClient(let participant, let callID):
                self.withClient { client in
                    client.voiceChatService(self, didReceiveInvitationFromParticipantID: participant, callID: Int(callID))
                }
            case .connect(let callID, let remoteKey, let remoteCandidates, let initiator):
                self.connect(callID: callID, remoteKey: remoteKey, remoteCandidates: remoteCandidates, initiator: initiator, generation: generation)
            case .addRemoteCandidates(let candidates):
                self.lock.withLock { self.state.connection }?.addRemoteCandidates(candidates)
            case .tryClientPath:
                self.tryClientPath(generation: generation)
            case .useClientPath:
                self.useClientPath(generation: generation)
            case .startMedia:
                // Opening audio devices blocks (a PulseAudio connection): on a thread of its own,
                // neither an event loop nor a worker of a shared pool (Dispatch's, which Swift
                // concurrency's tasks run on too).
                Thread.detachNewThread {
                    if self.prepareMedia(generation: generation) {
                        self.perform(ifCurrent: generation) { machine, _ in machine.audioReady() }
                    }
                }
            case .runAudio:
                self.lock.withLock { self.state.generation == generation ? self.state.media : nil }?.loop.start()
            case .didStart(let participant):
                self.withClient { client in client.voiceChatService(self, didStartWithParticipantID: participant) }
            case .didNotStart(let participant, _, _):
                self.withClient { client in client.voiceChatService(self, didNotStartWithParticipantID: participant, error: error) }
            case .didStop(let participant, _, _):
                self.withClient { client in client.voiceChatService(self, didStopWithParticipantID: participant, error: error) }
            case .tearDown:
                released.map(self.tearDown)
            }
        }
    }

    /// Under the lock: the error an outcome gives the client, in words: the other side's
    /// account when it sent one, the cause this side recorded for this chat when it has that
    /// code, else the code's meaning with the participant named.
    private func outcomeErrorLocked(_ action: VoiceCallMachine.Action, generation: Int) -> GKVoiceChatServiceError? {
        let participant: String
        let code: GKVoiceChatServiceError.Code
        let remote: VoiceCallMachine.RemoteFailure?
        let started: Bool
        switch action {
        case .didNotStart(let who, let what?, let why):
            (participant, code, remote, started) = (who, what, why, false)
        case .didStop(let who, let what?, let why):
            (participant, code, remote, started) = (who, what, why, true)
        default:
            return nil
        }
        if let remote {
            let cause = GKVoiceChatServiceError(remote.code, remote.reason)
            let sentence = started
                ? "\(participant) ended the voice chat after a failure on its side: \(remote.reason)"
                : "\(participant) could not set the voice chat up: \(remote.reason)"
            return GKVoiceChatServiceError(code, sentence, underlying: cause)
        }
        if let recorded = self.state.setUpFailure, recorded.generation == generation, recorded.error.code == code {
            return recorded.error
        }
        let opening = started ? "The voice chat with \(participant) ended" : "The voice chat with \(participant) did not start"
        return GKVoiceChatServiceError(code, "\(opening): \(code.explanation)")
    }

    // MARK: - Media connection

    private func gather(generation: Int) {
        let configuration = self.lock.withLock { self.state.configuration.connection }
        let opening = RealTimeConnection.makeConnection(configuration: configuration, group: self.loop)
        opening.flatMap { connection in
            connection.candidatesFuture().map { (connection, $0) }
        }.whenComplete { result in
            switch result {
            case .success(let (connection, candidates)):
                let exchange = RealTimeKeyExchange()
                let current = self.lock.withLock {
                    guard self.state.generation == generation else { return false }
                    self.state.connection = connection
                    self.state.keyExchange = exchange
                    return true
                }
                guard current else { return connection.close() }
                self.perform(ifCurrent: generation) { machine, now in
                    machine.gathered(candidates: candidates, keyShare: exchange.publicKeyBytes, now: now)
                }
                connection.onNewCandidates { [weak self] more in
                    self?.perform(ifCurrent: generation) { machine, _ in machine.moreCandidates(more) }
                }
            case .failure(let error):
                opening.whenSuccess { $0.close() }
                self.recordSetUpFailure(
                    GKVoiceChatServiceError(.networkConfigurationError, "The media socket could not be opened (\(configuration.bindAddress)): \(error.localizedDescription)", underlying: error),
                    generation: generation)
            }
        }
    }

    private func connect(callID: UInt32, remoteKey: [UInt8], remoteCandidates: [ICECandidate], initiator: Bool, generation: Int) {
        let (connection, exchange) = self.lock.withLock { (self.state.connection, self.state.keyExchange) }
        guard let connection, let exchange else { return }
        let keys: RealTimeKeys
        do {
            keys = try exchange.keys(remotePublicKey: remoteKey, isInitiator: initiator, context: callID.bigEndianBytes)
        } catch {
            self.recordSetUpFailure(
                GKVoiceChatServiceError(.remoteParticipantResponseInvalidError, "The other participant's key share was refused: \(error.localizedDescription)", underlying: error),
                generation: generation)
            return
        }
        connection.connect(keys: keys, remoteCandidates: remoteCandidates) { [weak self] event in
            self?.connectionEvent(event, generation: generation)
        }
    }

    private func connectionEvent(_ event: RealTimeConnection.Event, generation: Int) {
        switch event {
        case .connected(let path, _):
            self.perform(ifCurrent: generation) { machine, now in machine.connected(path, now: now) }
        case .failed:
            self.perform(ifCurrent: generation) { machine, now in machine.pathFailed(now: now) }
        case .consentLost:
            self.perform(ifCurrent: generation) { machine, _ in machine.mediaLost() }
        case .media(let payload, let viaClient):
            if !payload.isEmpty {
                let engine = self.lock.withLock { self.state.generation == generation ? self.state.media?.engine : nil }
                engine?.receive(payload, atMilliseconds: Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000))
            }
            self.perform(ifCurrent: generation) { machine, now in machine.mediaArrived(viaClient: viaClient, now: now) }
        }
    }

    /// Asks the client, with empty data, whether it has a real-time channel (a client without
    /// one runs the protocol's default `sendRealTime`, which says so).
    private func tryClientPath(generation: Int) {
        guard let participant = self.currentParticipantID else { return }
        self.lock.withLock { self.state.clientLacksRealTime = false }
        self.withClient { client in
            client.voiceChatService(self, sendRealTime: Data(), toParticipantID: participant)
            let available = self.lock.withLock { !self.state.clientLacksRealTime }
            self.perform(ifCurrent: generation) { machine, now in machine.clientPath(available: available, now: now) }
        }
    }

    /// Media goes through the client from now on, starting with an empty sealed probe that tells
    /// the other side to follow.
    private func useClientPath(generation: Int) {
        guard let (connection, participant) = self.lock.withLock({ () -> (RealTimeConnection, String)? in
            guard self.state.generation == generation, let connection = self.state.connection,
                let participant = self.state.machine.call?.participant
            else { return nil }
            return (connection, participant)
        }) else { return }
        connection.useClientPath { [weak self] sealed in
            guard let service = self else { return }
            service.withClient { client in client.voiceChatService(service, sendRealTime: Data(sealed), toParticipantID: participant) }
        }
        connection.send([])
    }

    // MARK: - Audio

    /// Opens the devices and makes the engine and its loop, which runs on `.runAudio`; false
    /// (and the chat ends with 32005) if the devices cannot be opened.
    private func prepareMedia(generation: Int) -> Bool {
        let (configuration, connection, muted, volume) = self.lock.withLock {
            (self.state.configuration, self.state.connection, self.state.muted, self.state.volume)
        }
        guard let connection else { return false }
        let devices: (AudioCaptureDevice, AudioPlaybackDevice)
        do {
            devices = try configuration.audio.open()
        } catch {
            self.recordSetUpFailure(
                GKVoiceChatServiceError(.audioUnavailableError, "The audio devices could not be opened (\(configuration.audio.summary)): \(error.localizedDescription)", underlying: error),
                generation: generation)
            return false
        }
        let engine: VoiceEngine
        do {
            engine = try VoiceEngine(configuration: configuration.engine) { packet in connection.send(packet) }
        } catch {
            devices.0.close()
            devices.1.close()
            self.recordSetUpFailure(
                GKVoiceChatServiceError(.internalError, "The voice engine could not start: \(error.localizedDescription)", underlying: error), generation: generation)
            return false
        }
        engine.isMicrophoneMuted = muted
        engine.remoteVolume = volume
        let loop = AudioLoop(engine: engine, capture: devices.0, playback: devices.1)
        let current = self.lock.withLock {
            guard self.state.generation == generation else { return false }
            self.state.media = Media(engine: engine, loop: loop)
            return true
        }
        guard current else {
            devices.0.close()
            devices.1.close()
            return false
        }
        return true
    }

    /// Closes what an ended chat held (taken from the state in the step that ended it).
    private func tearDown(_ released: Released) {
        released.connection?.close()
        released.media?.loop.shutDown()
    }
}
