import Logging

extension TransportEvent {
    /// Logs the event: what a user asking "why don't we connect?" needs at debug (requests,
    /// links opening, failing, closing and moving, handshakes refused, liveness verdicts), data
    /// and room at trace.
    func log(to logger: Logger) {
        switch self {
        case .connectionRequest(let request):
            logger.debug("connection request", metadata: ["request": "\(request.id.rawValue)", "from": "\(request.remoteAddress)"])
        case .connectionRequestWithdrawn(let id, let why):
            logger.debug("connection request withdrawn", metadata: ["request": "\(id.rawValue)", "reason": "\(why)"])
        case .linkOpened(let link, let remote, _):
            logger.debug("link opened", metadata: ["link": "\(link.rawValue)", "remote": "\(remote)"])
        case .connectFailed(let link, let error):
            logger.debug("connect failed", metadata: ["link": "\(link.rawValue)", "error": "\(error)"])
        case .linkClosed(let link, let reason):
            logger.debug("link closed", metadata: ["link": "\(link.rawValue)", "reason": "\(reason)"])
        case .linkMoved(let link, let from, let to):
            logger.debug("link moved to another path", metadata: ["link": "\(link.rawValue)", "from": "\(from)", "to": "\(to)"])
        case .handshakeFailed(let remote, let error):
            logger.debug("handshake refused", metadata: ["from": "\(remote)", "error": "\(error)"])
        case .liveness(let watch, let alive):
            logger.debug("liveness", metadata: ["watch": "\(watch)", "alive": "\(alive)"])
        case .received(let data, let link, let mode):
            logger.trace("received", metadata: ["link": "\(link.rawValue)", "bytes": "\(data.readableBytes)", "mode": "\(mode)"])
        case .sendBufferAvailable(let link):
            logger.trace("send buffer has room", metadata: ["link": "\(link.rawValue)"])
        }
    }
}
