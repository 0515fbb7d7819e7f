@_spi(Machine) import GameKitMachine
import NIOCore

/// Learns this socket's server-reflexive address from one STUN server (RFC 8489 binding
/// request, no credentials). Sans-I/O: the owner sends what `poll` returns to `server` and hands
/// every STUN message from `server` to `receive`.
struct STUNBindingClient: Sendable {
    enum State: Equatable, Sendable {
        case querying
        /// The address the server saw the request come from.
        case mapped(TraversalAddress)
        case failed
    }

    let server: TraversalAddress
    private(set) var state = State.querying
    private var transaction: STUNTransaction
    private var due: [UInt8]?

    init(server: TraversalAddress, timing: STUNTransaction.Timing = .init(), now: NIODeadline, random: inout MachineRandom) {
        self.server = server
        let request = STUNMessage(.binding, .request, transactionID: STUNMessage.randomTransactionID(using: &random),
                                  attributes: [.text(.software, TraversalSoftware.name)])
        self.transaction = STUNTransaction(message: request, bytes: request.encoded(fingerprint: true), timing: timing, now: now)
    }

    /// Runs the request's retransmission timer (what is due is taken with ``pollTransmit()``).
    mutating func handleTimeout(now: NIODeadline) {
        guard self.state == .querying else { return }
        switch self.transaction.poll(now: now) {
        case .wait: break
        case .send(let bytes): self.due = bytes
        case .expired: self.state = .failed
        }
    }

    /// The request to send to the server, when one is due.
    mutating func pollTransmit() -> [UInt8]? {
        defer { self.due = nil }
        return self.due
    }

    var nextDeadline: NIODeadline? { self.state == .querying ? self.transaction.deadline : nil }

    /// Takes a response; false if it is not this client's.
    mutating func receive(_ message: STUNMessage) -> Bool {
        guard self.state == .querying, message.method == .binding,
            message.transactionID == self.transaction.transactionID
        else { return false }
        if message.messageClass == .success, let mapped = message.xorAddress(.xorMappedAddress) {
            self.state = .mapped(mapped)
        } else {
            self.state = .failed
        }
        return true
    }
}

/// What traversal messages say in SOFTWARE.
enum TraversalSoftware {
    static let name = "OpenGameKit"
}
