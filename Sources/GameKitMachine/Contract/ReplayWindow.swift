/// Remembers which packet numbers of one direction have been accepted, so that a replayed or
/// duplicated datagram is dropped even though it authenticates (RFC 6479's sliding bitmap).
///
/// The check (`isFresh`) runs before decryption to drop obvious replays cheaply; the update
/// (`record`) runs only after the packet authenticated, so forged packets cannot move the window.
package struct ReplayWindow: Sendable {
    private static let wordCount = 32
    /// Packets more than this far behind the highest accepted one are rejected as too old.
    package static let size = UInt64((wordCount - 1) * 64)

    private var words = [UInt64](repeating: 0, count: ReplayWindow.wordCount)

    package init() {}
    package private(set) var highest: UInt64?

    /// Whether `packetNumber` has not been accepted yet and is not too old to tell.
    package func isFresh(_ packetNumber: UInt64) -> Bool {
        guard let highest else { return true }
        if packetNumber > highest { return true }
        if highest - packetNumber >= Self.size { return false }
        let (word, bit) = Self.position(packetNumber)
        return self.words[word] & bit == 0
    }

    /// Marks `packetNumber` as accepted. Call only after the packet authenticated.
    package mutating func record(_ packetNumber: UInt64) {
        if let highest {
            if packetNumber > highest {
                let currentWord = highest / 64
                let newWord = packetNumber / 64
                let toClear = min(newWord - currentWord, UInt64(Self.wordCount))
                if toClear > 0 {
                    for step in 1...toClear {
                        self.words[Int((currentWord + step) % UInt64(Self.wordCount))] = 0
                    }
                }
                self.highest = packetNumber
            }
        } else {
            self.highest = packetNumber
        }
        let (word, bit) = Self.position(packetNumber)
        self.words[word] |= bit
    }

    private static func position(_ packetNumber: UInt64) -> (Int, UInt64) {
        (Int((packetNumber / 64) % UInt64(wordCount)), 1 << (packetNumber % 64))
    }
}
