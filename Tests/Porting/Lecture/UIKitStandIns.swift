// Plain stand-ins for the few UIKit pieces the lecture's view controllers touch. Linux has no
// UIKit; these keep the ported controllers' lines as they were. Every change a user would see is
// printed as a JSON line, with whether it happened on the main thread (UIKit demands it).
import Foundation

/// Prints one JSON line per visible change, from any thread.
enum Screen {
    private static let lock = NSLock()

    static func show(_ fields: [String: Any]) {
        var fields = fields
        fields["main"] = Thread.isMainThread
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

class UIViewController: NSObject {
    func viewDidLoad() {}
    func viewWillAppear(_ animated: Bool) {}
}

protocol UITextFieldDelegate: AnyObject {}
protocol UITextViewDelegate: AnyObject {}

final class UITextView: NSObject {
    let name: String
    var text: String = "" {
        didSet { Screen.show(["ui": self.name, "text": self.text]) }
    }
    var contentSize: CGSize { CGSize(width: 320, height: CGFloat(16 * self.text.split(separator: "\n").count)) }
    var bounds = CGRect(x: 0, y: 0, width: 320, height: 200)
    private(set) var contentOffset = CGPoint.zero

    init(name: String) { self.name = name }

    func setContentOffset(_ offset: CGPoint, animated: Bool) { self.contentOffset = offset }
}

final class UITextField: NSObject {
    var text: String? = ""

    @discardableResult
    func becomeFirstResponder() -> Bool { true }
}

final class UILabel: NSObject {
    let name: String
    var text: String? {
        didSet { Screen.show(["ui": self.name, "text": self.text ?? ""]) }
    }

    init(name: String) { self.name = name }
}

final class UISwitch: NSObject {
    var isOn = false
}

final class UISlider: NSObject {
    var value: Float = 1
}
