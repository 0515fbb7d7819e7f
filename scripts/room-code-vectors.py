#!/usr/bin/env python3
# The room-code vectors of RoomInvitationTests, written independently of the Swift code
# (PROTOCOL §18.2): a 30-bit nameplate and a 25-bit secret as eleven symbols of Crockford's
# base32, then a check symbol, the sum of alpha^(i+1) * symbol_i in GF(2^5) modulo x^5 + x^2 + 1.
# Usage: scripts/room-code-vectors.py [NAMEPLATE SECRET]   (integers, 0x… accepted)
import sys

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def multiply(a, b):
    product = 0
    while b:
        if b & 1:
            product ^= a
        b >>= 1
        a <<= 1
        if a & 0x20:
            a ^= 0x25
    return product


def check(symbols):
    total, weight = 0, 1
    for symbol in symbols:
        weight = multiply(weight, 2)
        total ^= multiply(weight, symbol)
    return total


def code(nameplate, secret):
    value = nameplate << 25 | secret
    symbols = [(value >> (5 * (10 - i))) & 31 for i in range(11)]
    symbols.append(check(symbols))
    text = "".join(ALPHABET[s] for s in symbols)
    return f"{text[:4]}-{text[4:8]}-{text[8:]}"


if len(sys.argv) == 3:
    print(code(int(sys.argv[1], 0), int(sys.argv[2], 0)))
else:
    for nameplate, secret in [(0x3FFFFFFF, 0), (0, 0), (0x3FFFFFFF, 0x1FFFFFF), (0x12345678 & 0x3FFFFFFF, 0x0ABCDEF)]:
        print(hex(nameplate), hex(secret), code(nameplate, secret))
