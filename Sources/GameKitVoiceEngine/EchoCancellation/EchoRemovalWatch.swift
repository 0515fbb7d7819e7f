import Foundation

/// How much echo a canceller removes, watched over frames where only the far end talks (the
/// caller says which): the microphone's energy against the canceller's output, each smoothed
/// (a tenth of each new frame), and how many such frames in a row the difference has reached a
/// level. The start-up suppressor lets go on it (the canceller converged); the canceller's bypass
/// ends on it (an echo appeared). Sans-I/O.
public struct EchoRemovalWatch: Sendable {
    private var microphoneEnergy = 0.0
    private var outputEnergy = 0.0
    /// Frames in a row at the level asked for.
    public private(set) var run = 0

    public init() {}

    /// The echo removed so far, in dB (smoothed).
    public var removedDecibels: Double {
        10 * log10(max(microphoneEnergy, 1) / max(outputEnergy, 1))
    }

    /// Takes a frame where only the far end talks; true once `decibels` or more have been
    /// removed for `frames` frames in a row.
    public mutating func removes(_ decibels: Double, for frames: Int, near: [Int16], output: [Int16]) -> Bool {
        microphoneEnergy = 0.9 * microphoneEnergy + 0.1 * Self.energy(near)
        outputEnergy = 0.9 * outputEnergy + 0.1 * Self.energy(output)
        run = removedDecibels >= decibels ? run + 1 : 0
        return run >= frames
    }

    static func energy(_ frame: [Int16]) -> Double {
        frame.reduce(0) { $0 + Double($1) * Double($1) } / Double(max(1, frame.count))
    }
}
