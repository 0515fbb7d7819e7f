import Foundation

/// Holds the echo down while an adaptive echo canceller has not converged yet (at the start of a
/// call, before its filter has learnt the room).
///
/// An adaptive filter needs seconds of far-end speech to converge; until then most of the echo
/// passes through it. This suppressor watches, frame by frame, the far end (the loudspeaker),
/// the microphone and the canceller's output, and attenuates the output by
/// ``attenuationDecibels`` in frames where the far end talks and the near end does not — until
/// the canceller itself has removed ``convergedDecibels`` of echo over ``convergedFrames``
/// frames of far-end-only talk. From then on it passes everything, for good.
///
/// "The near end talks" is Geigel's test: the microphone's peak exceeds ``geigelRatio`` times
/// the loudest far-end peak of the last ``windowFrames`` frames (the echo path's length), which
/// an echo alone never does when the path loses at least that much. Sans-I/O and deterministic.
public struct StartupEchoSuppressor: Sendable {
    /// Attenuation of echo-only frames until convergence.
    public var attenuationDecibels = 30.0
    /// Echo the canceller must remove on its own, measured over far-end-only frames.
    public var convergedDecibels = 20.0
    /// How many far-end-only frames in a row must show it.
    public var convergedFrames = 25
    /// The far-end peaks the near end's peak is compared with, in frames.
    public var windowFrames = 14
    /// Geigel's threshold: the echo path's largest gain assumed. 1: the echo is never louder
    /// than the loudspeaker's signal (0.8 took the benchmark room's reverberant echo, direct
    /// gain 0.5, for the near end in a third of the frames).
    public var geigelRatio = 1.0
    /// Far-end peaks below this (about −50 dBFS) are silence.
    public var farActivityThreshold: Int16 = 100

    /// Whether the canceller has converged (the suppressor passes everything).
    public private(set) var converged = false
    /// Frames attenuated so far.
    public private(set) var attenuatedFrames = 0

    private var farPeaks: [Int16] = []
    private var micEnergy = 0.0
    private var outputEnergy = 0.0
    private var convergedRun = 0
    private var gain = 1.0

    public init() {}

    /// Takes one frame: what the loudspeaker played, what the microphone heard, what the canceller
    /// made of it; returns the output to send.
    public mutating func process(near: [Int16], far: [Int16], output: [Int16]) -> [Int16] {
        guard !converged else { return output }
        farPeaks.append(Self.peak(far))
        if farPeaks.count > windowFrames { farPeaks.removeFirst(farPeaks.count - windowFrames) }
        let farPeak = farPeaks.max() ?? 0
        let farActive = farPeak >= farActivityThreshold
        let nearTalks = Double(Self.peak(near)) > geigelRatio * Double(farPeak)
        var target = 1.0
        if farActive && !nearTalks {
            target = pow(10, -attenuationDecibels / 20)
            // The canceller's own progress, over echo-only frames.
            micEnergy = 0.9 * micEnergy + 0.1 * Self.energy(near)
            outputEnergy = 0.9 * outputEnergy + 0.1 * Self.energy(output)
            let removed = 10 * log10(max(micEnergy, 1) / max(outputEnergy, 1))
            convergedRun = removed >= convergedDecibels ? convergedRun + 1 : 0
            if convergedRun >= convergedFrames {
                converged = true
                target = 1
            }
        }
        if target < 1 { attenuatedFrames += 1 }
        // A ramp across the frame from the last gain to the new one: no clicks.
        var result = output
        let start = gain
        let count = Double(max(1, output.count))
        for index in result.indices {
            let g = start + (target - start) * Double(index + 1) / count
            result[index] = Int16(max(-32768, min(32767, (Double(output[index]) * g).rounded())))
        }
        gain = target
        return result
    }

    private static func peak(_ frame: [Int16]) -> Int16 {
        frame.reduce(Int16(0)) { max($0, $1 == .min ? .max : abs($1)) }
    }

    private static func energy(_ frame: [Int16]) -> Double {
        frame.reduce(0) { $0 + Double($1) * Double($1) } / Double(max(1, frame.count))
    }
}
