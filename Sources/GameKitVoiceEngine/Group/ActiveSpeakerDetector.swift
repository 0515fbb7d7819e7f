import Foundation

/// Who is speaking in a group, frame by frame (sans-I/O: one level per participant per frame in,
/// changes out). docs/PROTOCOL.md §16.7 states the rules.
///
/// A frame is *voiced* when its level is at least ``Configuration/marginDecibels`` above the
/// participant's noise floor (the lowest level of the last 4 s, so a steady noise stops counting
/// within 4 s) and above ``Configuration/thresholdDecibels``. A participant starts
/// *speaking* after ``Configuration/onsetFrames`` voiced frames among the last
/// ``Configuration/onsetWindowFrames`` and stops after ``Configuration/hangoverFrames`` without a
/// voiced frame, so pauses between words do not flicker. The *active speaker* (the dominant one,
/// as conference rooms highlight) is the speaking participant with the highest smoothed level; it
/// changes when it stops speaking and someone else speaks, or when another has been louder by
/// ``Configuration/takeoverDecibels`` for ``Configuration/takeoverFrames``; it stays on the last
/// speaker through silence and becomes nil only when that participant leaves.
public struct ActiveSpeakerDetector<ID: Hashable & Sendable>: Sendable {
    /// Thresholds, in frames of the engine's format (20 ms).
    public struct Configuration: Sendable, Hashable {
        /// The lowest level that can be speech, dBFS.
        public var thresholdDecibels: Float = -50
        /// How far above the noise floor a voiced frame is, dB.
        public var marginDecibels: Float = 9
        /// Voiced frames among the last `onsetWindowFrames` that start speaking.
        public var onsetFrames = 3
        public var onsetWindowFrames = 5
        /// Frames without a voiced one that end speaking (0.5 s).
        public var hangoverFrames = 25
        /// How much louder (dB, smoothed) and for how long another speaker must be to take over
        /// from an active speaker who is still speaking.
        public var takeoverDecibels: Float = 6
        public var takeoverFrames = 25

        /// The defaults.
        public init() {}
    }

    /// A change.
    public enum Change: Sendable, Hashable {
        /// A participant started (true) or stopped (false) speaking.
        case speaking(ID, Bool)
        /// The dominant speaker changed (nil: the last one left).
        case activeSpeaker(ID?)
    }

    private struct Track: Sendable {
        /// The lowest level of each of the last blocks of ``blockFrames`` frames, oldest first:
        /// the noise floor is their minimum (minimum statistics: speech pauses within seconds,
        /// noise does not). Unseen history reads ``initialFloorDecibels``.
        var blockMinima: [Float] = Array(repeating: ActiveSpeakerDetector.initialFloorDecibels, count: ActiveSpeakerDetector.floorBlocks)
        var framesInBlock = 0
        var floor: Float { blockMinima.min()! }
        /// Voiced flags of the last frames, newest last.
        var recent: [Bool] = []
        var framesSinceVoiced = Int.max
        var speaking = false
        /// The level smoothed over about 300 ms, dBFS.
        var smoothed: Float = LevelMeter.floor
    }

    /// The noise floor is the lowest level of the last 4 s (20 blocks of 200 ms), taken as
    /// −70 dBFS (a quiet room) before 4 s have been seen.
    static var floorBlocks: Int { 20 }
    static var blockFrames: Int { 10 }
    static var initialFloorDecibels: Float { -70 }

    public let configuration: Configuration
    private var tracks: [ID: Track] = [:]
    /// The dominant speaker.
    public private(set) var activeSpeaker: ID?
    private var challenger: (id: ID, frames: Int)?

    /// A detector with these thresholds.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Whether `id` is speaking now.
    public func isSpeaking(_ id: ID) -> Bool { tracks[id]?.speaking ?? false }

    /// Everyone speaking now.
    public var speakers: Set<ID> { Set(tracks.filter { $0.value.speaking }.map(\.key)) }

    /// Forgets a participant (it left); the changes that follow (it stops speaking, and the
    /// active speaker moves on) are returned.
    public mutating func remove(_ id: ID) -> [Change] {
        guard let track = tracks.removeValue(forKey: id) else { return [] }
        var changes: [Change] = []
        if track.speaking { changes.append(.speaking(id, false)) }
        if challenger?.id == id { challenger = nil }
        if activeSpeaker == id {
            activeSpeaker = loudestSpeaker()
            changes.append(.activeSpeaker(activeSpeaker))
        }
        return changes
    }

    /// Takes one frame's level (dBFS) for each participant and returns what changed, in a fixed
    /// order: speaking changes first, then the active speaker.
    public mutating func update(levels: [(ID, Float)]) -> [Change] {
        var changes: [Change] = []
        for (id, rawLevel) in levels {
            let level = rawLevel.isFinite ? max(LevelMeter.floor, rawLevel) : LevelMeter.floor
            var track = tracks[id] ?? Track()
            let voiced = level >= configuration.thresholdDecibels && level >= track.floor + configuration.marginDecibels
            track.blockMinima[track.blockMinima.count - 1] = min(track.blockMinima.last!, level)
            track.framesInBlock += 1
            if track.framesInBlock == Self.blockFrames {
                track.framesInBlock = 0
                track.blockMinima.removeFirst()
                track.blockMinima.append(level)
            }
            track.recent.append(voiced)
            if track.recent.count > configuration.onsetWindowFrames { track.recent.removeFirst() }
            track.framesSinceVoiced = voiced ? 0 : (track.framesSinceVoiced == .max ? .max : track.framesSinceVoiced + 1)
            // About 300 ms at 20 ms a frame.
            track.smoothed += (level - track.smoothed) * 0.064
            if !track.speaking, track.recent.filter({ $0 }).count >= configuration.onsetFrames {
                track.speaking = true
                changes.append(.speaking(id, true))
            } else if track.speaking, track.framesSinceVoiced >= configuration.hangoverFrames {
                track.speaking = false
                changes.append(.speaking(id, false))
            }
            tracks[id] = track
        }
        if let next = nextActiveSpeaker(), next != activeSpeaker {
            activeSpeaker = next
            challenger = nil
            changes.append(.activeSpeaker(next))
        }
        return changes
    }

    private func loudestSpeaker() -> ID? {
        tracks.filter { $0.value.speaking }.max { $0.value.smoothed < $1.value.smoothed }?.key
    }

    private mutating func nextActiveSpeaker() -> ID? {
        guard let loudest = loudestSpeaker() else { return nil }
        guard let current = activeSpeaker, let track = tracks[current], track.speaking else { return loudest }
        guard loudest != current, tracks[loudest]!.smoothed >= track.smoothed + configuration.takeoverDecibels else {
            challenger = nil
            return nil
        }
        let frames = challenger?.id == loudest ? challenger!.frames + 1 : 1
        challenger = (loudest, frames)
        return frames >= configuration.takeoverFrames ? loudest : nil
    }
}
