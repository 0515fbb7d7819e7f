extension String {
    /// The longest prefix made of whole characters whose UTF-8 fits `maximumBytes`: how names and
    /// TXT values are cut to DNS's 63- and 255-byte limits without splitting a character.
    /// (`package`: the session wire of OpenGameKit cuts its text fields the same way.)
    package func utf8Prefix(maximumBytes: Int) -> String {
        var result = ""
        var count = 0
        for character in self {
            let size = character.utf8.count
            guard count + size <= maximumBytes else { break }
            result.append(character)
            count += size
        }
        return result
    }
}
