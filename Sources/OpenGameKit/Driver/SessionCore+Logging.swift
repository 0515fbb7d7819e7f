import Logging

extension SessionCore {
    /// Logs what the application is told: peer states, requests and failed attempts at debug,
    /// the session's own failures at warning. Runs under the lock, before delivery.
    func logLocked(_ notifications: [SessionNotification], _ context: DeliveryContext) {
        func who(_ peer: UInt32) -> String { "\(context.names[peer] ?? self.machine.displayName(of: peer) ?? "?") (\(peer))" }
        for notification in notifications {
            switch notification {
            case .peerChanged(let peer, let state):
                self.logger.debug("peer state", metadata: ["peer": "\(who(peer))", "state": "\(state)"])
            case .connectionRequest(let peer):
                self.logger.debug("connection request", metadata: ["peer": "\(who(peer))"])
            case .connectionFailed(let peer, let code):
                let error = context.failures[peer] ?? GKSessionError(code)
                self.logger.debug("connection failed", metadata: ["peer": "\(who(peer))", "error": "\(error.localizedDescription)"])
            case .authenticationFailed(let peer):
                self.logger.warning("handshake not authenticated", metadata: ["peer": "\(who(peer))", "why": "\(self.authenticationCauseLocked.explanation)"])
            case .failed(let code):
                self.logger.warning("session failed", metadata: ["error": "\((context.sessionFailure ?? GKSessionError(code)).localizedDescription)"])
            case .received(let data, let peer, let mode):
                self.logger.trace("data", metadata: ["peer": "\(who(peer))", "bytes": "\(data.readableBytes)", "mode": "\(mode)"])
            }
        }
    }
}
