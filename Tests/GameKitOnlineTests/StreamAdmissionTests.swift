import NIOCore
import Testing

@testable import GameKitOnline

/// The rendezvous's ledger of TCP streams (PROTOCOL §18.12): per-source and total limits,
/// making room by closing a stream that never spoke, and the two silences that end a stream.
@Suite("TCP stream admission")
struct StreamAdmissionTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func address(_ ip: String, _ port: Int = 5000) -> SocketAddress { try! SocketAddress(ipAddress: ip, port: port) }

    static func limits(total: Int = 100, perSource: Int = 3) -> StreamLimits {
        var limits = StreamLimits()
        limits.total = total
        limits.perSource = perSource
        return limits
    }

    static func id(_ admission: StreamAdmission.Admission) -> UInt64? {
        if case .accepted(let id, _) = admission { id } else { nil }
    }

    @Test func oneSourceGetsItsShareAndNoMoreWhateverItsPorts() {
        var ledger = StreamAdmission(limits: Self.limits(perSource: 3))
        let ids = (0..<3).compactMap { Self.id(ledger.admit(Self.address("198.51.100.7", 4000 + $0), now: Self.start)) }
        #expect(ids.count == 3)
        #expect(ledger.admit(Self.address("198.51.100.7", 4100), now: Self.start) == .refusedPerSource)
        // Written as an IPv4-mapped IPv6 address, it is the same source.
        #expect(ledger.admit(Self.address("::ffff:198.51.100.7"), now: Self.start) == .refusedPerSource)
        // Another source is not held back.
        #expect(Self.id(ledger.admit(Self.address("198.51.100.8"), now: Self.start)) != nil)
        // A closed stream gives its share back.
        ledger.closed(ids[0])
        #expect(Self.id(ledger.admit(Self.address("198.51.100.7", 4200), now: Self.start)) != nil)
        #expect(ledger.statistics.refusedPerSource == 2)
        #expect(ledger.statistics.open == 4)
    }

    @Test func anIPv6SourceIsItsSlash64() {
        var ledger = StreamAdmission(limits: Self.limits(perSource: 2))
        #expect(Self.id(ledger.admit(Self.address("2001:db8:1:2::1"), now: Self.start)) != nil)
        #expect(Self.id(ledger.admit(Self.address("2001:db8:1:2:ffff::9"), now: Self.start)) != nil)
        #expect(ledger.admit(Self.address("2001:db8:1:2:1234:5678:9abc:def0"), now: Self.start) == .refusedPerSource)
        #expect(Self.id(ledger.admit(Self.address("2001:db8:1:3::1"), now: Self.start)) != nil)
    }

    @Test func whenFullTheStreamSilentLongestMakesRoomAndOneThatSpokeNever() throws {
        var ledger = StreamAdmission(limits: Self.limits(total: 3, perSource: 10))
        let first = try #require(Self.id(ledger.admit(Self.address("192.0.2.1"), now: Self.start)))
        let second = try #require(Self.id(ledger.admit(Self.address("192.0.2.2"), now: Self.start)))
        let third = try #require(Self.id(ledger.admit(Self.address("192.0.2.3"), now: Self.start)))
        ledger.framed(first, now: Self.start)
        // Full: the oldest silent one (second) goes for the newcomer.
        let newcomer = ledger.admit(Self.address("192.0.2.4"), now: Self.start)
        guard case .accepted(let fourth, let evicting) = newcomer else {
            Issue.record("refused: \(newcomer)")
            return
        }
        #expect(evicting == second)
        ledger.framed(third, now: Self.start)
        ledger.framed(fourth, now: Self.start)
        // Everyone spoke: nobody makes room.
        #expect(ledger.admit(Self.address("192.0.2.5"), now: Self.start) == .refusedTotal)
        #expect(ledger.statistics.evicted == 1 && ledger.statistics.refusedTotal == 1 && ledger.statistics.open == 3)
        #expect(ledger.statistics.peakOpen == 3)
        // The evicted one's close comes later, and changes nothing.
        ledger.closed(second)
        #expect(ledger.statistics.open == 3)
    }

    @Test func aStreamThatNeverSpeaksOrFallsSilentIsClosed() throws {
        var ledger = StreamAdmission(limits: Self.limits())
        let mute = try #require(Self.id(ledger.admit(Self.address("192.0.2.1"), now: Self.start)))
        let member = try #require(Self.id(ledger.admit(Self.address("192.0.2.2"), now: Self.start)))
        ledger.framed(member, now: Self.start + .seconds(1))
        #expect(ledger.expire(now: Self.start + .milliseconds(4999)).isEmpty)
        #expect(ledger.expire(now: Self.start + .seconds(5)) == [mute])
        // A member that keeps speaking stays.
        ledger.framed(member, now: Self.start + .seconds(30))
        #expect(ledger.expire(now: Self.start + .seconds(59)).isEmpty)
        #expect(ledger.expire(now: Self.start + .seconds(60)) == [member])
        #expect(ledger.statistics.silentAtStart == 1 && ledger.statistics.idle == 1 && ledger.statistics.open == 0)
        // Frames and closes of forgotten streams are ignored.
        ledger.framed(mute, now: Self.start + .seconds(61))
        ledger.closed(member)
        #expect(ledger.statistics.open == 0)
        #expect(ledger.expire(now: Self.start + .seconds(120)).isEmpty)
    }

    @Test func theTotalFitsTheProcesssFileDescriptors() {
        #expect(StreamLimits().fitted(toDescriptors: 1024).total == 1024 - StreamLimits.reservedDescriptors)
        #expect(StreamLimits().fitted(toDescriptors: 1_048_576).total == StreamLimits().total)
        #expect(StreamLimits().fitted(toDescriptors: 100).total == 0)
        var none = StreamAdmission(limits: StreamLimits().fitted(toDescriptors: 100))
        #expect(none.admit(Self.address("192.0.2.1"), now: Self.start) == .refusedTotal)
    }
}
