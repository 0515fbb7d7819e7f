/// Parses the `USER:PASSWORD@HOST[:PORT]` TURN server options of the project's tools (gk-voice's
/// and gk-session's `--turn`). The password may contain `:`; the host part is the text after the
/// last `@`, left to the tool (each resolves it its own way).
public struct TURNArgument: Sendable, Equatable {
    public var username: String
    public var password: String
    /// `HOST` or `HOST:PORT`.
    public var address: String

    /// Nil when `text` is not `USER:PASSWORD@HOST[:PORT]`.
    public init?(_ text: String) {
        guard let at = text.lastIndex(of: "@"), let colon = text[..<at].firstIndex(of: ":"), text.index(after: at) < text.endIndex else {
            return nil
        }
        self.username = String(text[..<colon])
        self.password = String(text[text.index(after: colon)..<at])
        self.address = String(text[text.index(after: at)...])
    }
}
