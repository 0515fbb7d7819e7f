import Foundation

/// A voice call with any number of participants: the microphone goes out once, as one stream
/// every participant receives; each participant's packets come back through a receiver of their
/// own (jitter buffer, decoder, volume, meter), and the loudspeaker plays their mix, with echo
/// cancellation against that mix. `VoiceEngine` is this engine with one participant.
///
/// Like `VoiceEngine` it does no I/O and keeps no time: `process(microphone:atMilliseconds:)`
/// takes one microphone frame and returns the loudspeaker's, `receive(_:from:atMilliseconds:)`
/// takes a participant's packet; packets leave through `send` with their destination (the audio
/// stream to everyone, each receiver report to the participant it is about), and who is speaking
/// leaves through `onChange`. Both closures are called outside the engine's lock. All methods are
/// thread-safe.
public final class GroupVoiceEngine: @unchecked Sendable {
    /// A participant, as the caller numbers them (a session's peer ID, for example).
    public typealias ParticipantID = UInt32
    /// Who is speaking: `ActiveSpeakerDetector`'s changes, the local participant included.
    public typealias Change = ActiveSpeakerDetector<ParticipantID>.Change

    /// Where a packet goes.
    public enum Destination: Sendable, Hashable {
        /// Every participant (the audio stream).
        case everyone
        /// One participant (a report on its stream).
        case participant(ParticipantID)
    }

    /// The most participants besides the local one.
    public static let maximumParticipants = 31

    /// One participant's counters.
    public struct ParticipantStatistics: Sendable, Hashable {
        /// Audio packets and receiver reports that came from the participant.
        public var packetsReceived = 0
        public var reportsReceived = 0
        /// The loss its last report gave for this member's stream, in percent.
        public var lastReportedLossPercent = 0
        /// Its jitter buffer's and receiver's counters.
        public var jitter = JitterBuffer.Statistics()
        public var receiver = VoiceReceiver.Statistics()
        /// Its jitter buffer's target delay, and the audio held now, in ms.
        public var targetDelayMilliseconds = 0
        public var bufferedMilliseconds = 0
    }

    /// The engine's counters.
    public struct Statistics: Sendable, Hashable {
        /// Audio packets made (each goes to every participant) and reports sent.
        public var packetsSent = 0
        public var reportsSent = 0
        /// The audio packets' bytes (once per packet made, however many it goes to).
        public var bytesSent = 0
        /// Packets that could not be read, and packets from someone not in the call.
        public var rejectedPackets = 0
        public var unknownParticipantPackets = 0
        /// Packets dropped unread because more than ``GroupVoiceEngine/maximumQueuedPackets``
        /// waited (no frame was processed for a while).
        public var droppedArrivals = 0
        /// The loss the encoder plans its FEC for (the worst participant's), in percent.
        public var expectedLossPercent = 0
        /// How many frames back the packets sent cover against bursts (0: no copies), and how
        /// many packets carried copies.
        public var burstCover = 0
        public var packetsWithCopies = 0
        /// Each participant's counters.
        public var participants: [ParticipantID: ParticipantStatistics] = [:]
    }

    private final class Participant {
        let receiver: VoiceReceiver
        var statistics = ParticipantStatistics()
        var framesSinceReport = 0

        init(receiver: VoiceReceiver) { self.receiver = receiver }
    }

    private let lock = NSLock()
    /// Packets received and not yet taken in, under a lock of their own.
    private let arrivalLock = NSLock()
    private var arrivals: [(bytes: [UInt8], participant: ParticipantID, now: Int64)] = []
    private var droppedArrivals = 0
    private let configuration: VoiceEngine.Configuration
    /// The local participant, as the speaking changes name it.
    public let localParticipant: ParticipantID
    private let sender: VoiceSender
    private let canceller: EchoCanceller
    private let send: @Sendable ([UInt8], Destination) -> Void
    private let onChange: @Sendable ([Change]) -> Void
    private var participants: [ParticipantID: Participant] = [:]
    /// Participants in the order they joined (mixing and reporting go in a fixed order).
    private var order: [ParticipantID] = []
    private var detector: ActiveSpeakerDetector<ParticipantID>
    private var statistics = Statistics()
    private var mixMeter = LevelMeter()

