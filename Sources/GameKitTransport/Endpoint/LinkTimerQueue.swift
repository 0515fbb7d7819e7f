import NIOCore

/// Every link's next deadline in an indexed binary min-heap, so that the endpoint's next
/// deadline is read without walking its links, and a timeout visits only the links that are due.
///
/// Ordered by deadline, then by link index (a seeded run visits due links in the same order).
/// The endpoint files a link again whenever it has acted on it (``update(_:to:)``, O(log n)); a
/// debug build checks on every ``earliest`` read that nothing was missed.
struct LinkTimerQueue {
    private var heap: [UInt32] = []
    private var deadlines: [UInt32: NIODeadline] = [:]
    private var positions: [UInt32: Int] = [:]

    /// The earliest deadline of any link, or nil.
    var earliest: NIODeadline? {
        self.heap.first.map { self.deadlines[$0]! }
    }

    /// The deadline link `index` is filed under.
    func deadline(of index: UInt32) -> NIODeadline? {
        self.deadlines[index]
    }

    var count: Int { self.heap.count }

    /// Files link `index` under `deadline` (nil: no timer).
    mutating func update(_ index: UInt32, to deadline: NIODeadline?) {
        guard let deadline else {
            self.remove(index)
            return
        }
        if let position = self.positions[index] {
            let old = self.deadlines[index]!
            guard old != deadline else { return }
            self.deadlines[index] = deadline
            if deadline < old { self.siftUp(position) } else { self.siftDown(position) }
        } else {
            self.deadlines[index] = deadline
            self.heap.append(index)
            self.positions[index] = self.heap.count - 1
            self.siftUp(self.heap.count - 1)
        }
    }

    /// Removes link `index` (closed, or no timer).
    mutating func remove(_ index: UInt32) {
        guard let position = self.positions.removeValue(forKey: index) else { return }
        self.deadlines[index] = nil
        let last = self.heap.removeLast()
        guard position < self.heap.count else { return }
        self.heap[position] = last
        self.positions[last] = position
        self.siftDown(position)
        self.siftUp(position)
    }

    /// The link due soonest if its deadline is at or before `now`, removed from the queue (the
    /// caller handles it and files it again).
    mutating func popDue(now: NIODeadline) -> UInt32? {
        guard let first = self.heap.first, self.deadlines[first]! <= now else { return nil }
        self.remove(first)
        return first
    }

    // MARK: - Heap

    private func precedes(_ a: UInt32, _ b: UInt32) -> Bool {
        let (da, db) = (self.deadlines[a]!, self.deadlines[b]!)
        return da < db || (da == db && a < b)
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.precedes(self.heap[child], self.heap[parent]) else { return }
            self.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < self.heap.count else { return }
            var smallest = left
            if left + 1 < self.heap.count, self.precedes(self.heap[left + 1], self.heap[left]) { smallest = left + 1 }
            guard self.precedes(self.heap[smallest], self.heap[parent]) else { return }
            self.swapAt(smallest, parent)
            parent = smallest
        }
    }

    private mutating func swapAt(_ i: Int, _ j: Int) {
        self.heap.swapAt(i, j)
        self.positions[self.heap[i]] = i
        self.positions[self.heap[j]] = j
    }
}
