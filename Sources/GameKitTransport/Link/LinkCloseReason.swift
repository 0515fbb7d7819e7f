/// Why a link closed.
public enum LinkCloseReason: Sendable, Equatable, CustomStringConvertible {
    /// This side closed it (after delivering what was queued) with an application code.
    case closedLocally(code: UInt16)
    /// The peer closed it with an application code.
    case closedByPeer(code: UInt16)
    /// Nothing was heard from the peer for the disconnect timeout.
    case timedOut
    /// The initiator cancelled after this side had accepted.
    case cancelledByPeer
    /// The initiator never confirmed the accepted handshake.
    case handshakeNotConfirmed
    /// The peer broke the protocol; the link was torn down.
    case protocolViolation(String)
    /// The endpoint was shut down.
    case endpointClosed

    /// A short English explanation.
    public var description: String {
        switch self {
        case .closedLocally(let code): "closed locally (code \(code))"
        case .closedByPeer(let code): "closed by peer (code \(code))"
        case .timedOut: "timed out"
        case .cancelledByPeer: "cancelled by peer"
        case .handshakeNotConfirmed: "handshake not confirmed"
        case .protocolViolation(let detail): "protocol violation: \(detail)"
        case .endpointClosed: "endpoint closed"
        }
    }
}

/// How a message travels.
public enum SendMode: Sendable, Equatable, Hashable {
    /// Retransmitted until acknowledged; delivered exactly once, in order.
    case reliable
    /// Sent once; may be lost or arrive out of order; delivered whole or not at all.
    case unreliable
}

/// What a link reports to its endpoint.
enum LinkEvent {
    case message(ByteBuffer, SendMode)
    /// The responder heard from the initiator after accepting: the link is usable both ways.
    case confirmed
    case closed(LinkCloseReason)
    /// Bytes left the send buffer (acknowledged, or handed to packets if unreliable).
    case released(Int)
    /// The link now sends to another of the peer's addresses (PROTOCOL §6.7).
    case moved(from: SocketAddress, to: SocketAddress)
}

import NIOCore