    /// Creates an engine for `localParticipant`; `send` takes every packet to send with its
    /// destination, `onChange` every change of who is speaking.
    public init(
        localParticipant: ParticipantID,
        configuration: VoiceEngine.Configuration = VoiceEngine.Configuration(),
        speakers: ActiveSpeakerDetector<ParticipantID>.Configuration = .init(),
        send: @escaping @Sendable ([UInt8], Destination) -> Void,
        onChange: @escaping @Sendable ([Change]) -> Void = { _ in }
    ) throws(VoiceEngineError) {
        guard configuration.jitter.format == configuration.format else {
            throw .invalidConfiguration("the jitter buffer's frames differ from the engine's")
        }
        guard configuration.reportIntervalFrames > 0 else { throw .invalidConfiguration("report interval") }
        self.localParticipant = localParticipant
        self.configuration = configuration
        sender = try VoiceSender(format: configuration.format, settings: configuration.opus)
        canceller = try configuration.echoCanceller.make(echoDelayHintMilliseconds: configuration.echoDelayHintMilliseconds)
        detector = ActiveSpeakerDetector(configuration: speakers)
        self.send = send
        self.onChange = onChange
    }

    /// The frame format.
    public var format: VoiceFormat { configuration.format }

    // MARK: - Participants

    /// Adds a participant (a receiver for its stream); adding one already there does nothing.
    public func add(_ participant: ParticipantID) throws(VoiceEngineError) {
        guard participant != localParticipant else { throw .invalidConfiguration("the local participant cannot be added") }
        lock.lock()
        defer { lock.unlock() }
        guard participants[participant] == nil else { return }
        guard participants.count < Self.maximumParticipants else {
            throw .invalidConfiguration("a call holds at most \(Self.maximumParticipants) other participants")
        }
        participants[participant] = Participant(receiver: try VoiceReceiver(jitter: configuration.jitter))
        order.append(participant)
    }

    /// Removes a participant: its audio stops, its reports no longer shape the stream, and if it
    /// was speaking the changes say so.
    public func remove(_ participant: ParticipantID) {
        let changes = locked { () -> [Change] in
            guard participants.removeValue(forKey: participant) != nil else { return [] }
            order.removeAll { $0 == participant }
            sender.forget(receiver: participant)
            return detector.remove(participant)
        }
        if !changes.isEmpty { onChange(changes) }
    }

    /// The participants, in the order they were added.
    public var participantIDs: [ParticipantID] { locked { order } }

    // MARK: - Controls and meters

    /// Whether the microphone goes out as silence.
    public var isMicrophoneMuted: Bool {
        get { locked { sender.isMuted } }
        set { locked { sender.isMuted = newValue } }
    }

    /// A participant's gain, 0…1 (nil: not in the call).
    public func volume(of participant: ParticipantID) -> Float? {
        locked { participants[participant]?.receiver.volume }
    }

    /// Sets a participant's gain, 0…1 (clamped); false when it is not in the call.
    @discardableResult
    public func setVolume(_ volume: Float, of participant: ParticipantID) -> Bool {
        locked {
            guard let entry = participants[participant] else { return false }
            entry.receiver.volume = volume
            return true
        }
    }

    /// The level of what a participant plays here (after its volume), smoothed, in dBFS (nil:
    /// not in the call).
    public func level(of participant: ParticipantID) -> Float? {
        locked { participants[participant]?.receiver.meter.level }
    }

    /// The microphone's smoothed level in dBFS (after echo cancellation, before mute).
    public var inputLevel: Float { locked { sender.meter.level } }
    /// The mix's smoothed level in dBFS.
    public var outputLevel: Float { locked { mixMeter.level } }

    /// The dominant speaker (the local participant included), nil before anyone spoke.
    public var activeSpeaker: ParticipantID? { locked { detector.activeSpeaker } }
    /// Everyone speaking now.
    public var speakers: Set<ParticipantID> { locked { detector.speakers } }

    /// A snapshot of the counters.
    public var currentStatistics: Statistics {
        locked {
            var snapshot = statistics
            snapshot.packetsSent = sender.packetsSent
            snapshot.bytesSent = sender.bytesSent
            snapshot.expectedLossPercent = sender.expectedLossPercent
            snapshot.burstCover = sender.burstCover
            snapshot.packetsWithCopies = sender.packetsWithCopies
            for (id, entry) in participants {
                var each = entry.statistics
                each.jitter = entry.receiver.jitterStatistics
                each.receiver = entry.receiver.statistics
                each.targetDelayMilliseconds = entry.receiver.targetDelayMilliseconds
                each.bufferedMilliseconds = entry.receiver.bufferedMilliseconds
                snapshot.participants[id] = each
            }
            return snapshot
        }
    }

    // MARK: - Packets and frames

