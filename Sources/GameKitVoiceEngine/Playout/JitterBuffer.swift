/// The adaptive jitter buffer: packets in, one playout decision per frame out (sans-I/O, the
/// caller gives the time). docs/PROTOCOL.md §16.3 states the rules.
///
/// Frames are indexed by timestamp ÷ samples per frame, unwrapped to 64 bits. The buffer starts
/// playing once it holds its target delay; from then on each `next(at:)` plays the next index:
/// the packet itself, else a copy of it that a later packet carried (redundancy against bursts),
/// else the FEC copy in the packet after it, else concealment. When nothing
/// newer than the missing frame is there at all, the network is late rather than lossy, and the
/// index does not advance (the delay grows by a frame). Packets older than the playout point are
/// late and dropped; a jump of more than `resyncFrames` restarts the stream.
public struct JitterBuffer {
    /// Settings.
    public struct Configuration: Sendable, Hashable {
        /// The frame format.
        public var format: VoiceFormat = .standard
        /// The target delay before any arrival has been measured, in ms.
        public var initialDelayMilliseconds = 40
        /// The lowest and highest target delay, in ms.
        public var minimumDelayMilliseconds = 20
        public var maximumDelayMilliseconds = 400
        /// Packets held at most; beyond it the oldest goes.
        public var capacityFrames = 150
        /// A packet this many frames away from the playout point restarts the stream.
        public var resyncFrames = 250
        /// When on (the default), the target keeps one frame more than the jitter needs, so that
        /// the packet after a lost one is there to recover it from (FEC): 20 ms of latency for
        /// a lost frame decoded from its FEC copy instead of concealed. The baseline of the
        /// benchmark turns this and adaptation off.
        public var holdForFEC = true
        /// When off, the target stays at `initialDelayMilliseconds` (a fixed buffer).
        public var adaptive = true

        /// The defaults.
        public init() {}
    }

    /// What became of an inserted packet.
    public enum Insertion: Equatable, Sendable {
        case accepted
        case duplicate
        /// Older than the frame being played: dropped.
        case late
        /// So far from the playout point that the stream restarted at this packet.
        case resynchronised
    }

    /// What to play for the next frame.
    public enum Playout: Equatable, Sendable {
        /// Not started yet (or restarting): play silence.
        case waiting
        /// Decode this packet.
        case packet([UInt8])
        /// The frame is lost but a later packet carried a coarser copy of it: decode the copy.
        case copy([UInt8])
        /// The frame is lost but the next packet is here: decode its FEC copy.
        case fec(next: [UInt8])
        /// Nothing to decode: conceal.
        case conceal
    }

    /// Counters.
    public struct Statistics: Sendable, Hashable {
        public var accepted = 0
        public var duplicates = 0
        public var late = 0
        public var resyncs = 0
        public var played = 0
        public var recoveredByFEC = 0
        /// Lost frames played from a copy a later packet carried.
        public var recoveredByCopy = 0
        public var concealed = 0
        public var overflowDrops = 0
    }

    public let configuration: Configuration
    public private(set) var statistics = Statistics()
    private var packets: [Int64: [UInt8]] = [:]
    /// Copies of frames whose own packet is not here, from later packets.
    private var copies: [Int64: [UInt8]] = [:]
    /// Packets since the last with copies: after ``redundancyTimeoutPackets`` without, the
    /// sender has stopped (``copyDepth`` 0).
    private var packetsWithoutCopies = 0
    static let redundancyTimeoutPackets = 100
    private var nextIndex: Int64?
    private var newestIndex: Int64?
    private var lastTimestamp: Int64?
    private var playing = false
    private var arrivals = ArrivalStatistics()
    private var stalledFrames = 0
    /// Frames concealed with nothing newer held before the buffer waits for its target again.
    static let rebufferAfterFrames = 10

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    private var frameMilliseconds: Int { configuration.format.frameMilliseconds }

    /// The delay the buffer aims to hold, in ms.
    public var targetDelayMilliseconds: Int {
        guard configuration.adaptive else { return configuration.initialDelayMilliseconds }
        guard arrivals.measured else { return configuration.initialDelayMilliseconds }
        var target = Int(arrivals.jitterP95) + frameMilliseconds
        // The packet after a loss must be here for its FEC copy; while the sender adds copies of
        // frames further back, the packet that far after a loss must be here too.
        if configuration.holdForFEC { target += max(1, copyDepth) * frameMilliseconds }
        return max(configuration.minimumDelayMilliseconds, min(configuration.maximumDelayMilliseconds, target))
    }

    /// The 95th percentile of recent arrival jitter, in ms.
    public var jitterMilliseconds: Int { Int(arrivals.jitterP95) }

    /// Audio held, in ms: from the frame to be played next to the newest packet.
    public var bufferedMilliseconds: Int {
        guard let nextIndex, let newestIndex, newestIndex >= nextIndex else { return 0 }
        return Int(newestIndex - nextIndex + 1) * frameMilliseconds
    }

    /// Whether playout has started.
    public var isPlaying: Bool { playing }

    /// How many frames back the copies the sender adds reach (0 when it adds none); deeper
    /// copies than the deepest cover a receiver asks for do not deepen the target.
    public private(set) var copyDepth = 0

