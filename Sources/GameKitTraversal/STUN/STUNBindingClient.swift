@_spi(Machine) import GameKitMachine
import NIOCore

/// Learns this socket's server-reflexive address from one STUN server (RFC 8489 binding
/// request, no credentials). Sans-I/O: the owner sends what `poll` returns to `server` and hands
/// every STUN message from `server` to `receive`.
package struct STUNBindingClient: Sendable {
    package enum State: Equatable, Sendable {
        case querying
        /// The address the server saw the request come from.
        case mapped(TraversalAddress)
        case failed
    }

    package let server: TraversalAddress
    package private(set) var state = State.querying
    private var transaction: STUNTransaction
    private var due: [UInt8]?

    /// A client whose request goes out at once (and is resent as RFC 8489 says, 5 sends).
    package init(server: TraversalAddress, now: NIODeadline, random: inout MachineRandom) {
        self.init(server: server, timing: .init(), now: now, random: &random)
    }

    init(server: TraversalAddress, timing: STUNTransaction.Timing, now: NIODeadline, random: inout MachineRandom) {
        self.server = server
        let request = STUNMessage(.binding, .request, transactionID: STUNMessage.randomTransactionID(using: &random),
                                  attributes: [.text(.software, TraversalSoftware.name)])
        self.transaction = STUNTransaction(message: request, bytes: request.encoded(fingerprint: true), timing: timing, now: now)
    }

    /// Runs the request's retransmission timer (what is due is taken with ``pollTransmit()``).
    package mutating func handleTimeout(now: NIODeadline) {
        guard self.state == .querying else { return }
        switch self.transaction.poll(now: now) {
        case .wait: break
        case .send(let bytes): self.due = bytes
        case .expired: self.state = .failed
        }
    }

    /// The request to send to the server, when one is due.
    package mutating func pollTransmit() -> [UInt8]? {
        defer { self.due = nil }
        return self.due
    }

    package var nextDeadline: NIODeadline? { self.state == .querying ? self.transaction.deadline : nil }

    /// Takes a datagram from `source`; false if it is not this client's response.
    package mutating func receive(_ datagram: ByteBuffer, from source: SocketAddress) -> Bool {
        guard TraversalAddress(source) == self.server, let decoded = try? STUNMessage.decode(Array(datagram.readableBytesView)) else { return false }
        return self.receive(decoded.message)
    }

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
