import Foundation
import GameKitTransport
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
        /// Bumped whenever a chat's resources are torn down: late results of older chats are
        /// recognised by it and dropped.
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
        /// The cause of a set-up failure this side found (a device that would not open, …),
        /// given to the client with the code the machine reports for it.
        var setUpFailure: GKVoiceChatServiceError?

        init(configuration: GKVoiceChatService.Configuration) {
            self.configuration = configuration
            self.machine = VoiceCallMachine(timing: configuration.timing)
        }
    }

    /// A running chat's audio.
    struct Media {
        var engine: VoiceEngine
        var loop: AudioLoop
        var capture: AudioCaptureDevice
        var playback: AudioPlaybackDevice
    }

    /// Runs one machine step under the lock, then its actions.
    func perform<E: Error>(_ step: (inout VoiceCallMachine, NIODeadline) throws(E) -> [VoiceCallMachine.Action]) throws(E) {
        try self.run(onlyIn: nil, step)
    }

    /// As ``perform(_:)``, but only while the chat of `generation` is the current one.
    func perform(ifCurrent generation: Int, _ step: (inout VoiceCallMachine, NIODeadline) -> [VoiceCallMachine.Action]) {
        self.run(onlyIn: generation, step)
    }

    private func run<E: Error>(onlyIn expected: Int?, _ step: (inout VoiceCallMachine, NIODeadline) throws(E) -> [VoiceCallMachine.Action]) throws(E) {
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
        self.rescheduleTimer()
        self.lock.unlock()
        self.execute(actions, generation: generation)
    }

    /// Under the lock.
    private func rescheduleTimer() {
        self.state.timer?.cancel()
        self.state.timer = nil
        guard let deadline = self.state.machine.nextDeadline else { return }
        let generation = self.state.generation
        self.state.timer = self.loop.scheduleTask(deadline: deadline) { [weak self] in
            self?.perform(ifCurrent: generation) { machine, now in machine.tick(now: now) }
        }
    }

    private func execute(_ actions: [VoiceCallMachine.Action], generation: Int) {
        let logger = self.lock.withLock { self.state.configuration.logger }
        for action in actions {
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
                // Opening audio devices blocks (a PulseAudio connection): not on an event loop.
                DispatchQueue.global().async {
                    if self.startMedia(generation: generation) {
                        self.perform(ifCurrent: generation) { machine, _ in machine.mediaStarted() }
                    }
                }
            case .didStart(let participant):
                self.withClient { client in client.voiceChatService(self, didStartWithParticipantID: participant) }
            case .didNotStart(let participant, let error):
                let detailed = self.detailed(error)
                self.withClient { client in client.voiceChatService(self, didNotStartWithParticipantID: participant, error: detailed) }
            case .didStop(let participant, let error):
                let detailed = self.detailed(error)
                self.withClient { client in client.voiceChatService(self, didStopWithParticipantID: participant, error: detailed) }
            case .tearDown:
                self.tearDown()
            }
        }
    }

    /// The error for the client: the cause this side recorded when it has that code, else the
    /// code alone.
    private func detailed(_ code: GKVoiceChatServiceError.Code?) -> GKVoiceChatServiceError? {
        guard let code else { return nil }
        let recorded = self.lock.withLock { () -> GKVoiceChatServiceError? in
            defer { self.state.setUpFailure = nil }
            return self.state.setUpFailure
        }
        return recorded.flatMap { $0.code == code ? $0 : nil } ?? GKVoiceChatServiceError(code)
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
            case .failure:
                opening.whenSuccess { $0.close() }
                self.perform(ifCurrent: generation) { machine, _ in machine.setUpFailed(.networkConfigurationError) }
            }
        }
    }

    private func connect(callID: UInt32, remoteKey: [UInt8], remoteCandidates: [ICECandidate], initiator: Bool, generation: Int) {
        let (connection, exchange) = self.lock.withLock { (self.state.connection, self.state.keyExchange) }
        guard let connection, let exchange,
            let keys = try? exchange.keys(remotePublicKey: remoteKey, isInitiator: initiator, context: callID.bigEndianBytes)
        else {
            self.perform(ifCurrent: generation) { machine, _ in machine.setUpFailed(.remoteParticipantResponseInvalidError) }
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

    /// Opens the devices and starts the engine; false (and the chat ends with 32005) if the
    /// devices cannot be opened.
    private func startMedia(generation: Int) -> Bool {
        let (configuration, connection, muted, volume) = self.lock.withLock {
            (self.state.configuration, self.state.connection, self.state.muted, self.state.volume)
        }
        guard let connection else { return false }
        let devices: (AudioCaptureDevice, AudioPlaybackDevice)
        do {
            devices = try configuration.audio.open()
        } catch {
            let failure = GKVoiceChatServiceError(
                .audioUnavailableError, "The audio devices could not be opened (\(configuration.audio.summary)): \(error.localizedDescription)", underlying: error)
            self.lock.withLock { self.state.setUpFailure = failure }
            self.perform(ifCurrent: generation) { machine, _ in machine.setUpFailed(.audioUnavailableError) }
            return false
        }
        let engine: VoiceEngine
        do {
            engine = try VoiceEngine(configuration: configuration.engine) { packet in connection.send(packet) }
        } catch {
            devices.0.close()
            devices.1.close()
            let failure = GKVoiceChatServiceError(.internalError, "The voice engine could not start: \(error.localizedDescription)", underlying: error)
            self.lock.withLock { self.state.setUpFailure = failure }
            self.perform(ifCurrent: generation) { machine, _ in machine.setUpFailed(.internalError) }
            return false
        }
        engine.isMicrophoneMuted = muted
        engine.remoteVolume = volume
        let loop = AudioLoop(engine: engine, capture: devices.0, playback: devices.1)
        let current = self.lock.withLock {
            guard self.state.generation == generation else { return false }
            self.state.media = Media(engine: engine, loop: loop, capture: devices.0, playback: devices.1)
            return true
        }
        guard current else {
            devices.0.close()
            devices.1.close()
            return false
        }
        loop.start()
        return true
    }

    private func tearDown() {
        let (connection, media) = self.lock.withLock {
            self.state.generation += 1
            defer {
                self.state.connection = nil
                self.state.keyExchange = nil
                self.state.media = nil
            }
            return (self.state.connection, self.state.media)
        }
        connection?.close()
        if let media {
            media.loop.stop()
            // The loop may be blocked in a device read: closing the devices ends it.
            DispatchQueue.global().async {
                media.capture.close()
                media.loop.wait()
                media.playback.close()
            }
        }
    }
}
