import GameKitDiscovery

/// One discovery endpoint per process and interface choice, shared by every session in the
/// process (as one Bonjour daemon serves every application of a host). The last session to
/// release it shuts it down.
///
/// A session counts as a user from the moment it asks, not from the moment the endpoint is up:
/// when several sessions wait for the same endpoint to start and the first to get it releases it
/// at once (a session closed as soon as it was made available), the endpoint must stay up for
/// the others. Counting users only as each waiter resumed once let that release shut the
/// endpoint down under the waiters still to resume, which then kept a dead endpoint: every
/// session made afterwards in the process saw nobody and was seen by nobody.
actor SharedDiscovery {
    static let shared = SharedDiscovery()

    typealias Starter = @Sendable (DiscoveryConfiguration) async throws -> DiscoveryEndpoint

    private enum Slot {
        case starting(Task<DiscoveryEndpoint, any Error>, users: Int)
        case running(DiscoveryEndpoint, users: Int)
    }

    private var slots: [[String]?: Slot] = [:]
    private let start: Starter

    /// `start` makes an endpoint (tests give one they control).
    init(start: @escaping Starter = { try await DiscoveryEndpoint.start(configuration: $0) }) {
        self.start = start
    }

    /// The endpoint for these interfaces (nil: the environment's or every usable one), started
    /// on first use.
    func acquire(interfaces: [String]?) async throws -> DiscoveryEndpoint {
        let task: Task<DiscoveryEndpoint, any Error>
        switch self.slots[interfaces] {
        case .running(let endpoint, let users)?:
            self.slots[interfaces] = .running(endpoint, users: users + 1)
            return endpoint
        case .starting(let pending, let users)?:
            self.slots[interfaces] = .starting(pending, users: users + 1)
            task = pending
        case nil:
            var configuration = DiscoveryConfiguration()
            if let interfaces { configuration.interfaceNames = interfaces }
            let start = self.start
            task = Task { try await start(configuration) }
            self.slots[interfaces] = .starting(task, users: 1)
        }
        do {
            let endpoint = try await task.value
            // The first waiter to resume records the endpoint as running, with every user.
            if case .starting(let pending, let users)? = self.slots[interfaces], pending == task {
                self.slots[interfaces] = .running(endpoint, users: users)
            }
            return endpoint
        } catch {
            // Every waiter hears the failure; the next acquire tries again.
            if case .starting(let pending, _)? = self.slots[interfaces], pending == task {
                self.slots[interfaces] = nil
            }
            throw error
        }
    }

    /// Gives an endpoint back; the last user's release shuts it down.
    func release(interfaces: [String]?) async {
        guard case .running(let endpoint, let users)? = self.slots[interfaces] else { return }
        if users > 1 {
            self.slots[interfaces] = .running(endpoint, users: users - 1)
            return
        }
        self.slots[interfaces] = nil
        await endpoint.shutdown()
    }

    /// How many sessions use (or wait for) the endpoint for these interfaces.
    func users(of interfaces: [String]?) -> Int {
        switch self.slots[interfaces] {
        case .running(_, let users)?, .starting(_, let users)?: users
        case nil: 0
        }
    }
}
