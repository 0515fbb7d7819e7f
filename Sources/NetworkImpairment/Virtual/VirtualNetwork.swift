@_spi(Machine) import GameKitMachine
import NIOCore

/// Datagram machines exchanging datagrams through seeded impairment models (loss, delay,
/// jitter, reordering, duplication, corruption), on a virtual clock that jumps to the next
/// deadline or delivery whenever nothing is left to do at the current instant.
///
/// The one virtual network of the package's tests: any ``DatagramMachine`` runs on it, through
/// a ``VirtualHost`` that says how its addresses work (unicast for the transport's endpoints and
/// real-time connections; multicast groups per interface for mDNS). Every run repeats exactly for
/// the same seeds, since the machines take seeded random sources too.
package struct VirtualNetwork<Host: VirtualHost> {
    package typealias Machine = Host.Machine
    package typealias Datagram = VirtualDatagram<Machine.Source, Machine.Destination>

    package var now: NIODeadline
    package var hosts: [Host] = []
    /// One impairment model per sending host.
    package var paths: [ImpairmentModel<Datagram>] = []
    /// Datagrams the test injects, delivered at the next instant as if sent by their source.
    package var injected: [Datagram] = []
    /// Sees every datagram as it is delivered, to capture, rewrite, or drop it (false).
    package var interceptor: ((inout Datagram) -> Bool)?
    /// The routers between the hosts (``VirtualNATs``, ``route(through:)``): rewrite a delivered datagram's addresses
    /// as they would, or drop it (false). Applied before the ``interceptor``.
    package var router: ((inout Datagram, NIODeadline) -> Bool)?
    /// When a datagram from each source last reached a host (past the interceptor).
    package var lastDelivered: [Machine.Source: NIODeadline] = [:]
    /// Bottlenecks on hosts' outgoing paths, by host: datagrams leave one after another at the
    /// bottleneck's rate, before the path's impairments, and a full queue drops them.
    package var bottlenecks: [Int: VirtualBottleneck] = [:]
    /// Told when a machine's deadline stays due after its timeout ran and everything settled:
    /// a real event loop would fire its timer again and again (a busy loop). Tests record it as
    /// a failure.
    package var onSpin: (String) -> Void = { preconditionFailure($0) }
    /// How many times in a row a machine's timeout may run at one instant before its deadline
    /// must have moved on. One for the transport; mDNS may need more (an answer received while
    /// the network settles can make a probe due at once), as the old discovery link allowed.
    package var timeoutPassesPerInstant = 1
    /// Hosts held up until an instant (a stopped or starved process): their timers do not run,
    /// they send nothing, and datagrams to them wait as in a socket's receive buffer.
    package private(set) var pausedUntil: [Int: NIODeadline] = [:]
    /// Datagrams that reached a paused host, in arrival order.
    private var held: [Int: [Datagram]] = [:]
    /// Whether a resumed host runs its due timers before the datagrams that waited for it: the
    /// worst order a starved event loop can take (true), or reads first (false).
    package var timersFirstOnResume = true

    package init(start: NIODeadline = .uptimeNanoseconds(1_000_000_000)) {
        self.now = start
    }

    /// Adds a host whose outgoing path has `profile`'s impairments (seeded from `seed` and the
    /// host's index); returns its index.
    @discardableResult
    package mutating func add(_ host: Host, profile: ImpairmentProfile = .perfect, seed: UInt64 = 1) -> Int {
        let index = self.hosts.count
        self.hosts.append(host)
        self.paths.append(ImpairmentModel(profile: profile, seed: seed &+ UInt64(index) &* 7919))
        return index
    }

    // MARK: - Running

    /// Runs until `done` holds, nothing is left to happen, or `limit` of virtual time passes;
    /// the clock ends at the last event run (or at the limit when more was due later). Returns
    /// whether `done` held.
    @discardableResult
    package mutating func run(for limit: TimeAmount, until done: (Self) -> Bool = { _ in false }) -> Bool {
        let end = self.now + limit
        var iterations = 0
        while iterations < 5_000_000 {
            iterations += 1
            self.settle()
            if done(self) { return true }
            guard let next = self.nextEventTime(), next <= end else {
                if self.nextEventTime() != nil { self.now = end }
                return done(self)
            }
            if next > self.now { self.now = next }
            self.resumeDueHosts()
            var serviced: [Int] = []
            for index in self.hosts.indices where self.pausedUntil[index] == nil {
                if let deadline = self.hosts[index].machine.nextDeadline, deadline <= self.now {
                    self.hosts[index].machine.handleTimeout(now: self.now)
                    serviced.append(index)
                }
            }
            self.settle()
            for index in serviced {
                var passes = 1
                while let deadline = self.hosts[index].machine.nextDeadline, deadline <= self.now {
                    guard passes < self.timeoutPassesPerInstant else {
                        self.onSpin("host \(index): deadline stays due after handleTimeout at \(self.now.uptimeNanoseconds) ns")
                        return false
                    }
                    passes += 1
                    self.hosts[index].machine.handleTimeout(now: self.now)
                    self.settle()
                }
            }
        }
        preconditionFailure("simulation did not settle")
    }

    /// Runs the clock to exactly `limit` from now, running every deadline and delivery on the way.
    package mutating func advance(by limit: TimeAmount) {
        let end = self.now + limit
        self.run(for: limit)
        self.now = max(self.now, end)
        self.settle()
    }

    /// Holds host `index` up for `duration` from now (see ``pausedUntil``).
    package mutating func pause(_ index: Int, for duration: TimeAmount) {
        self.pausedUntil[index] = self.now + duration
    }

    /// Resumes the hosts whose pause has ended: due timers (first, when
    /// ``timersFirstOnResume``), and the datagrams that waited.
    private mutating func resumeDueHosts() {
        for index in self.pausedUntil.keys.sorted() where self.pausedUntil[index]! <= self.now {
            self.pausedUntil[index] = nil
            let waiting = self.held.removeValue(forKey: index) ?? []
            if self.timersFirstOnResume, let deadline = self.hosts[index].machine.nextDeadline, deadline <= self.now {
                self.hosts[index].machine.handleTimeout(now: self.now)
            }
            for datagram in waiting {
                self.hosts[index].machine.handle(datagram: datagram.bytes, from: datagram.source, now: self.now)
            }
        }
    }

    /// Moves everything that can happen at the current instant.
    package mutating func settle() {
        var progressed = true
        var rounds = 0
        while progressed {
            rounds += 1
            precondition(rounds < 1_000_000, "the network never settles at one instant")
            progressed = false
            for index in self.hosts.indices where self.pausedUntil[index] == nil {
                progressed = self.hosts[index].act(now: self.now) || progressed
                progressed = self.transmit(index) || progressed
            }
            if !self.injected.isEmpty {
                let injected = self.injected
                self.injected.removeAll()
                for datagram in injected { self.deliver(datagram) }
                progressed = true
            }
            for index in self.paths.indices {
                while let datagram = self.paths[index].popDue(at: self.now) {
                    self.deliver(datagram)
                    progressed = true
                }
            }
            for index in self.hosts.indices where self.pausedUntil[index] == nil {
                progressed = self.collectEvents(index) || progressed
            }
        }
    }

    private mutating func transmit(_ index: Int) -> Bool {
        var any = false
        while true {
            var buffer = ByteBuffer()
            guard let destination = self.hosts[index].machine.pollTransmit(now: self.now, into: &buffer) else { break }
            any = true
            self.hosts[index].didSend(buffer, to: destination, now: self.now)
            let source = self.hosts[index].source(for: destination)
            var departure = self.now
            if self.bottlenecks[index] != nil {
                guard let leaves = self.bottlenecks[index]!.departure(of: buffer.readableBytes, now: self.now) else { continue }
                departure = leaves
            }
            self.paths[index].submit(Datagram(source: source, destination: destination, bytes: buffer), at: departure)
        }
        return any
    }

    private mutating func deliver(_ datagram: Datagram) {
        var datagram = datagram
        if let router = self.router, !router(&datagram, self.now) { return }
        if let interceptor = self.interceptor, !interceptor(&datagram) { return }
        var reached = false
        for index in self.hosts.indices where self.hosts[index].accepts(datagram.destination, from: datagram.source) {
            reached = true
            if self.pausedUntil[index] != nil {
                self.held[index, default: []].append(datagram)
            } else {
                self.hosts[index].machine.handle(datagram: datagram.bytes, from: datagram.source, now: self.now)
            }
        }
        if reached { self.lastDelivered[datagram.source] = self.now }
    }

    private mutating func collectEvents(_ index: Int) -> Bool {
        var any = false
        while let event = self.hosts[index].machine.pollEvent() {
            any = true
            self.hosts[index].record(event, now: self.now)
        }
        return any
    }

    private func nextEventTime() -> NIODeadline? {
        var next: NIODeadline?
        for index in self.hosts.indices {
            next = next.earliest(self.pausedUntil[index] ?? self.hosts[index].machine.nextDeadline)
        }
        for path in self.paths { next = next.earliest(path.nextDeliveryTime) }
        return next
    }
}
