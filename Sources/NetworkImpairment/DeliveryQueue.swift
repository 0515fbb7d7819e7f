import NIOCore

/// The datagrams an ``ImpairmentModel`` holds, ordered by delivery time.
///
/// Jitter and reordering mean datagrams leave in a different order than they arrived, and a
/// relay under load may hold thousands at once, so a sorted array (O(n) inserts) will not do.
/// This is a binary min-heap keyed by (delivery time, sequence number): the sequence number,
/// assigned at insertion, makes ties leave in submission order and keeps the whole order
/// deterministic.
struct DeliveryQueue<Element> {
    // MARK: - Storage

    struct Entry {
        var deadline: NIODeadline
        var sequence: UInt64
        var element: Element

        /// Whether `self` leaves before `other`.
        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            if self.deadline != other.deadline { return self.deadline < other.deadline }
            return self.sequence < other.sequence
        }
    }

    private var heap: [Entry] = []
    private var nextSequence: UInt64 = 0

    // MARK: - Queries

    var count: Int { self.heap.count }

    var isEmpty: Bool { self.heap.isEmpty }

    /// The delivery time of the first entry, if any.
    var earliestDeadline: NIODeadline? { self.heap.first?.deadline }

    // MARK: - Mutation

    /// Adds an element to leave at `deadline`, after every element already queued for the
    /// same deadline.
    mutating func insert(_ element: Element, deadline: NIODeadline) {
        self.heap.append(Entry(deadline: deadline, sequence: self.nextSequence, element: element))
        self.nextSequence &+= 1
        self.siftUp(from: self.heap.count - 1)
    }

    /// Removes and returns the first element if its deadline is not after `now`.
    mutating func popFirst(notAfter now: NIODeadline) -> Element? {
        guard let first = self.heap.first, first.deadline <= now else { return nil }
        let last = self.heap.removeLast()
        if !self.heap.isEmpty {
            self.heap[0] = last
            self.siftDown(from: 0)
        }
        return first.element
    }

    // MARK: - Heap maintenance

    private mutating func siftUp(from start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.heap[child].precedes(self.heap[parent]) else { return }
            self.heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        let count = self.heap.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            let right = left + 1
            var first = left
            if right < count, self.heap[right].precedes(self.heap[left]) { first = right }
            guard self.heap[first].precedes(self.heap[parent]) else { return }
            self.heap.swapAt(first, parent)
            parent = first
        }
    }
}

extension DeliveryQueue: Sendable where Element: Sendable {}
extension DeliveryQueue.Entry: Sendable where Element: Sendable {}
