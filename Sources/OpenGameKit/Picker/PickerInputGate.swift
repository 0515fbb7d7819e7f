/// A presenter's input on its way to the picker: each input (a key, a line) becomes actions read
/// against the screen shown, except after an action that may switch between commands and text
/// (into or out of typing a room code). Input after such an action is held until the screen that
/// action leads to arrives, so that what the user typed ahead is read as that screen expects.
///
/// A class, not a struct: performing an action may show the next screen at once (the picker
/// works on the main queue by default), re-entering the gate while it feeds.
@MainActor
final class PickerInputGate<Input> {
    private var held: [Input]?
    private let decode: (Input, GKPeerPickerScreen) -> [GKPeerPickerAction]

    /// `decode`: what an input means on a screen.
    init(decode: @escaping (Input, GKPeerPickerScreen) -> [GKPeerPickerAction]) {
        self.decode = decode
    }

    /// Acts on `inputs` in order against `screen()`; `perform` returns false once the picker is
    /// gone (the rest is dropped).
    func feed(_ inputs: [Input], screen: () -> GKPeerPickerScreen, perform: (GKPeerPickerAction) -> Bool) {
        for (index, input) in inputs.enumerated() {
            if self.held != nil {
                self.held?.append(contentsOf: inputs[index...])
                return
            }
            for action in self.decode(input, screen()) {
                if screen().mayStartOrEndTyping(after: action) { self.held = [] }
                guard perform(action) else { return }
            }
        }
    }

    /// A new screen is shown: held input goes on against it.
    func screenShown(screen: () -> GKPeerPickerScreen, perform: (GKPeerPickerAction) -> Bool) {
        guard let held = self.held else { return }
        self.held = nil
        self.feed(held, screen: screen, perform: perform)
    }

    /// Forgets held input (the picker was presented anew or dismissed).
    func reset() {
        self.held = nil
    }

    /// Whether input is held.
    var isHolding: Bool { self.held != nil }
}
