import Foundation

extension DiscoveryError: LocalizedError {
    /// What failed, in a sentence (the error's `localizedDescription`).
    public var errorDescription: String? {
        switch self {
        case .noUsableInterface:
            "No network interface can be used for discovery: none is up with multicast and an address, none of the named ones exists, or no socket could be opened on port 5353."
        case .shutDown: "The discovery endpoint has been shut down."
        case .invalidService(let why): "The service cannot be advertised: \(why)."
        }
    }
}
