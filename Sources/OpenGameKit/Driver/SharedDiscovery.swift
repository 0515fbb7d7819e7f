import GameKitDiscovery

/// One discovery endpoint per process and interface choice, shared by every session in the
/// process (as one Bonjour daemon serves every application of a host). The last session to
/// release it shuts it down.
actor SharedDiscovery {
    static let shared = SharedDiscovery()

    private struct Entry {
        var endpoint: DiscoveryEndpoint
        var users: Int
    }

    private var entries: [[String]?: Entry] = [:]
    private var starting: [[String]?: Task<DiscoveryEndpoint, any Error>] = [:]

    /// The endpoint for these interfaces (nil: the environment's or every usable one), started
    /// on first use.
    func acquire(interfaces: [String]?) async throws -> DiscoveryEndpoint {
        if var entry = self.entries[interfaces] {
            entry.users += 1
            self.entries[interfaces] = entry
            return entry.endpoint
        }
        let task: Task<DiscoveryEndpoint, any Error>
        if let pending = self.starting[interfaces] {
            task = pending
        } else {
            var configuration = DiscoveryConfiguration()
            if let interfaces { configuration.interfaceNames = interfaces }
            task = Task { try await DiscoveryEndpoint.start(configuration: configuration) }
            self.starting[interfaces] = task
        }
        let endpoint: DiscoveryEndpoint
        do {
            endpoint = try await task.value
        } catch {
            self.starting[interfaces] = nil
            throw error
        }
        self.starting[interfaces] = nil
        self.entries[interfaces, default: Entry(endpoint: endpoint, users: 0)].users += 1
        return self.entries[interfaces]!.endpoint
    }

    /// Gives an endpoint back; the last user's release shuts it down.
    func release(interfaces: [String]?) async {
        guard var entry = self.entries[interfaces] else { return }
        entry.users -= 1
        if entry.users > 0 {
            self.entries[interfaces] = entry
            return
        }
        self.entries[interfaces] = nil
        await entry.endpoint.shutdown()
    }
}
