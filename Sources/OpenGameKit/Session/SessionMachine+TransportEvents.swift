import GameKitTransport

extension SessionMachine {
    /// A transport event, in the order the endpoint reported it: the one place transport events
    /// reach the session's decisions (the driver adds only its waiters; the virtual-time tests
    /// call this too).
    mutating func handle(_ event: TransportEvent) {
        switch event {
        case .connectionRequest(let request):
            self.handleConnectionRequest(request)
        case .connectionRequestWithdrawn(let id, let reason):
            self.handleRequestWithdrawn(id, reason)
        case .linkOpened(let link, _, let payload):
            self.handleLinkOpened(link, payload: payload)
        case .connectFailed(let link, let error):
            self.handleConnectFailed(link, error)
        case .received(let message, let link, let mode):
            self.handleReceived(message, on: link, mode: mode)
        case .linkClosed(let link, let reason):
            self.handleLinkClosed(link, reason)
        case .sendBufferAvailable(let link):
            self.handleSendBufferAvailable(link)
        case .handshakeFailed:
            self.statistics.authenticationFailures += 1
        case .liveness(let watch, let alive):
            self.handleLiveness(watch, alive: alive)
        case .linkMoved:
            self.statistics.linkMoves += 1
        }
    }
}
