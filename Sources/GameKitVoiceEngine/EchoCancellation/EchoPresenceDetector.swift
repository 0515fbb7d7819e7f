import Foundation

/// Tells whether the microphone hears the loudspeaker at all: a headset, WAV files or a far end
/// that is muted at the speaker have no echo path, and nothing should be suppressed as echo there.
///
/// An echo is the far-end signal through a linear path (a delay, then reflections), so the
/// microphone correlates with the far end at the echo's delay; a near-end talker, however loud and
/// however the two take turns, does not. The detector keeps, for every delay up to the echo path's
/// length, the cross-correlation of the microphone with the far end, both decimated to 4 kHz (a
/// 4-sample mean: speech's energy is below 2 kHz), each frame's sum added to the last ones decayed
/// with a time constant of ``timeConstantSeconds``, and normalises its largest magnitude by the two
/// signals' energies over the same time: the normalised cross-correlation, 0 to 1.
///
/// On the benchmark's signals (its room: a 0.5 gain, 60 ms delay and a 180 ms tail, whatever the
/// gain) it was above 0.4 from the first second with the far end alone, and 0.27-0.40 after the
/// first seconds while a near talker as loud as the far end talked over the echo; with no echo path
/// it was 0.02-0.15, near talker or not.
/// ``noEcho`` becomes true once the far end has talked for ``activeFramesNeeded`` frames and the
/// correlation has stayed under ``threshold`` for the last ``quietFramesNeeded`` frames; ``echo``
/// once it has stayed at ``echoThreshold`` or above for as many frames. Either verdict is final,
/// and the detector stops computing (880 delays a frame need not run all call long). Sans-I/O
/// and deterministic.
public struct EchoPresenceDetector: Sendable {
    /// Largest correlation that still counts as no echo.
    public var threshold = 0.2
    /// Smallest correlation that counts as an echo for sure (the room's echo alone gives 0.4 and
    /// more from its first second).
    public var echoThreshold = 0.4
    /// Far-end frames (above ``farActivityDecibels``) before any verdict.
    public var activeFramesNeeded = 25
    /// Frames in a row under ``threshold`` (or at ``echoThreshold`` and above) for a verdict.
    public var quietFramesNeeded = 25
    /// Far-end frames quieter than this (dBFS of their mean power) are silence.
    public var farActivityDecibels = -50.0
    /// How long the correlations remember, in seconds.
    public var timeConstantSeconds = 1.5

    /// Whether the microphone has been found to hear no echo (for good).
    public private(set) var noEcho = false
    /// Whether the microphone has been found to hear an echo (for good).
    public private(set) var echo = false
    /// The latest normalised cross-correlation (its largest magnitude over the delays).
    public private(set) var correlation = 0.0
    /// Far-end frames that carried sound so far.
    public private(set) var activeFrames = 0

    /// Input samples per decimated sample.
    static let decimation = 4
    private let frameMilliseconds: Int
    private let lags: Int
    /// Decimated far-end history: the last `lags - 1` samples before the current frame, then the frame.
    private var farHistory: [Double]
    private var crossSums: [Double]
    private var micEnergy = 0.0
    private var farEnergy = 0.0
    private var quietRun = 0
    private var echoRun = 0

    /// A detector for frames of `frameSamples` samples (at 16 kHz) and echo paths up to
    /// `tailMilliseconds` long.
    public init(frameSamples: Int, tailMilliseconds: Int) {
        frameMilliseconds = frameSamples * 1000 / VoiceFormat.sampleRate
        let rate = VoiceFormat.sampleRate / Self.decimation
        // The tail plus one frame: an echo's direct path can come up to a frame late.
        lags = max(1, (tailMilliseconds + frameMilliseconds) * rate / 1000)
        farHistory = [Double](repeating: 0, count: lags - 1)
        crossSums = [Double](repeating: 0, count: lags)
    }

    /// Takes one frame of what the microphone heard and what the loudspeaker played at the same
    /// moment. Returns ``noEcho``.
    @discardableResult
    public mutating func process(near: [Int16], far: [Int16]) -> Bool {
        guard !noEcho && !echo else { return noEcho }
        let mic = Self.decimate(near)
        let farFrame = Self.decimate(far)
        let count = min(mic.count, farFrame.count)
        farHistory.append(contentsOf: farFrame.prefix(count))
        let decay = exp(-Double(frameMilliseconds) / 1000 / timeConstantSeconds)
        // crossSums[d] += Σ mic[i] · far[i − d], the frame's i against the far end d samples earlier.
        let base = farHistory.count - count
        farHistory.withUnsafeBufferPointer { history in
            mic.withUnsafeBufferPointer { micSamples in
                crossSums.withUnsafeMutableBufferPointer { sums in
                    for lag in 0..<lags {
                        var sum = 0.0
                        let start = base - lag
                        for index in 0..<count { sum += micSamples[index] * history[start + index] }
                        sums[lag] = decay * sums[lag] + sum
                    }
                }
            }
        }
        farHistory.removeFirst(farHistory.count - (lags - 1))
        var micFrameEnergy = 0.0
        var farFrameEnergy = 0.0
        for index in 0..<count {
            micFrameEnergy += mic[index] * mic[index]
            farFrameEnergy += farFrame[index] * farFrame[index]
        }
        micEnergy = decay * micEnergy + micFrameEnergy
        farEnergy = decay * farEnergy + farFrameEnergy
        let peak = crossSums.reduce(0) { max($0, abs($1)) }
        correlation = micEnergy > 0 && farEnergy > 0 ? min(1, peak / (micEnergy * farEnergy).squareRoot()) : 0
        let farPower = farFrameEnergy / Double(max(1, count)) / (32768 * 32768)
        if 10 * log10(max(farPower, 1e-12)) > farActivityDecibels { activeFrames += 1 }
        quietRun = correlation < threshold ? quietRun + 1 : 0
        echoRun = correlation >= echoThreshold ? echoRun + 1 : 0
        if activeFrames >= activeFramesNeeded && quietRun >= quietFramesNeeded { noEcho = true }
        if activeFrames >= activeFramesNeeded && echoRun >= quietFramesNeeded { echo = true }
        return noEcho
    }

    /// The frame at 4 kHz: each 4 samples' mean.
    static func decimate(_ frame: [Int16]) -> [Double] {
        let count = frame.count / decimation
        var result = [Double](repeating: 0, count: count)
        for index in 0..<count {
            var sum = 0.0
            for offset in 0..<decimation { sum += Double(frame[index * decimation + offset]) }
            result[index] = sum / Double(decimation)
        }
        return result
    }
}
