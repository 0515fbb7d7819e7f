import NIOCore

/// Groups consecutive datagrams to one destination into UDP segmentation offload (GSO) sends.
///
/// The endpoint appends datagrams into one buffer per flush; this type records where each one
/// lies, and merges runs that the kernel can split for us: same destination, equal sizes except a
/// shorter last one, at most 64 segments and 64 KB. Slices are taken only once all datagrams are
/// written, because writing to a buffer while a slice of it is alive would copy it.
package struct DatagramBatcher {
    package static let maximumSegments = 64
    package static let maximumBatchBytes = 65_000

    private struct Span {
        var address: SocketAddress
        var start: Int
        var length: Int
        var segmentSize: Int
        var segments: Int
        /// False once a shorter segment ended the run.
        var accepting: Bool
    }

    package let segmentationOffload: Bool
    private var spans: [Span] = []

    package init(segmentationOffload: Bool) {
        self.segmentationOffload = segmentationOffload
    }

    /// Records a datagram of `length` bytes written at `start` for `address`.
    package mutating func add(address: SocketAddress, start: Int, length: Int) {
        if self.segmentationOffload, var last = self.spans.last, last.accepting, last.address == address,
            last.segments < Self.maximumSegments, length <= last.segmentSize,
            last.length + length <= Self.maximumBatchBytes, last.start + last.length == start
        {
            last.length += length
            last.segments += 1
            last.accepting = length == last.segmentSize
            self.spans[self.spans.count - 1] = last
            return
        }
        self.spans.append(Span(address: address, start: start, length: length, segmentSize: length, segments: 1, accepting: true))
    }

    /// The envelopes to write, slicing `buffer`; resets the batcher.
    package mutating func takeEnvelopes(from buffer: ByteBuffer) -> [AddressedEnvelope<ByteBuffer>] {
        defer { self.spans.removeAll(keepingCapacity: true) }
        return self.spans.map { span in
            let data = buffer.getSlice(at: span.start, length: span.length)!
            guard span.segments > 1 else {
                return AddressedEnvelope(remoteAddress: span.address, data: data)
            }
            return AddressedEnvelope(
                remoteAddress: span.address,
                data: data,
                metadata: .init(ecnState: .transportNotCapable, packetInfo: nil, segmentSize: span.segmentSize)
            )
        }
    }
}
