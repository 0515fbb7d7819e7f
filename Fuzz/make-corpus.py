#!/usr/bin/env python3
"""Writes the seed corpus of Fuzz/PacketDecoderFuzzer to Fuzz/Corpus/, deterministically.

Every seed starts with the harness's selector byte (see Sources/PacketDecoderFuzzer):
  0x00  the rest is one received datagram  -> FuzzingEntryPoints.receive
  0x01  the rest is a data packet's plaintext (frames) -> FuzzingEntryPoints.readFrames
  0x02  the rest is datagrams, each behind a 2-byte big-endian length -> receive, in order

Datagrams follow Sources/GameKitTransport/Wire/*.swift and docs/PROTOCOL.md (transport version 2).
The initiations are real: their CPace shares are ristretto255 elements (libsodium, through ctypes),
so the fuzzed responder runs its half of CPace and answers each with a challenge; a request that
follows one in a sequence reaches the responder's open (and fails it: its keys come from the
responder's fresh scalar, which no seed can know), the wrong-password path with its reject and
guess limiter. The rest (challenges, responses, rejects, cookies, cancels, data packets) are
correctly shaped but cannot match the fuzzed endpoint's random indices, echoes and keys; they
exercise the decoders and the endpoint's routing.

Needs pyca/cryptography (as scripts/key-vectors.py) and libsodium. Run: python3 Fuzz/make-corpus.py
"""
import ctypes
import ctypes.util
import hashlib
import os
import random
import struct

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus")
RECEIVE, FRAMES, SEQUENCE = b"\x00", b"\x01", b"\x02"

# Packet types (PacketType.swift), handshake kinds (HandshakeKind) and frame types (Frame.swift).
HANDSHAKE_OUT, HANDSHAKE_BACK, REJECT, COOKIE, CANCEL, DATA, PROBE, PROBE_REPLY, PROBE_COOKIE = range(4, 13)
FIRST, SECOND = 0, 1  # initiation / challenge, request / response
PADDING, PING, ACK, RELIABLE, UNRELIABLE, FRAGMENT, WINDOW, CLOSE = range(0, 8)
VERSION = 2
SODIUM = ctypes.CDLL(ctypes.util.find_library("sodium"))
assert SODIUM.sodium_init() >= 0


def share(seed):
    """A ristretto255 element: seed's scalar times the group's base point."""
    scalar = ctypes.create_string_buffer(32)
    SODIUM.crypto_core_ristretto255_scalar_reduce(scalar, hashlib.sha512(b"seed %d" % seed).digest())
    point = ctypes.create_string_buffer(32)
    assert SODIUM.crypto_scalarmult_ristretto255_base(point, scalar) == 0
    return point.raw


# --- Keys -------------------------------------------------------------------------------------

def public_key(seed):
    """An X25519 public key (liveness keys, PROTOCOL 3.9)."""
    private = X25519PrivateKey.from_private_bytes(bytes((seed + i) % 256 for i in range(32)))
    return private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


# --- Encoders ------------------------------------------------------------------------------------

def u8(v): return struct.pack(">B", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)
def u64(v): return struct.pack(">Q", v)


def varint(v, width=None):
    """QUIC variable-length integer (VarInt.swift); `width` forces a longer encoding."""
    width = width or (1 if v < 1 << 6 else 2 if v < 1 << 14 else 4 if v < 1 << 30 else 8)
    prefix = {1: 0, 2: 1, 4: 2, 8: 3}[width]
    return ((prefix << (8 * width - 2)) | v).to_bytes(width, "big")


def parameters(window=4 << 20, reliable=1 << 20, unreliable=96 << 10, ack_delay=5000, datagram=1200):
    """TransportParameters (20 bytes); the defaults are TransportConfiguration's."""
    return u32(window) + u32(reliable) + u32(unreliable) + u32(ack_delay) + u16(datagram) + u16(0)


def initiation(sender, element, version=VERSION, mac2=bytes(16), padding=bytes(16)):
    return u8(HANDSHAKE_OUT) + u8(version) + u8(FIRST) + u8(0) + u32(sender) + element + padding + mac2


def challenge(receiver, echo, element, tag):
    return u8(HANDSHAKE_BACK) + u8(VERSION) + u8(FIRST) + u8(0) + u32(receiver) + echo + element + tag


def request(sender, sealed):
    return u8(HANDSHAKE_OUT) + u8(VERSION) + u8(SECOND) + u8(0) + u32(sender) + sealed


def cancel(sender, echo, mac, reason=0):
    return u8(CANCEL) + u8(VERSION) + u8(reason) + u8(0) + u32(sender) + echo + mac


def response(sender, receiver, sealed):
    return u8(HANDSHAKE_BACK) + u8(VERSION) + u8(SECOND) + u8(0) + u32(sender) + u32(receiver) + sealed


def reject(reason, receiver, echo, code=0, version=VERSION):
    return u8(REJECT) + u8(version) + u8(reason) + u8(0) + u32(receiver) + u16(code) + u16(0) + echo


