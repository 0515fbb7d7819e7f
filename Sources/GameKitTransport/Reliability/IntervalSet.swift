/// A set of `UInt64` values stored as sorted, disjoint, non-adjacent half-open ranges.
///
/// The transport tracks several such sets: packet numbers received (to build acknowledgements),
/// stream bytes acknowledged and stream bytes to retransmit. They are nearly always a handful of
/// ranges that grow at the top, so a sorted array with a fast path for the last range beats any
/// tree here.
struct IntervalSet: Equatable, Sendable {
    private(set) var ranges: [Range<UInt64>] = []

    init() {}

    init(_ ranges: [Range<UInt64>]) {
        for range in ranges { self.insert(range) }
    }

    var isEmpty: Bool { self.ranges.isEmpty }
    var count: Int { self.ranges.count }
    var first: Range<UInt64>? { self.ranges.first }
    var last: Range<UInt64>? { self.ranges.last }

    /// The number of values in the set.
    var totalLength: UInt64 { self.ranges.reduce(0) { $0 + UInt64($1.count) } }

    func contains(_ value: UInt64) -> Bool {
        guard let index = self.indexOfFirstRange(endingAfter: value) else { return false }
        return self.ranges[index].lowerBound <= value
    }

    /// Whether every value of `range` is in the set.
    func contains(_ range: Range<UInt64>) -> Bool {
        if range.isEmpty { return true }
        guard let index = self.indexOfFirstRange(endingAfter: range.lowerBound) else { return false }
        let candidate = self.ranges[index]
        return candidate.lowerBound <= range.lowerBound && candidate.upperBound >= range.upperBound
    }

    // MARK: - Mutation

    mutating func insert(_ value: UInt64) {
        self.insert(value..<(value + 1))
    }

    mutating func insert(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        // Fast path: extends or follows the last range.
        if let last = self.ranges.last, range.lowerBound >= last.lowerBound {
            if range.lowerBound <= last.upperBound {
                if range.upperBound > last.upperBound {
                    self.ranges[self.ranges.count - 1] = last.lowerBound..<range.upperBound
                }
                return
            }
            self.ranges.append(range)
            return
        }
        if self.ranges.isEmpty {
            self.ranges.append(range)
            return
        }
        // General case: find every range that touches `range` and merge them.
        let start = self.lowerBoundIndex(touching: range.lowerBound)
        var lower = range.lowerBound
        var upper = range.upperBound
        var end = start
        while end < self.ranges.count, self.ranges[end].lowerBound <= upper {
            lower = min(lower, self.ranges[end].lowerBound)
            upper = max(upper, self.ranges[end].upperBound)
            end += 1
        }
        if start == end {
            self.ranges.insert(lower..<upper, at: start)
        } else {
            self.ranges.replaceSubrange(start..<end, with: CollectionOfOne(lower..<upper))
        }
    }

    mutating func remove(_ range: Range<UInt64>) {
        guard !range.isEmpty, !self.ranges.isEmpty else { return }
        var result: [Range<UInt64>] = []
        var changed = false
        for existing in self.ranges {
            if existing.upperBound <= range.lowerBound || existing.lowerBound >= range.upperBound {
                result.append(existing)
                continue
            }
            changed = true
            if existing.lowerBound < range.lowerBound {
                result.append(existing.lowerBound..<range.lowerBound)
            }
            if existing.upperBound > range.upperBound {
                result.append(range.upperBound..<existing.upperBound)
            }
        }
        if changed { self.ranges = result }
    }

    /// Removes every value below `bound`.
    mutating func removeAll(below bound: UInt64) {
        var dropCount = 0
        for index in self.ranges.indices {
            let range = self.ranges[index]
            if range.upperBound <= bound {
                dropCount += 1
            } else {
                if range.lowerBound < bound {
                    self.ranges[index] = bound..<range.upperBound
                }
                break
            }
        }
        if dropCount > 0 { self.ranges.removeFirst(dropCount) }
    }

    /// Removes the lowest ranges until at most `maximumCount` remain.
    mutating func keepHighest(_ maximumCount: Int) {
        if self.ranges.count > maximumCount {
            self.ranges.removeFirst(self.ranges.count - maximumCount)
        }
    }

    /// Removes and returns the lowest range, cut to at most `maximumLength` values.
    mutating func popFirst(maximumLength: UInt64) -> Range<UInt64>? {
        guard let first = self.ranges.first, maximumLength > 0 else { return nil }
        if UInt64(first.count) <= maximumLength {
            self.ranges.removeFirst()
            return first
        }
        let cut = first.lowerBound..<(first.lowerBound + maximumLength)
        self.ranges[0] = cut.upperBound..<first.upperBound
        return cut
    }

    /// The parts of `range` that are not in the set, in ascending order.
    func gaps(in range: Range<UInt64>) -> [Range<UInt64>] {
        var result: [Range<UInt64>] = []
        var cursor = range.lowerBound
        var index = self.indexOfFirstRange(endingAfter: range.lowerBound) ?? self.ranges.count
        while cursor < range.upperBound {
            guard index < self.ranges.count, self.ranges[index].lowerBound < range.upperBound else {
                result.append(cursor..<range.upperBound)
                break
            }
            let covered = self.ranges[index]
            if covered.lowerBound > cursor {
                result.append(cursor..<covered.lowerBound)
            }
            cursor = max(cursor, covered.upperBound)
            index += 1
        }
        return result
    }

    // MARK: - Search

    /// The index of the first range whose upper bound is greater than `value`.
    private func indexOfFirstRange(endingAfter value: UInt64) -> Int? {
        var low = 0
        var high = self.ranges.count
        while low < high {
            let mid = (low + high) / 2
            if self.ranges[mid].upperBound <= value { low = mid + 1 } else { high = mid }
        }
        return low < self.ranges.count ? low : nil
    }

    /// The index of the first range that ends at or after `value` (so touches or follows it).
    private func lowerBoundIndex(touching value: UInt64) -> Int {
        var low = 0
        var high = self.ranges.count
        while low < high {
            let mid = (low + high) / 2
            if self.ranges[mid].upperBound < value { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
