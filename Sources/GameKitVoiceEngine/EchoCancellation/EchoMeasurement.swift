import Foundation

/// Measures an echo canceller on a synthetic room: far-end speech goes through an echo path (a
/// delay, then a decaying tail of reflections) into the microphone, together with a quiet noise
/// floor and, for a stretch in the middle, near-end speech (double talk).
///
/// The timeline, from the start of the far-end signal: 0–12 s far end only; 12–17 s double
/// talk; then far end only again, for 18 s in all. (`doubleTalkAt` moves the double talk, for
/// instance to 1 s, while the canceller is still converging, or to 60 s, long after; the ERLE
/// figures then include the near end, and the far end repeats to last a second past the double
/// talk. ``EchoPath/none`` is a headset's: no echo at all.) Figures:
/// - ERLE (echo return loss enhancement): 10·log10(echo energy ÷ output energy) over the first
///   3 s (how fast the canceller converges) and over 8–12 s (steady state).
/// - Double-talk attenuation: the near-end speech's level going in minus the output's level
///   over the double-talk stretch, in dB (how much of the local talker the canceller eats;
///   lower is better). The output over that stretch is returned for a PESQ against the clean
///   near-end speech.
public struct EchoMeasurement {
    /// The synthetic echo path.
    public struct EchoPath: Sendable {
        /// Delay of the direct echo (device buffers, air), in ms.
        public var delayMilliseconds = 60
        /// Gain of the direct echo.
        public var directGain = 0.5
        /// Time for the reflections to decay by 60 dB, in ms.
        public var reverbMilliseconds = 180
        /// Number of reflections in the tail.
        public var reflections = 160
        /// Seed of the reflections' times and signs.
        public var seed: UInt64 = 7
        /// The benchmark's room.
        public init() {}

        /// No echo path: a headset, or WAV files (the microphone hears only the near end and the noise floor).
        public static var none: EchoPath {
            var path = EchoPath()
            path.directGain = 0
            path.reflections = 0
            return path
        }
    }

    /// The figures.
    public struct Result: Sendable {
        public var erleFirst3sDecibels: Double
        public var erleSteadyDecibels: Double
        public var doubleTalkAttenuationDecibels: Double
        /// The canceller's output over the double-talk stretch.
        public var doubleTalkOutput: [Int16]
        /// The clean near-end speech over the same stretch.
        public var doubleTalkReference: [Int16]
        /// Seconds of CPU per second of audio, for the canceller alone.
        public var cpuSecondsPerSecond: Double
    }

    /// When the double talk starts by default, in seconds; it lasts 5 s.
    public static let doubleTalkSecond = 12
    static let doubleTalkSeconds = 5

    /// The echo path's impulse response as (delay in samples, gain) taps.
    public static func taps(of path: EchoPath) -> [(Int, Double)] {
        var random = SplitMix(seed: path.seed)
        let rate = Double(VoiceFormat.sampleRate)
        let delay = path.delayMilliseconds * VoiceFormat.sampleRate / 1000
        var taps = [(delay, path.directGain)]
        let decay = Double(path.reverbMilliseconds) / 1000 * rate
        for _ in 0..<path.reflections {
            let offset = 1 + Int(random.unit() * decay)
            // −60 dB at `decay` samples: amplitude 10^(−3·t/decay).
            let gain = path.directGain * 0.4 * pow(10, -3 * Double(offset) / decay) * (random.unit() < 0.5 ? -1 : 1)
            taps.append((delay + offset, gain))
        }
        return taps
    }

    /// What the microphone hears of `far` through `path` (no noise), sample by sample.
    public static func echo(of far: [Int16], path: EchoPath) -> [Double] {
        var echo = [Double](repeating: 0, count: far.count)
        for (delay, gain) in taps(of: path) where delay < far.count && gain != 0 {
            for index in delay..<far.count { echo[index] += gain * Double(far[index - delay]) }
        }
        return echo
    }

    /// Runs `canceller` on `far` (repeated as needed) with `near` (at least 5 s) talking from
    /// `doubleTalkAt` s (0–600).
    public static func run(
        canceller: EchoCanceller, far farSpeech: [Int16], near: [Int16], path: EchoPath = EchoPath(), doubleTalkAt: Int = doubleTalkSecond
    ) throws(VoiceEngineError) -> Result {
        guard !farSpeech.isEmpty else { throw .invalidConfiguration("no far-end speech") }
        guard (0...600).contains(doubleTalkAt) else { throw .invalidConfiguration("double talk at \(doubleTalkAt) s") }
        let count = max(18, doubleTalkAt + doubleTalkSeconds + 1) * VoiceFormat.sampleRate
        var far = farSpeech
        while far.count < count { far += farSpeech }
        far.removeLast(far.count - count)
        let doubleTalkStart = doubleTalkAt * VoiceFormat.sampleRate
        let doubleTalkEnd = doubleTalkStart + doubleTalkSeconds * VoiceFormat.sampleRate
        guard near.count >= doubleTalkEnd - doubleTalkStart else { throw .invalidConfiguration("near end shorter than 5 s") }
        // The echo, and the microphone: echo + noise floor (−66 dBFS) + near end in double talk.
        let echo = Self.echo(of: far, path: path)
        var random = SplitMix(seed: path.seed &+ 1)
        var microphone = [Int16](repeating: 0, count: count)
        var nearClean = [Int16](repeating: 0, count: count)
        for index in 0..<count {
            var value = echo[index] + (random.unit() - 0.5) * 32768 * 0.0017
            if index >= doubleTalkStart, index < doubleTalkEnd {
                let sample = near[index - doubleTalkStart]
                nearClean[index] = sample
                value += Double(sample)
            }
            microphone[index] = Int16(max(-32768, min(32767, value.rounded())))
        }
        // The canceller, a frame at a time.
        let step = canceller.frameSize
        var output = [Int16](repeating: 0, count: count)
        let cpuStart = processCPUSeconds()
        var start = 0
        while start + step <= count {
            let cleaned = try canceller.process(near: Array(microphone[start..<start + step]), far: Array(far[start..<start + step]))
            output.replaceSubrange(start..<start + step, with: cleaned)
            start += step
        }
        let cpu = processCPUSeconds() - cpuStart
        let rate = VoiceFormat.sampleRate
        func energy(_ signal: [Double], _ range: Range<Int>) -> Double { range.reduce(0) { $0 + signal[$1] * signal[$1] } }
        func energy(_ signal: [Int16], _ range: Range<Int>) -> Double {
            range.reduce(0) { $0 + Double(signal[$1]) * Double(signal[$1]) }
        }
        func decibels(_ ratio: Double) -> Double { 10 * log10(max(ratio, 1e-12)) }
        let first = 0..<(3 * rate)
        let steady = (8 * rate)..<(12 * rate)
        let doubleTalk = doubleTalkStart..<doubleTalkEnd
        return Result(
            erleFirst3sDecibels: decibels(energy(echo, first) / max(1, energy(output, first))),
            erleSteadyDecibels: decibels(energy(echo, steady) / max(1, energy(output, steady))),
            doubleTalkAttenuationDecibels: decibels(energy(nearClean, doubleTalk) / max(1, energy(output, doubleTalk))),
            doubleTalkOutput: Array(output[doubleTalk]),
            doubleTalkReference: Array(nearClean[doubleTalk]),
            cpuSecondsPerSecond: cpu / (Double(count) / Double(rate)))
    }
}

/// CPU time used by this process so far, in seconds (user + system).
public func processCPUSeconds() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// A small seeded generator (SplitMix64) for reproducible synthetic signals.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
