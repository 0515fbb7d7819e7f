import Foundation
import GameKitTransport
import NIOCore

/// One JSON object per line on standard output, for scripts and tests.
enum Output {
    private static let lock = NSLock()

    static func line(_ object: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        self.text(String(decoding: data, as: UTF8.self))
    }

    /// Writes a line unbuffered, so that a reader sees it at once.
    static func text(_ text: String) {
        lock.lock()
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
        lock.unlock()
    }

    static func describe(_ error: TransportError) -> String {
        switch error {
        case .bufferFull: "bufferFull"
        case .dataTooBig: "dataTooBig"
        case .linkNotOpen: "linkNotOpen"
        case .authenticationFailed: "authenticationFailed"
        case .denied(let code): "denied(\(code))"
        case .timedOut: "timedOut"
        case .cancelled: "cancelled"
        case .unsupportedVersion: "unsupportedVersion"
        case .unknownConnectionRequest: "unknownConnectionRequest"
        case .payloadTooLarge: "payloadTooLarge"
        case .endpointClosed: "endpointClosed"
        case .invalidConfiguration: "invalidConfiguration"
        }
    }

    static func describe(_ reason: LinkCloseReason) -> String {
        switch reason {
        case .closedLocally(let code): "closedLocally(\(code))"
        case .closedByPeer(let code): "closedByPeer(\(code))"
        case .timedOut: "timedOut"
        case .cancelledByPeer: "cancelledByPeer"
        case .handshakeNotConfirmed: "handshakeNotConfirmed"
        case .protocolViolation: "protocolViolation"
        case .endpointClosed: "endpointClosed"
        }
    }

    static func statistics(_ stats: LinkStatistics) -> [String: Any] {
        [
            "cipher": "\(stats.dataCipher)",
            "srtt_us": stats.smoothedRTT.map { Double($0.nanoseconds) / 1000 } ?? NSNull(),
            "rttvar_us": Double(stats.rttVariation.nanoseconds) / 1000,
            "cwnd": stats.congestionWindow,
            "packets_sent": stats.packetsSent,
            "packets_received": stats.packetsReceived,
            "packets_lost": stats.packetsLost,
            "loss_rate": stats.lossRate,
            "retransmitted_bytes": stats.retransmittedBytes,
            "rto_expirations": stats.retransmissionTimeouts,
            "duplicates_dropped": stats.duplicatePacketsDropped,
            "reliable_sent": stats.reliableMessagesSent,
            "reliable_received": stats.reliableMessagesReceived,
            "unreliable_sent": stats.unreliableMessagesSent,
            "unreliable_received": stats.unreliableMessagesReceived,
            "bytes_queued": stats.bytesQueued,
        ]
    }

    static func statistics(_ stats: EndpointStatistics) -> [String: Any] {
        [
            "datagrams_received": stats.datagramsReceived,
            "datagrams_sent": stats.datagramsSent,
            "dropped_malformed": stats.droppedMalformed,
            "dropped_unknown_link": stats.droppedUnknownLink,
            "dropped_unauthenticated": stats.droppedUnauthenticated,
            "dropped_replayed": stats.droppedReplayed,
            "dropped_stray_handshake": stats.droppedStrayHandshake,
            "dropped_overload": stats.droppedOverload,
            "handshake_authentication_failures": stats.handshakeAuthenticationFailures,
            "cookie_replies_sent": stats.cookieRepliesSent,
            "challenges_sent": stats.challengesSent,
            "challenges_expired": stats.challengesExpired,
            "challenges_cancelled": stats.challengesCancelled,
            "guesses_limited": stats.guessesLimited,
            "connection_requests": stats.connectionRequestsReceived,
            "pending_challenges": stats.pendingChallenges,
            "pending_requests": stats.pendingRequests,
            "unconfirmed_links": stats.unconfirmedLinks,
            "links_opened": stats.linksOpened,
            "links_closed": stats.linksClosed,
            "links": stats.links,
        ]
    }
}
