// libsodium for Swift: the ristretto255 group (RFC 9496) that the transport's password-
// authenticated key exchange (CPace, GameKitTransport/Crypto/CPace.swift) runs on. Only the
// group's element derivation, scalar multiplication and scalar sampling are used; hashing, key
// derivation and sealing stay with swift-crypto.
#if !__has_include(<sodium.h>)
#error "libsodium's headers are missing: install Debian's libsodium-dev (sudo apt-get install libsodium-dev)"
#endif
#include <sodium.h>
