import NIOCore

/// Every link's next deadline in an indexed binary min-heap, so that the endpoint's next
/// deadline is read without walking its links, and a timeout visits only the links that are due.
///
/// Ordered by deadline, then by link index (a seeded run visits due links in the same order).
/// The endpoint marks a link whenever it has acted on it (``markChanged(_:)``: no work per
/// packet beyond a flag), and the marked links are filed again, each once, when the deadline is
/// next read (``refresh(_:)``, O(log n) each); a debug build checks on every read that nothing
/// was missed. A class, so that the endpoint's `nextDeadline` getter can refresh it.
final class LinkTimerQueue {
    private var heap: [UInt32] = []
    /// Links changed since the last refresh (each once).
    private var changed: [UInt32] = []
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

    /// Notes that link `index` may have a new deadline. The caller marks each link once until
    /// the next ``refresh(_:)`` (the endpoint keeps a flag in the link's slot).
    func markChanged(_ index: UInt32) {
        self.changed.append(index)
    }

    /// Files every link marked since the last refresh under the deadline `deadline` gives for
    /// it (nil: gone, or no timer).
    func refresh(_ deadline: (UInt32) -> NIODeadline?) {
        guard !self.changed.isEmpty else { return }
        for position in self.changed.indices {
            let index = self.changed[position]
            self.update(index, to: deadline(index))
        }
        self.changed.removeAll(keepingCapacity: true)
    }

    /// Files link `index` under `deadline` (nil: no timer).
    func update(_ index: UInt32, to deadline: NIODeadline?) {
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
    func remove(_ index: UInt32) {
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
    func popDue(now: NIODeadline) -> UInt32? {
        guard let first = self.heap.first, self.deadlines[first]! <= now else { return nil }
        self.remove(first)
        return first
    }

    // MARK: - Heap

    private func precedes(_ a: UInt32, _ b: UInt32) -> Bool {
        let (da, db) = (self.deadlines[a]!, self.deadlines[b]!)
        return da < db || (da == db && a < b)
    }

    private func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.precedes(self.heap[child], self.heap[parent]) else { return }
            self.swapAt(child, parent)
            child = parent
        }
    }

    private func siftDown(_ start: Int) {
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

    private func swapAt(_ i: Int, _ j: Int) {
        self.heap.swapAt(i, j)
        self.positions[self.heap[i]] = i
        self.positions[self.heap[j]] = j
    }
}
