import Dispatch

/// Knowing whether code already runs on a given serial queue. A queue is tagged with a private
/// key the first time it is asked about; `getSpecific` then finds the tag while that queue runs
/// the caller.
extension DispatchQueue {
    private static let identityKey = DispatchSpecificKey<ObjectIdentifier>()

    /// Whether the caller runs on this queue.
    package var isCurrent: Bool {
        let identity = ObjectIdentifier(self)
        if self.getSpecific(key: Self.identityKey) != identity {
            self.setSpecific(key: Self.identityKey, value: identity)
        }
        return DispatchQueue.getSpecific(key: Self.identityKey) == identity
    }
}
