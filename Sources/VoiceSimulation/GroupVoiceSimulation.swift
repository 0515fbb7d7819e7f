import GameKitVoiceEngine
import NIOCore
import NetworkImpairment

/// A group call in virtual time: `GroupVoiceEngine`s for participants 1…N, every one in the
/// call with every other, each direction of each pair through a seeded impairment model of its
/// own. The engine tests and `gk-bench voice` (its group rows) run calls on it; a run repeats
/// exactly for the same seed.
///
/// Each ``step(microphones:)`` is one 20 ms frame: every engine processes its microphone frame
/// (what it sends enters the network now), then what is due now is delivered, so a packet is
/// played at the earliest one frame after it was sent.
public final class GroupVoiceSimulation {
    /// The engines; participant `index + 1` is `engines[index]`.
    public let engines: [GroupVoiceEngine]
    /// What each participant's engine said about speakers, with the frame it said it at.
    public private(set) var changes: [[(frame: Int, change: GroupVoiceEngine.Change)]]
    /// Frames run so far.
    public private(set) var frame = 0
    /// Voice bytes each participant sent (packets as the engine made them, once per copy sent).
    public private(set) var sentBytes: [Int]

    private let outbox: Outbox
    private var paths: [[ImpairmentModel<[UInt8]>]]
    /// Participants (by index) whose packets no longer travel: they left the call.
    private var gone: Set<Int> = []

    private final class Outbox: @unchecked Sendable {
        var packets: [(from: Int, packet: [UInt8], destination: GroupVoiceEngine.Destination)] = []
        var changes: [(participant: Int, changes: [GroupVoiceEngine.Change])] = []
    }

    /// A call of `participants` engines made with `configuration`, every path impaired by
    /// `impairment`, or the path from each index to each other by `pathImpairment` when given
    /// (each seeded from `seed` and the pair).
    public init(
        participants count: Int, impairment: ImpairmentProfile = ImpairmentProfile(), seed: UInt64 = 1,
        pathImpairment: ((_ from: Int, _ to: Int) -> ImpairmentProfile)? = nil,
        configuration: VoiceEngine.Configuration = VoiceEngine.Configuration(),
        speakers: ActiveSpeakerDetector<GroupVoiceEngine.ParticipantID>.Configuration = .init()
    ) throws {
        precondition(count >= 2, "a call needs two participants")
        let outbox = Outbox()
        var engines: [GroupVoiceEngine] = []
        for index in 0..<count {
            let engine = try GroupVoiceEngine(
                localParticipant: Self.id(index), configuration: configuration, speakers: speakers,
                send: { packet, destination in outbox.packets.append((index, packet, destination)) },
                onChange: { changes in outbox.changes.append((index, changes)) })
            for other in 0..<count where other != index { try engine.add(Self.id(other)) }
            engines.append(engine)
        }
        self.engines = engines
        self.outbox = outbox
        self.changes = Array(repeating: [], count: count)
        self.sentBytes = Array(repeating: 0, count: count)
        self.paths = (0..<count).map { from in
            (0..<count).map { to in
                ImpairmentModel(profile: pathImpairment?(from, to) ?? impairment, seed: seed &* 1_000_003 &+ UInt64(from * count + to))
            }
        }
    }

    /// The participant ID of `engines[index]`.
    public static func id(_ index: Int) -> GroupVoiceEngine.ParticipantID { GroupVoiceEngine.ParticipantID(index + 1) }

    /// The current time in ms.
    public var milliseconds: Int64 { Int64(frame * engines[0].format.frameMilliseconds) }

    /// Runs one frame with each participant's microphone frame (a participant that left is not
    /// run: its entry is ignored) and returns what each loudspeaker plays (empty for one that
    /// left).
    public func step(microphones: [[Int16]]) throws -> [[Int16]] {
        precondition(microphones.count == engines.count, "one microphone frame per participant")
        let now = milliseconds
        let deadline = NIODeadline.uptimeNanoseconds(UInt64(now) * 1_000_000)
        var played: [[Int16]] = []
        for (index, engine) in engines.enumerated() {
            played.append(gone.contains(index) ? [] : try engine.process(microphone: microphones[index], atMilliseconds: now))
        }
        for (from, packet, destination) in outbox.packets where !gone.contains(from) {
            let targets: [Int]
            switch destination {
            case .everyone: targets = engines.indices.filter { $0 != from && !gone.contains($0) }
            case .participant(let id): targets = [Int(id) - 1].filter { engines.indices.contains($0) && !gone.contains($0) }
            }
            for to in targets {
                sentBytes[from] += packet.count
                paths[from][to].submit(packet, at: deadline)
            }
        }
        outbox.packets.removeAll()
        for (index, list) in outbox.changes {
            changes[index] += list.map { (frame, $0) }
        }
        outbox.changes.removeAll()
        for from in engines.indices {
            for to in engines.indices where to != from {
                while let packet = paths[from][to].popDue(at: deadline) {
                    guard !gone.contains(from), !gone.contains(to) else { continue }
                    engines[to].receive(packet, from: Self.id(from), atMilliseconds: now)
                }
            }
        }
        frame += 1
        return played
    }

    /// Participant `index` leaves: the others remove it (their speaker changes are recorded at
    /// this frame), and nothing travels to or from it any more.
    public func leave(_ index: Int) {
        gone.insert(index)
        for (other, engine) in engines.enumerated() where other != index && !gone.contains(other) {
            engine.remove(Self.id(index))
        }
        for (participant, list) in outbox.changes {
            changes[participant] += list.map { (frame, $0) }
        }
        outbox.changes.removeAll()
    }
}
