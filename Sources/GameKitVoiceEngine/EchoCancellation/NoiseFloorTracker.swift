import Foundation

/// The level under the speech on a microphone: the lowest frame level of the last few seconds
/// (minimum statistics, kept per block so that the window slides a block at a time), in dBFS
/// (mean square against a full-scale square wave). Speech has pauses; the quietest frames of a
/// few seconds are the room, the fan, the line's hiss. Sans-I/O: levels in, a floor out.
public struct NoiseFloorTracker: Sendable {
    /// Frames per block, and blocks in the window.
    public let blockFrames: Int
    public let blocks: Int
    private var blockMinimum = Double.infinity
    private var framesInBlock = 0
    private var minima: [Double] = []

    /// A window of `blocks` blocks of `blockFrames` frames.
    public init(blockFrames: Int, blocks: Int) {
        precondition(blockFrames > 0 && blocks > 0)
        self.blockFrames = blockFrames
        self.blocks = blocks
    }

    /// The floor: the lowest level of the window's whole blocks and the block being filled; nil
    /// until the first block is whole.
    public var floorDecibels: Double? {
        guard let lowest = self.minima.min() else { return nil }
        return min(lowest, self.blockMinimum)
    }

    /// Takes one frame.
    public mutating func add(_ frame: [Int16]) {
        self.blockMinimum = min(self.blockMinimum, Double(LevelMeter.level(of: frame)))
        self.framesInBlock += 1
        guard self.framesInBlock == self.blockFrames else { return }
        self.minima.append(self.blockMinimum)
        if self.minima.count > self.blocks { self.minima.removeFirst() }
        self.blockMinimum = .infinity
        self.framesInBlock = 0
    }
}