    /// Takes a packet from a participant. Malformed packets, and packets from someone not in the
    /// call, are counted and dropped.
    ///
    /// It never waits for a frame being processed (decoding, echo cancellation and encoding hold
    /// the engine's lock for milliseconds, and the network's event loop must not stall behind
    /// them): the packet waits in a queue of its own, with its arrival time, and is taken in at
    /// the start of the next frame or of any other call. At most ``maximumQueuedPackets`` wait;
    /// beyond that the oldest is dropped and counted.
    public func receive(_ bytes: [UInt8], from participant: ParticipantID, atMilliseconds now: Int64) {
        arrivalLock.lock()
        defer { arrivalLock.unlock() }
        if arrivals.count >= Self.maximumQueuedPackets {
            arrivals.removeFirst()
            droppedArrivals += 1
        }
        arrivals.append((bytes, participant, now))
    }

    /// The most packets waiting to be taken in (about 2 s of a call of 32).
    public static let maximumQueuedPackets = 3200

    /// Takes in the packets that arrived since the last call (the engine's lock held).
    private func takeArrivalsLocked() {
        arrivalLock.lock()
        var arrived: [(bytes: [UInt8], participant: ParticipantID, now: Int64)] = []
        swap(&arrived, &arrivals)
        statistics.droppedArrivals = droppedArrivals
        arrivalLock.unlock()
        for (bytes, participant, now) in arrived { takeLocked(bytes, from: participant, atMilliseconds: now) }
    }

    private func takeLocked(_ bytes: [UInt8], from participant: ParticipantID, atMilliseconds now: Int64) {
        guard let entry = participants[participant] else {
            statistics.unknownParticipantPackets += 1
            return
        }
        guard let packet = try? VoicePacket(decoding: bytes) else {
            statistics.rejectedPackets += 1
            return
        }
        switch packet {
        case .audio, .redundantAudio:
            entry.statistics.packetsReceived += 1
            entry.receiver.receive(packet, atMilliseconds: now)
        case .report(let loss, _, _, _, let cover):
            entry.statistics.reportsReceived += 1
            entry.statistics.lastReportedLossPercent = Int(loss)
            sender.apply(reportedLossPercent: Int(loss), burstCover: Int(cover), from: participant)
        }
    }

    /// Processes one microphone frame at time `now` and returns the mix for the loudspeaker.
    public func process(microphone: [Int16], atMilliseconds now: Int64) throws(VoiceEngineError) -> [Int16] {
        let samples = configuration.format.samplesPerFrame
        guard microphone.count == samples else { throw .wrongFrameSize(expected: samples, got: microphone.count) }
        var outgoing: [([UInt8], Destination)] = []
        var changes: [Change] = []
        let speaker: [Int16]
        lock.lock()
        do {
            defer { lock.unlock() }
            takeArrivalsLocked()
            var levels: [(ParticipantID, Float)] = []
            levels.reserveCapacity(order.count + 1)
            var mix = [Int32](repeating: 0, count: samples)
            for id in order {
                let receiver = participants[id]!.receiver
                let frame = receiver.pull()
                levels.append((id, receiver.frameLevel))
                for index in 0..<samples { mix[index] += Int32(frame[index]) }
            }
            speaker = mix.map { Int16(clamping: $0) }
            mixMeter.measure(speaker)
            let cleaned = try cancelEcho(microphone: microphone, speaker: speaker)
            levels.append((localParticipant, sender.isMuted ? LevelMeter.floor : LevelMeter.level(of: cleaned)))
            changes = detector.update(levels: levels)
            if let packet = try sender.send(frame: cleaned) { outgoing.append((packet, .everyone)) }
            for id in order {
                let entry = participants[id]!
                entry.framesSinceReport += 1
                guard entry.framesSinceReport >= configuration.reportIntervalFrames, entry.statistics.packetsReceived > 0 else { continue }
                entry.framesSinceReport = 0
                outgoing.append((entry.receiver.makeReport().encoded(), .participant(id)))
                statistics.reportsSent += 1
            }
        }
        for (packet, destination) in outgoing { send(packet, destination) }
        if !changes.isEmpty { onChange(changes) }
        return speaker
    }

    private func cancelEcho(microphone: [Int16], speaker: [Int16]) throws(VoiceEngineError) -> [Int16] {
        var cleaned = [Int16]()
        cleaned.reserveCapacity(microphone.count)
        let step = canceller.frameSize
        for start in stride(from: 0, to: microphone.count, by: step) {
            let near = Array(microphone[start..<start + step])
            let far = Array(speaker[start..<start + step])
            cleaned.append(contentsOf: try canceller.process(near: near, far: far))
        }
        return cleaned
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        takeArrivalsLocked()
        return try body()
    }
}

extension GroupVoiceEngine: VoiceFrameProcessor {}