    /// Inserts a packet that arrived at `arrivalMilliseconds`, with the copies of earlier frames
    /// it carries (`earlier`: frames back, Opus packet).
    public mutating func insert(
        timestamp: UInt32, payload: [UInt8], earlier: [VoicePacket.EarlierFrame] = [], arrivalMilliseconds: Int64
    ) -> Insertion {
        let extended = unwrap(timestamp)
        let samplesPerFrame = Int64(configuration.format.samplesPerFrame)
        let index = extended >= 0 ? extended / samplesPerFrame : (extended - samplesPerFrame + 1) / samplesPerFrame
        let result = insertPrimary(index: index, extended: extended, payload: payload, arrivalMilliseconds: arrivalMilliseconds)
        if result == .accepted || result == .resynchronised || result == .duplicate { insertCopies(earlier, before: index) }
        return result
    }

    private mutating func insertCopies(_ earlier: [VoicePacket.EarlierFrame], before index: Int64) {
        if let deepest = earlier.map(\.distance).max() {
            copyDepth = min(deepest, Int(VoicePacket.maximumBurstCover))
            packetsWithoutCopies = 0
        } else {
            packetsWithoutCopies += 1
            if packetsWithoutCopies >= Self.redundancyTimeoutPackets { copyDepth = 0 }
        }
        for frame in earlier {
            let copyIndex = index - Int64(frame.distance)
            if playing, let next = nextIndex, copyIndex < next { continue }
            guard packets[copyIndex] == nil, copies[copyIndex] == nil else { continue }
            copies[copyIndex] = frame.payload
        }
        while copies.count > configuration.capacityFrames, let oldest = copies.keys.min() { copies[oldest] = nil }
    }

    private mutating func insertPrimary(index: Int64, extended: Int64, payload: [UInt8], arrivalMilliseconds: Int64) -> Insertion {
        var result = Insertion.accepted
        if let next = nextIndex, abs(index - next) > Int64(configuration.resyncFrames) {
            restart()
            lastTimestamp = extended
            statistics.resyncs += 1
            result = .resynchronised
        }
        if nextIndex == nil { nextIndex = index }
        if playing, let next = nextIndex, index < next {
            statistics.late += 1
            return .late
        }
        if packets[index] != nil {
            statistics.duplicates += 1
            return .duplicate
        }
        packets[index] = payload
        copies[index] = nil
        newestIndex = max(newestIndex ?? index, index)
        // Before playout starts, it begins at the oldest packet held.
        if !playing, let next = nextIndex, index < next { nextIndex = index }
        arrivals.record(transit: arrivalMilliseconds - extended * 1000 / Int64(VoiceFormat.sampleRate))
        statistics.accepted += 1
        while packets.count > configuration.capacityFrames, let oldest = packets.keys.min() {
            packets[oldest] = nil
            statistics.overflowDrops += 1
            if let next = nextIndex, oldest >= next { nextIndex = oldest + 1 }
        }
        return result
    }

    /// Decides what to play for the next frame.
    public mutating func next() -> Playout {
        guard let index = nextIndex else { return .waiting }
        if !playing {
            guard bufferedMilliseconds >= targetDelayMilliseconds else { return .waiting }
            playing = true
            // (Re)start at the oldest packet held: a gap before it is not played out.
            if let oldest = packets.keys.min() { nextIndex = oldest }
            return next()
        }
        if let payload = packets.removeValue(forKey: index) {
            copies[index] = nil
            stalledFrames = 0
            nextIndex = index + 1
            statistics.played += 1
            return .packet(payload)
        }
        guard let newest = newestIndex, newest > index else {
            // Nothing newer: the network is late, not lossy. Conceal and wait for this frame.
            statistics.concealed += 1
            stalledFrames += 1
            if stalledFrames >= Self.rebufferAfterFrames {
                // Nothing for a while (the sender paused, or DTX): wait for the target again.
                playing = false
                stalledFrames = 0
            }
            return .conceal
        }
        if stalledFrames > 0, let oldest = packets.keys.min(), oldest > index {
            // The frames concealed while waiting stood in for lost ones: skip as many of the
            // missing frames, so a loss at the head of the buffer is not paid for twice.
            nextIndex = min(oldest, index + Int64(stalledFrames))
            stalledFrames = 0
            return next()
        }
        stalledFrames = 0
        // Something newer is here, so this frame is lost.
        let excess = bufferedMilliseconds - targetDelayMilliseconds
        if excess > configuration.maximumDelayMilliseconds / 2, let oldest = packets.keys.min() {
            // A long gap (the sender paused, or DTX): skip to the oldest packet held rather than
            // conceal through the whole gap.
            nextIndex = oldest
            return next()
        }
        nextIndex = index + 1
        let copy = copies.removeValue(forKey: index)
        if !copies.isEmpty { copies = copies.filter { $0.key > index } }
        if let copy {
            statistics.recoveredByCopy += 1
            return .copy(copy)
        }
        if let following = packets[index + 1] {
            statistics.recoveredByFEC += 1
            return .fec(next: following)
        }
        statistics.concealed += 1
        return .conceal
    }

    /// Drops everything and waits for new packets.
    public mutating func restart() {
        packets.removeAll(keepingCapacity: true)
        copies.removeAll(keepingCapacity: true)
        copyDepth = 0
        packetsWithoutCopies = 0
        nextIndex = nil
        newestIndex = nil
        lastTimestamp = nil
        playing = false
        stalledFrames = 0
        arrivals.reset()
    }

    private mutating func unwrap(_ timestamp: UInt32) -> Int64 {
        guard let last = lastTimestamp else {
            lastTimestamp = Int64(timestamp)
            return Int64(timestamp)
        }
        let delta = Int64(Int32(bitPattern: timestamp &- UInt32(truncatingIfNeeded: last)))
        let extended = last + delta
        if delta > 0 { lastTimestamp = extended }
        return extended
    }
}