def cookie(receiver, echo, value):
    return u8(COOKIE) + u8(VERSION) + u16(0) + u32(receiver) + echo + value


def data_packet(receiver, number, body):
    return u8(DATA) + u8(0) + u16(0) + u32(receiver) + u64(number) + body


def sequence(*datagrams):
    return SEQUENCE + b"".join(u16(len(d)) + d for d in datagrams)


def ack(largest, delay, first, ranges=(), width=None):
    out = u8(ACK) + varint(largest, width) + varint(delay, width) + varint(len(ranges), width) + varint(first, width)
    for gap, length in ranges:
        out += varint(gap, width) + varint(length, width)
    return out


def messages(*bodies):
    """Reliable stream bytes: each message behind its varint length (ReceiveStream.cutMessages)."""
    return b"".join(varint(len(b)) + b for b in bodies)


def reliable(offset, data):
    return u8(RELIABLE) + varint(offset) + varint(len(data)) + data


def unreliable(data):
    return u8(UNRELIABLE) + varint(len(data)) + data


def fragment(message_id, total, offset, data):
    return u8(FRAGMENT) + varint(message_id) + varint(total) + varint(offset) + varint(len(data)) + data


def window(limit):
    return u8(WINDOW) + varint(limit)


def close(code):
    return u8(CLOSE) + u16(code)


# --- Seeds ---------------------------------------------------------------------------------------

