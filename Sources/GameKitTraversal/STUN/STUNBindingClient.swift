import GameKitMachine
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

    init(server: TraversalAddress, timing: STUNTransaction.Timing = .init(), now: NIODeadline, random: inout MachineRandom) {
        self.server = server
        let request = STUNMessage(.binding, .request, transactionID: STUNMessage.randomTransactionID(using: &random),
                                  attributes: [.text(.software, TraversalSoftware.name)])
        self.transaction = STUNTransaction(message: request, bytes: request.encoded(fingerprint: true), timing: timing, now: now)
    }

    /// Bytes to send to the server now, if any.
    mutating func poll(now: NIODeadline) -> [UInt8]? {
        guard self.state == .querying else { return nil }
        switch self.transaction.poll(now: now) {
        case .wait: return nil
        case .send(let bytes): return bytes
        case .expired:
            self.state = .failed
            return nil
        }
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
