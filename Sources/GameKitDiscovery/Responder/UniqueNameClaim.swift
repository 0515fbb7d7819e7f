import NIOCore

/// The claim on one unique name (a service instance or the host name): probing until the name
/// is known to be ours, then announcing, then defending (RFC 6762 §8 and §9).
///
/// | state | event | next |
/// |---|---|---|
/// | waiting(t) | time ≥ t | probing(0) — first probe sent |
/// | probing(n) | 250 ms pass, n < 3 | probing(n+1) — next probe sent |
/// | probing(3) | 250 ms pass | announcing(1) — first announcement sent |
/// | probing/waiting | conflicting response | waiting(now) under a new name |
/// | probing | simultaneous probe that wins the tie-break | waiting(now + 1 s), same name |
/// | announcing(n) | gap passes, n < count | announcing(n+1); gaps 1 s, 2 s, … |
/// | announcing(count) | gap passes | announced |
/// | announcing/announced | conflicting cache-flush answer | waiting(now): probe again |
struct UniqueNameClaim: Sendable {
    enum State: Sendable, Equatable {
        case waiting(until: NIODeadline)
        case probing(sent: Int, next: NIODeadline)
        case announcing(sent: Int, next: NIODeadline)
        case announced
    }

    /// Probes sent before a name is taken (RFC 6762 §8.1).
    static let probeCount = 3
    static let probeInterval = TimeAmount.milliseconds(250)
    /// Announcements sent (RFC 6762 §8.3 requires at least two), the gaps doubling from 1 s.
    static let announcementCount = 3
    static let firstAnnouncementGap = TimeAmount.seconds(1)
    /// After this many conflicts within `conflictWindow`, probing waits `conflictBackoff`
    /// (RFC 6762 §8.1).
    static let conflictLimit = 15
    static let conflictWindow = TimeAmount.seconds(10)
    static let conflictBackoff = TimeAmount.seconds(5)

    var name: DNSName
    var state: State
    private var recentConflicts: [NIODeadline] = []

    init(name: DNSName, startAt: NIODeadline) {
        self.name = name
        self.state = .waiting(until: startAt)
    }

    /// Whether the name's records may be used in answers.
    var isEstablished: Bool {
        switch self.state {
        case .announcing, .announced: true
        case .waiting, .probing: false
        }
    }

    var isProbing: Bool { !self.isEstablished }

    var deadline: NIODeadline? {
        switch self.state {
        case .waiting(let until): until
        case .probing(_, let next), .announcing(_, let next): next
        case .announced: nil
        }
    }

    /// What the claim has to send when its deadline passes.
    enum Step: Equatable { case none, probe(first: Bool), announce }

    /// Advances to `now`; returns what to send.
    mutating func handleTimeout(now: NIODeadline) -> Step {
        switch self.state {
        case .waiting(let until) where until <= now:
            self.state = .probing(sent: 1, next: now + Self.probeInterval)
            return .probe(first: true)
        case .probing(let sent, let next) where next <= now:
            if sent < Self.probeCount {
                self.state = .probing(sent: sent + 1, next: now + Self.probeInterval)
                return .probe(first: false)
            }
            self.state = .announcing(sent: 1, next: now + Self.firstAnnouncementGap)
            return .announce
        case .announcing(let sent, let next) where next <= now:
            if sent < Self.announcementCount {
                self.state = .announcing(sent: sent + 1, next: now + Self.firstAnnouncementGap * Int64(1 << sent))
                return .announce
            }
            self.state = .announced
            return .none
        default:
            return .none
        }
    }

    /// Another responder owns the name: take `newName` and probe again at once, or after the
    /// back-off when conflicts come too fast.
    mutating func conflict(renamingTo newName: DNSName, now: NIODeadline) {
        self.recentConflicts.removeAll { $0 + Self.conflictWindow <= now }
        self.recentConflicts.append(now)
        self.name = newName
        let wait = self.recentConflicts.count >= Self.conflictLimit ? Self.conflictBackoff : .zero
        self.state = .waiting(until: now + wait)
    }

    /// Lost a simultaneous-probe tie-break: probe the same name again in one second (RFC 6762
    /// §8.2).
    mutating func deferToWinner(now: NIODeadline) {
        self.state = .waiting(until: now + .seconds(1))
    }

    /// A conflicting answer for an established name: probe again to find out (RFC 6762 §9).
    mutating func reprobe(now: NIODeadline) {
        self.state = .waiting(until: now)
    }

    /// Announce again from the start (TXT change, new interface, new addresses).
    mutating func reannounce(now: NIODeadline) {
        guard self.isEstablished else { return }
        self.state = .announcing(sent: 0, next: now)
    }
}