def seeds():
    rng = random.Random(0x0617)

    def noise(n):
        return bytes(rng.randrange(256) for _ in range(n))

    key_a, key_b, key_c = share(1), share(41), share(81)
    echo_a = key_a[:16]

    # Datagrams (selector 0x00).
    yield "recv-initiation-valid", RECEIVE + initiation(0x0A0B0C0D, key_a)
    yield "recv-initiation-valid-mac2", RECEIVE + initiation(0x55667788, key_c, mac2=noise(16))
    yield "recv-initiation-nonzero-padding", RECEIVE + initiation(0x0A0B0C0E, share(121), padding=noise(16))
    yield "recv-initiation-identity", RECEIVE + initiation(0x0A0B0C0F, bytes(32))
    yield "recv-initiation-not-an-element", RECEIVE + initiation(0x0A0B0C12, bytes([0xFF] * 32))
    yield "recv-initiation-version-1", RECEIVE + initiation(0x0A0B0C10, share(161), version=1)
    yield "recv-initiation-version-3", RECEIVE + initiation(0x0A0B0C13, share(162), version=3)
    yield "recv-initiation-truncated", RECEIVE + initiation(0x0A0B0C11, key_a)[:60]
    yield "recv-challenge", RECEIVE + challenge(0x0A0B0C0D, echo_a, share(3), noise(16))
    yield "recv-request", RECEIVE + request(0x0A0B0C0D, noise(20 + 16))
    yield "recv-request-payload", RECEIVE + request(0x11223344, noise(20 + 64 + 16))
    yield "recv-cancel", RECEIVE + cancel(0x0A0B0C0D, echo_a, noise(16), reason=0)
    yield "recv-cancel-timed-out", RECEIVE + cancel(0x11223344, key_b[:16], noise(16), reason=1)
    yield "recv-response", RECEIVE + response(0xCAFEF00D, 0x0A0B0C0D, noise(20 + 16))
    yield "recv-response-payload", RECEIVE + response(0xCAFEF00E, 0x12345678, noise(20 + 32 + 16))
    yield "recv-reject-auth", RECEIVE + reject(1, 0x0A0B0C0D, echo_a)
    yield "recv-reject-denied", RECEIVE + reject(2, 0x0A0B0C0D, echo_a, code=0x1234)
    yield "recv-reject-version", RECEIVE + reject(3, 0x0A0B0C0D, echo_a, version=1)
    yield "recv-cookie", RECEIVE + cookie(0x0A0B0C0D, echo_a, noise(16))
    yield "recv-data-short", RECEIVE + data_packet(0x0A0B0C0D, 0, noise(17))
    yield "recv-data-1200", RECEIVE + data_packet(0x0A0B0C0D, 1, noise(1200 - 16))
    yield "recv-data-large-number", RECEIVE + data_packet(0xFFFFFFFF, (1 << 62) - 1, noise(48))
    yield "recv-unknown-type", RECEIVE + u8(13) + noise(39)
    # Liveness (PROTOCOL 3.9): shaped right, but MACed with no key the endpoint holds (its
    # liveness key is random), so the responder drops them after its checks.
    yield "recv-probe", RECEIVE + u8(PROBE) + u8(1) + u16(0) + public_key(9) + u64(0x0102030405060708) + bytes(range(16))
    yield "recv-probe-cookie", RECEIVE + u8(PROBE) + u8(1) + u16(0) + public_key(9) + u64(2) + bytes(range(16)) + bytes(range(16))
    yield "recv-probe-reply", RECEIVE + u8(PROBE_REPLY) + u8(1) + u16(0) + u64(0x0102030405060708) + bytes(range(16))
    yield "recv-probe-cookie-answer", RECEIVE + u8(PROBE_COOKIE) + u8(1) + u16(0) + u64(2) + bytes(range(16))
    yield "recv-empty", RECEIVE

    # Datagram sequences (selector 0x02): state within one input. Fresh keys and indices, so that
    # the endpoint has not seen these initiations before.
    key_d, key_e, key_f, key_g = share(7), share(47), share(87), share(127)
    yield "seq-initiation-cancel", sequence(initiation(0x0D0D0D0D, key_d), cancel(0x0D0D0D0D, key_d[:16], noise(16), reason=0))
    yield "seq-initiation-repeat", sequence(initiation(0x0E0E0E0E, key_e), initiation(0x0E0E0E0E, key_e, mac2=noise(16)))
    # A request after its initiation: it does not open, so the handshake fails as a wrong
    # password would (a reject, a guess spent), and its repeat gets the same reject.
    wrong = request(0x0F0F0F0F, noise(36))
    yield "seq-initiation-request", sequence(initiation(0x0F0F0F0F, key_f), wrong, wrong, data_packet(0x0F0F0F0F, 0, noise(40)))
    yield "seq-initiation-other-share", sequence(initiation(0x10101010, key_g), initiation(0x10101010, share(128)))
    yield "seq-handshake-replies", sequence(
        challenge(0x0A0B0C0D, echo_a, share(5), noise(16)), response(0xCAFEF00F, 0x0A0B0C0D, noise(36)), cookie(0x0A0B0C0D, echo_a, noise(16)),
        reject(2, 0x0A0B0C0D, echo_a, code=7), reject(3, 0x0A0B0C0D, echo_a, version=9))

    # Data packet plaintexts (selector 0x01).
    yield "frames-ping", FRAMES + u8(PING)
    yield "frames-padding", FRAMES + bytes(32) + u8(PING) + bytes(8)
    yield "frames-ack", FRAMES + ack(100, 25, 10)
    yield "frames-ack-ranges", FRAMES + ack(1000, 5000, 5, [(2, 3), (0, 0), (10, 20), (100, 400)])
    yield "frames-ack-wide", FRAMES + ack((1 << 40) + 7, 1 << 20, 7, [(1, 1)], width=8)
    yield "frames-reliable", FRAMES + reliable(0, messages(b"hello", b"world"))
    yield "frames-reliable-split", FRAMES + reliable(0, messages(b"x" * 100)[:40]) + reliable(40, messages(b"x" * 100)[40:])
    yield "frames-reliable-reordered", FRAMES + reliable(9, messages(b"abc", b"defgh")[9:]) + reliable(0, messages(b"abc", b"defgh")[:9])
    yield "frames-reliable-overlap", FRAMES + reliable(20, b"B" * 20) + reliable(10, b"A" * 25) + reliable(0, varint(60, 2) + b"C" * 8)
    yield "frames-reliable-window-edge", FRAMES + reliable((1 << 16) - 8, b"\x01" * 8)
    yield "frames-reliable-too-large", FRAMES + reliable(0, varint((1 << 15) + 1, 4) + b"z" * 16)
    yield "frames-unreliable", FRAMES + unreliable(b"position 12 34") + unreliable(b"")
    yield "frames-fragments", FRAMES + fragment(7, 30, 0, b"a" * 12) + fragment(7, 30, 12, b"b" * 12) + fragment(7, 30, 24, b"c" * 6)
    yield "frames-fragments-mixed", FRAMES + fragment(1, 20, 10, b"t" * 10) + fragment(2, 5, 0, b"12345") + fragment(1, 20, 0, b"h" * 10)
    yield "frames-fragment-conflict", FRAMES + fragment(3, 100, 0, b"p" * 50) + fragment(3, 90, 50, b"q" * 40)
    yield "frames-window", FRAMES + window(1 << 20) + window((1 << 62) - 1)
    yield "frames-close", FRAMES + close(0) + close(0xFFFD)
    yield "frames-mixed", FRAMES + ack(42, 3, 2, [(0, 1)]) + reliable(0, messages(b"m1")) + u8(PING) + window(1 << 17) \
        + unreliable(b"u") + bytes(4) + fragment(9, 4, 0, b"frag") + close(1)
    yield "frames-unknown-type", FRAMES + u8(PING) + u8(8) + noise(8)
    yield "frames-truncated", FRAMES + u8(RELIABLE) + varint(0) + varint(50) + b"short"


def main():
    os.makedirs(CORPUS, exist_ok=True)
    for name in os.listdir(CORPUS):
        path = os.path.join(CORPUS, name)
        if os.path.isfile(path):  # Corpus/dns/ belongs to make-dns-corpus.py
            os.remove(path)
    count = 0
    for name, data in seeds():
        assert len(data) <= 1500, name  # scripts/fuzz runs with -max_len=1500
        with open(os.path.join(CORPUS, name), "wb") as f:
            f.write(data)
        count += 1
    print(f"wrote {count} seeds to {CORPUS}")


if __name__ == "__main__":
    main()
