#!/usr/bin/env python3
"""Writes the seed corpora of the session, signal, stun, online and voice harnesses (Fuzz/Corpus/<name>/).

Deterministic: run it again and the files come out the same (the voice seeds' Opus payloads are
libopus's output, so they follow the installed libopus; every other byte is fixed here). Standard
library only, plus libopus through ctypes (the voice build needs libopus anyway).

Each seed is built from the layouts of docs/PROTOCOL.md (§13 session messages, §16 voice packets,
§17 call signalling and real-time connections) and RFC 8489/8656/8445 (STUN, TURN, ICE) with the
small encoders below, not the Swift ones. Seeds of the sequence modes start with the harness's
selector byte and hold records of a control byte, a 2-byte length and the bytes (see each
harness's source for what the control bits do).
"""

import ctypes
import ctypes.util
import hashlib
import hmac
import math
import os
import random
import struct
import zlib

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus")


def u8(v): return struct.pack(">B", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)
def u64(v): return struct.pack(">Q", v)


def record(control, data):
    return u8(control) + u16(len(data)) + data


def records(*pairs):
    return b"".join(record(c, d) for c, d in pairs)


# --- Session messages (PROTOCOL §13) ------------------------------------------------------------

def text(s):
    b = s.encode() if isinstance(s, str) else s
    return u8(len(b)) + b


def hello(key, peer, mode, attempt, name, version=1):
    body = u8(version) + u64(key) + u32(peer) + u8(mode) + u32(attempt) + text(name)
    return body + bytes(max(0, 300 - len(body)))


def welcome(peer, name, version=1):
    return u8(version) + u32(peer) + text(name)


def entry(peer, name):
    return u32(peer) + text(name)


def session_seeds():
    yield "hello", hello(0x0123456789ABCDEF, 0x11111111, 0, 7, "Alice's phone")
    yield "hello-client", hello(0xFEDCBA9876543210, 0x22222222, 2, 0, "")
    yield "hello-unicode", hello(1, 0x33333333, 1, 0xFFFFFFFF, "Ünïcödé 🎮 名前")
    yield "hello-name-255", hello(2, 0x44444444, 1, 1, "n" * 255)
    yield "hello-version-2", hello(3, 0x55555555, 1, 1, "later", version=2)
    yield "hello-truncated", hello(4, 0x66666666, 1, 1, "cut")[:12]
    yield "welcome", welcome(0x77777777, "Bob")
    yield "welcome-invalid-utf8", welcome(0x88888888, b"\xff\xfe\xc3(\xe2\x82")
    yield "welcome-name-overruns", u8(1) + u32(9) + u8(40) + b"short"
    yield "data", u8(0) + b"position 3,4"
    yield "data-empty", u8(0)
    yield "roster", u8(1) + u16(3) + entry(1, "one") + entry(2, "two") + entry(0xFFFFFFFF, "")
    yield "roster-empty", u8(1) + u16(0)
    yield "roster-too-many", u8(1) + u16(1025) + entry(1, "x")
    yield "roster-truncated", u8(1) + u16(2) + entry(1, "one") + u32(2)
    yield "joined", u8(2) + entry(0x0A0B0C0D, "Carol")
    yield "left", u8(3) + u32(0x0A0B0C0D)
    yield "relay", u8(4) + u16(3) + u32(1) + u32(2) + u32(3) + b"to three peers"
    yield "relay-no-destinations", u8(4) + u16(0) + b"to nobody"
    yield "relay-short-destinations", u8(4) + u16(4) + u32(1) + u32(2)
    yield "relayed", u8(5) + u32(0x12345678) + b"from a client"
    yield "drop", u8(6) + u32(0x0A0B0C0D)
    yield "channel-voice", u8(7) + u8(1) + bytes([0x14, 0x11, 0, 1, 0, 0, 1, 0x40, 0]) + b"opus"
    yield "channel-zero", u8(7) + u8(0) + b"not the application's"
    yield "channel-relay", u8(8) + u8(1) + u16(2) + u32(2) + u32(3) + bytes([0x11])
    yield "channel-relay-truncated", u8(8) + u8(1) + u16(3) + u32(2)
    yield "channel-relayed", u8(9) + u8(1) + u32(0x12345678) + bytes([0x13])
    yield "channel-relayed-truncated", u8(9) + u8(200) + u16(1)
    yield "unknown-type", u8(10) + u32(1)
    yield "empty", b""


# --- Call signalling (PROTOCOL §17.1) -----------------------------------------------------------

INVITE, ACCEPT, DENY, BUSY, CANCEL, HANG_UP, UNSUPPORTED, NO_PATH, CANDIDATES = range(1, 10)


def candidate(kind, address, port, priority):
    family = 4 if len(address) == 4 else 6
    return u8(kind) + u8(family) + u16(port) + u32(priority) + bytes(address)


def signal(kind, call, body=b"", version=1, magic=b"GK"):
    return magic + u8(version) + u8(kind) + u32(call) + body


HOST = candidate(0, [10, 0, 0, 7], 50000, (126 << 24) | (65535 << 8) | 255)
SRFLX = candidate(1, [203, 0, 113, 9], 61000, (100 << 24) | (65535 << 8) | 255)
RELAY6 = candidate(3, [0x20, 0x01, 0x0D, 0xB8] + [0] * 11 + [1], 3478, 255)
KEY = bytes(range(1, 33))


def with_candidates(*cands):
    return u8(len(cands)) + b"".join(cands)


def signal_seeds():
    call = 0x0BADF00D
    invite = signal(INVITE, call, KEY + with_candidates(HOST, SRFLX, RELAY6))
    accept = signal(ACCEPT, call, KEY + with_candidates(SRFLX, HOST))
    # One message (selector 0x00).
    yield "invite", b"\x00" + invite
    yield "invite-no-candidates", b"\x00" + signal(INVITE, call, KEY + u8(0))
    yield "invite-16-candidates", b"\x00" + signal(INVITE, call, KEY + with_candidates(
        *[candidate(i % 4, [10, 0, 1, i], 40000 + i, i * 1000) for i in range(16)]))
    yield "invite-17-candidates", b"\x00" + signal(INVITE, call, KEY + u8(17) + HOST * 17)
    yield "accept", b"\x00" + accept
    yield "candidates", b"\x00" + signal(CANDIDATES, call, with_candidates(RELAY6))
    for name, kind in (("deny", DENY), ("busy", BUSY), ("cancel", CANCEL), ("hang-up", HANG_UP), ("no-path", NO_PATH)):
        yield name, b"\x00" + signal(kind, call)
    yield "unsupported-version", b"\x00" + signal(UNSUPPORTED, call, u8(1))
    yield "version-2", b"\x00" + signal(INVITE, call, KEY + u8(0), version=2)
    yield "call-id-zero", b"\x00" + signal(HANG_UP, 0)
    yield "wrong-magic", b"\x00" + signal(HANG_UP, call, magic=b"GL")
    yield "unknown-kind", b"\x00" + signal(10, call)
    yield "candidate-port-zero", b"\x00" + signal(CANDIDATES, call, with_candidates(candidate(0, [10, 0, 0, 1], 0, 1)))
    # Group voice's channel messages (PROTOCOL §19.1), decoded by the same harness.
    for name, message in [("group-join", b"\x11"), ("group-join-reply", b"\x12"), ("group-leave", b"\x13"),
                          ("group-media", b"\x14\x11\x00\x01\x00\x00\x01\x40\x00opus"), ("group-media-empty", b"\x14"),
                          ("group-version-2", b"\x21"), ("group-join-trailing", b"\x11\x00")]:
        yield name, b"\x00" + message
    yield "candidate-bad-family", b"\x00" + signal(CANDIDATES, call, u8(1) + u8(0) + u8(5) + u16(1) + u32(1) + bytes(4))
    yield "trailing-byte", b"\x00" + signal(DENY, call, b"\x00")
    yield "too-long", b"\x00" + signal(CANDIDATES, call, with_candidates(RELAY6) + bytes(500))

    # Sequences (selector 0x01): control bit 0 = sender (alice/bob), bits 1-3 = local call first
    # (1 start, 2 accept, 3 deny, 4 stop, 5 gathered, 6 connected, 7 path failed), bits 4-6 =
    # clock step, bit 7 = give the blob the current call's ID.
    def act(action, clock=0, patch=False, bob=False):
        return (0x80 if patch else 0) | clock << 4 | action << 1 | (1 if bob else 0)

    yield "seq-incoming-call", b"\x01" + records(
        (act(0), invite), (act(2, 1), b""), (act(5, 1), b""),
        (act(6, 2), signal(CANDIDATES, call, with_candidates(HOST))), (act(0, 3), signal(HANG_UP, call)))
    yield "seq-outgoing-call", b"\x01" + records(
        (act(1), b""), (act(5, 1), b""), (act(0, 2, patch=True), accept),
        (act(6, 1, patch=True), signal(CANDIDATES, 0, with_candidates(SRFLX))), (act(4, 3), b""))
    yield "seq-outgoing-denied", b"\x01" + records((act(1), b""), (act(5), b""), (act(0, 1, patch=True), signal(DENY, 0)))
    yield "seq-outgoing-busy", b"\x01" + records((act(1, bob=True), b""), (act(5), b""), (act(0, 1, patch=True, bob=True), signal(BUSY, 0)))
    yield "seq-glare", b"\x01" + records((act(1), b""), (act(5), b""), (act(0, 1), invite))
    yield "seq-other-version", b"\x01" + records((act(1), b""), (act(5), b""), (act(0, 1, patch=True), signal(INVITE, 0, version=3)))
    yield "seq-invite-then-cancel", b"\x01" + records((act(0), invite), (act(0, 2), signal(CANCEL, call)))
    yield "seq-invite-denied", b"\x01" + records((act(0), invite), (act(3, 1), b""))
    yield "seq-path-failed", b"\x01" + records(
        (act(0), invite), (act(2), b""), (act(5), b""), (act(7, 4), signal(NO_PATH, call)))
    yield "seq-invite-times-out", b"\x01" + records((act(1), b""), (act(5), b""), (act(0, 7), b""), (act(0, 7), b""))
    yield "seq-second-caller-busy", b"\x01" + records((act(0), invite), (act(0, 1, bob=True), signal(INVITE, call + 1, KEY + u8(0))))


# --- STUN, TURN, ICE (RFC 8489, 8656, 8445) and media (PROTOCOL §17.5) --------------------------

COOKIE = 0x2112A442
BINDING, ALLOCATE, REFRESH, SEND, DATA, CREATE_PERMISSION, CHANNEL_BIND = 1, 3, 4, 6, 7, 8, 9
REQUEST, INDICATION, SUCCESS, ERROR = 0, 1, 2, 3
MAPPED, USERNAME, INTEGRITY, ERROR_CODE, UNKNOWN_ATTRIBUTES = 0x0001, 0x0006, 0x0008, 0x0009, 0x000A
CHANNEL_NUMBER, LIFETIME, XOR_PEER, DATA_ATTR, REALM, NONCE = 0x000C, 0x000D, 0x0012, 0x0013, 0x0014, 0x0015
XOR_RELAYED, REQUESTED_TRANSPORT, XOR_MAPPED, PRIORITY, USE_CANDIDATE = 0x0016, 0x0019, 0x0020, 0x0024, 0x0025
SOFTWARE, FINGERPRINT, ICE_CONTROLLED, ICE_CONTROLLING = 0x8022, 0x8028, 0x8029, 0x802A


def message_type(method, cls):
    return (method & 0x000F) | ((cls & 1) << 4) | ((method & 0x0070) << 1) | ((cls & 2) << 7) | ((method & 0x0F80) << 2)


def attribute(kind, value):
    return u16(kind) + u16(len(value)) + value + bytes((4 - len(value) % 4) % 4)


def stun(method, cls, txid, attributes=(), key=None, fingerprint=False):
    body = b"".join(attribute(k, v) for k, v in attributes)

    def header(length):
        return u16(message_type(method, cls)) + u16(length) + u32(COOKIE) + txid

    if key is not None:
        mac = hmac.new(key, header(len(body) + 24) + body, hashlib.sha1).digest()
        body += attribute(INTEGRITY, mac)
    if fingerprint:
        crc = zlib.crc32(header(len(body) + 8) + body) ^ 0x5354554E
        body += attribute(FINGERPRINT, u32(crc))
    return header(len(body)) + body


def xor_address(ip, port, txid):
    mask = u32(COOKIE) + txid
    family = 1 if len(ip) == 4 else 2
    return u8(0) + u8(family) + u16(port ^ (COOKIE >> 16)) + bytes(a ^ m for a, m in zip(ip, mask))


def appended(message, attribute_bytes):
    """`message` with an attribute after its last (the header's length grown to match)."""
    return message[:2] + u16(len(message) - 20 + len(attribute_bytes)) + message[4:] + attribute_bytes


def error_code(code, reason):
    return bytes([0, 0, code // 100, code % 100]) + reason.encode()


# The harness's fixed key material (TraversalFuzzingEntryPoints): bytes 64-71 are the two ICE
# ufrags, 72-95 the two passwords, all as lowercase hex.
MATERIAL = bytes((i * 37 + 11) & 0xFF for i in range(96))
INITIATOR_UFRAG, RESPONDER_UFRAG = MATERIAL[64:68].hex(), MATERIAL[68:72].hex()
INITIATOR_PASSWORD, RESPONDER_PASSWORD = MATERIAL[72:84].hex().encode(), MATERIAL[84:96].hex().encode()
TURN_KEY = hashlib.md5(b"fuzz:fuzz.invalid:fuzz password").digest()

# Control bits: 0-1 source (0 STUN server, 1 TURN server, 2 remote host, 3 stranger), 2 use the
# transaction ID of the last request to the source, 3-4 sign (1 local ICE password, 2 remote ICE
# password, 3 TURN key; media: seal), 5-7 clock step.
STUN_SERVER, TURN_SERVER, REMOTE, STRANGER = 0, 1, 2, 3
PATCH = 4
SIGN_LOCAL, SIGN_REMOTE, SIGN_TURN = 1 << 3, 2 << 3, 3 << 3


def clock(step): return step << 5


def traversal_seeds():
    rng = random.Random(0x1789)

    def txid():
        return bytes(rng.randrange(256) for _ in range(12))

    t = txid()
    mapped4 = xor_address([198, 51, 100, 20], 40000, t)
    yield "binding-request", b"\x00" + stun(BINDING, REQUEST, t, [(SOFTWARE, b"OpenGameKit")], fingerprint=True)
    yield "binding-success", b"\x00" + stun(BINDING, SUCCESS, t, [(XOR_MAPPED, mapped4), (SOFTWARE, b"srv")], fingerprint=True)
    yield "binding-success-v6", b"\x00" + stun(BINDING, SUCCESS, t, [(XOR_MAPPED, xor_address([0x20, 1, 0xd, 0xb8] + [0] * 11 + [9], 4000, t))])
    yield "binding-success-mapped-address", b"\x00" + stun(BINDING, SUCCESS, t, [(MAPPED, u8(0) + u8(1) + u16(4000) + bytes([192, 0, 2, 9]))])
    yield "binding-error", b"\x00" + stun(BINDING, ERROR, t, [(ERROR_CODE, error_code(400, "Bad Request")), (UNKNOWN_ATTRIBUTES, u16(0x7777))])
    yield "ice-check", b"\x00" + stun(BINDING, REQUEST, t, [
        (USERNAME, f"{RESPONDER_UFRAG}:{INITIATOR_UFRAG}".encode()), (PRIORITY, u32(0x6E7F1EFF)),
        (ICE_CONTROLLING, u64(0x1122334455667788)), (USE_CANDIDATE, b"")], key=RESPONDER_PASSWORD, fingerprint=True)
    yield "ice-check-controlled", b"\x00" + stun(BINDING, REQUEST, t, [
        (USERNAME, f"{INITIATOR_UFRAG}:{RESPONDER_UFRAG}".encode()), (PRIORITY, u32(0x6E7F1EFF)),
        (ICE_CONTROLLED, u64(0x8877665544332211))], key=INITIATOR_PASSWORD, fingerprint=True)
    yield "allocate-request", b"\x00" + stun(ALLOCATE, REQUEST, t, [(REQUESTED_TRANSPORT, bytes([17, 0, 0, 0])), (SOFTWARE, b"OpenGameKit")], fingerprint=True)
    yield "allocate-401", b"\x00" + stun(ALLOCATE, ERROR, t, [
        (ERROR_CODE, error_code(401, "Unauthorized")), (REALM, b"fuzz.invalid"), (NONCE, b"abcdef0123456789")], fingerprint=True)
    yield "allocate-success", b"\x00" + stun(ALLOCATE, SUCCESS, t, [
        (XOR_RELAYED, xor_address([192, 0, 2, 2], 49152, t)), (XOR_MAPPED, mapped4), (LIFETIME, u32(600))], key=TURN_KEY, fingerprint=True)
    yield "refresh-438", b"\x00" + stun(REFRESH, ERROR, t, [(ERROR_CODE, error_code(438, "Stale Nonce")), (NONCE, b"fresh")])
    yield "create-permission-success", b"\x00" + stun(CREATE_PERMISSION, SUCCESS, t, [], key=TURN_KEY, fingerprint=True)
    yield "channel-bind", b"\x00" + stun(CHANNEL_BIND, REQUEST, t, [(CHANNEL_NUMBER, u16(0x4000) + u16(0)), (XOR_PEER, mapped4)])
    yield "send-indication", b"\x00" + stun(SEND, INDICATION, t, [(XOR_PEER, mapped4), (DATA_ATTR, b"payload")])
    yield "data-indication", b"\x00" + stun(DATA, INDICATION, t, [(XOR_PEER, mapped4), (DATA_ATTR, bytes(range(37)))])
    yield "after-integrity", b"\x00" + appended(stun(BINDING, SUCCESS, t, [(XOR_MAPPED, mapped4)], key=b"k"), attribute(SOFTWARE, b"ignored"))
    yield "bad-fingerprint", b"\x00" + stun(BINDING, REQUEST, t, [(SOFTWARE, b"x")], fingerprint=True)[:-1] + b"\x00"
    yield "attribute-after-fingerprint", b"\x00" + appended(stun(BINDING, REQUEST, t, [], fingerprint=True), attribute(SOFTWARE, b"late"))
    yield "truncated-attribute", b"\x00" + stun(BINDING, REQUEST, t, [(SOFTWARE, b"abcdefgh")])[:-4]
    yield "bad-integrity-length", b"\x00" + stun(BINDING, REQUEST, t, [(INTEGRITY, bytes(16))])
    yield "unknown-attributes", b"\x00" + stun(0x0ABC, REQUEST, t, [(0x7F00, b"\x01\x02\x03"), (0xC001, bytes(13))])
    yield "not-stun", b"\x00" + bytes(20)
    yield "media", b"\x00" + bytes([0x90, 1, 0, 0]) + u64(1) + bytes(32)

    # Sequences (selector 0x01: this side answers the call; 0x03: it placed it).
    stun_ok = stun(BINDING, SUCCESS, bytes(12), [(XOR_MAPPED, xor_address([198, 51, 100, 20], 40000, bytes(12)))])
    yield "seq-stun-server", b"\x01" + records((STUN_SERVER | PATCH, stun_ok), (STUN_SERVER | PATCH, stun_ok))
    unauthorized = stun(ALLOCATE, ERROR, bytes(12), [
        (ERROR_CODE, error_code(401, "Unauthorized")), (REALM, b"fuzz.invalid"), (NONCE, b"nonce-1")])
    allocated = stun(ALLOCATE, SUCCESS, bytes(12), [
        (XOR_RELAYED, xor_address([192, 0, 2, 2], 49152, bytes(12))), (XOR_MAPPED, xor_address([198, 51, 100, 20], 40001, bytes(12))),
        (LIFETIME, u32(300))])
    # A peer's ICE check to this side (the responder: its ufrag first, its password).
    check = stun(BINDING, REQUEST, txid(), [
        (USERNAME, f"{RESPONDER_UFRAG}:{INITIATOR_UFRAG}".encode()), (PRIORITY, u32(0x6E7F1EFF)),
        (ICE_CONTROLLING, u64(7)), (USE_CANDIDATE, b"")], key=RESPONDER_PASSWORD, fingerprint=True)
    relayed_peer = xor_address([10, 0, 0, 2], 6000, bytes(12))
    data_indication = stun(DATA, INDICATION, bytes(12), [(XOR_PEER, relayed_peer), (DATA_ATTR, check)])
    permitted = stun(CREATE_PERMISSION, SUCCESS, bytes(12), [])
    yield "seq-turn-allocation", b"\x01" + records(
        (TURN_SERVER | PATCH, unauthorized), (TURN_SERVER | PATCH | SIGN_TURN, allocated),
        (TURN_SERVER | PATCH | SIGN_TURN | clock(1), permitted), (TURN_SERVER | clock(1), data_indication),
        (TURN_SERVER | PATCH | SIGN_TURN | clock(6), stun(REFRESH, SUCCESS, bytes(12), [(LIFETIME, u32(600))])),
        (TURN_SERVER | PATCH | clock(2), stun(REFRESH, ERROR, bytes(12), [(ERROR_CODE, error_code(438, "Stale Nonce")), (NONCE, b"nonce-2")])))
    yield "seq-turn-refused", b"\x01" + records(
        (TURN_SERVER | PATCH, unauthorized), (TURN_SERVER | PATCH, unauthorized),
        (TURN_SERVER | PATCH, stun(ALLOCATE, ERROR, bytes(12), [(ERROR_CODE, error_code(486, "Allocation Quota Reached"))])))
    # Checks from the peer (signed by the harness with this side's password), then answers to
    # this side's own checks (signed with the peer's), then media.
    check_to_controlled = stun(BINDING, REQUEST, bytes(12), [
        (USERNAME, f"{RESPONDER_UFRAG}:{INITIATOR_UFRAG}".encode()), (PRIORITY, u32(0x6E7F1EFF)),
        (ICE_CONTROLLING, u64(7)), (USE_CANDIDATE, b"")])
    answer = stun(BINDING, SUCCESS, bytes(12), [(XOR_MAPPED, xor_address([10, 0, 0, 1], 5000, bytes(12)))])
    media = [bytes([0x90, 1, 0, 0]) + u64(n) + b"voice frame %d" % n for n in (1, 2, 2, 5, 3, 1 << 40, 4)]
    yield "seq-ice-controlled", b"\x01" + records(
        (REMOTE | SIGN_LOCAL, check_to_controlled), (REMOTE | clock(2), b""),
        (REMOTE | PATCH | SIGN_REMOTE | clock(1), answer), (STRANGER | SIGN_LOCAL, check_to_controlled),
        *[(REMOTE | SIGN_LOCAL, m) for m in media], (REMOTE, media[0]), (REMOTE | clock(7), b""))
    check_to_controlling = stun(BINDING, REQUEST, bytes(12), [
        (USERNAME, f"{INITIATOR_UFRAG}:{RESPONDER_UFRAG}".encode()), (PRIORITY, u32(0x6E7F1EFF)), (ICE_CONTROLLED, u64(9))])
    yield "seq-ice-controlling", b"\x03" + records(
        (REMOTE | clock(2), b""), (REMOTE | PATCH | SIGN_REMOTE, answer), (REMOTE | SIGN_LOCAL, check_to_controlling),
        (REMOTE | clock(3), b""), (REMOTE | PATCH | SIGN_REMOTE, answer),
        (REMOTE | PATCH | SIGN_REMOTE | clock(4), answer), (REMOTE | clock(5), b""), (REMOTE | clock(5), b""))
    yield "seq-ice-bad-integrity", b"\x01" + records((REMOTE, check_to_controlled), (REMOTE | PATCH, answer),
                                                     (REMOTE | SIGN_REMOTE, check_to_controlled))
    yield "seq-timeouts", b"\x03" + records(*[(STRANGER | clock(7), b"")] * 4)


# --- Voice packets (PROTOCOL §16) -----------------------------------------------------------------

def opus_frames(count, fec):
    """`count` 20 ms frames of a 16 kHz tone in speech-like bursts, Opus VoIP mode, as the engine
    sends them (in-band FEC on when `fec`)."""
    name = ctypes.util.find_library("opus")
    if name is None:
        raise SystemExit("make-message-corpus.py: libopus not found (Debian: libopus-dev)")
    opus = ctypes.CDLL(name)
    opus.opus_encoder_create.restype = ctypes.c_void_p
    opus.opus_encoder_create.argtypes = [ctypes.c_int32, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    opus.opus_encode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int16), ctypes.c_int, ctypes.c_char_p, ctypes.c_int32]
    opus.opus_encoder_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int]
    opus.opus_encoder_destroy.argtypes = [ctypes.c_void_p]
    error = ctypes.c_int()
    encoder = opus.opus_encoder_create(16000, 1, 2048, ctypes.byref(error))  # OPUS_APPLICATION_VOIP
    assert error.value == 0
    set_request = {4012: 1 if fec else 0, 4014: 20 if fec else 0, 4002: 24000, 4022: 1}  # FEC, loss %, bitrate, complexity 1
    for request, value in set_request.items():
        assert opus.opus_encoder_ctl(encoder, request, ctypes.c_int32(value)) == 0
    frames = []
    output = ctypes.create_string_buffer(1275)
    for n in range(count):
        samples = (ctypes.c_int16 * 320)(*[
            int(8000 * math.sin(2 * math.pi * 220 * (n * 320 + i) / 16000) * (1 if (n // 5) % 2 == 0 else 0.05))
            for i in range(320)])
        size = opus.opus_encode(encoder, samples, 320, output, 1275)
        assert size > 0
        frames.append(output.raw[:size])
    opus.opus_encoder_destroy(encoder)
    return frames


def audio(sequence, timestamp, payload, muted=False):
    return u8(0x11) + u8(1 if muted else 0) + u16(sequence & 0xFFFF) + u32(timestamp & 0xFFFFFFFF) + payload


def report(loss, highest, jitter, target):
    return u8(0x12) + u8(loss) + u16(highest) + u16(jitter) + u16(target)


def voice_seeds():
    frames = opus_frames(12, fec=True)
    plain = opus_frames(3, fec=False)
    # One packet (selector 0x00).
    yield "audio", b"\x00" + audio(1, 320, frames[0])
    yield "audio-no-fec", b"\x00" + audio(2, 640, plain[1])
    yield "audio-muted", b"\x00" + audio(3, 960, frames[1], muted=True)
    yield "audio-celt", b"\x00" + audio(4, 1280, bytes([0xF8]) + bytes(range(60)))
    yield "audio-toc-only", b"\x00" + audio(5, 1600, bytes([0x48]))
    yield "audio-empty", b"\x00" + audio(6, 1920, b"")
    yield "audio-truncated", b"\x00" + audio(7, 2240, b"")[:7]
    yield "audio-too-large", b"\x00" + audio(8, 2560, bytes(1276))
    yield "report", b"\x00" + report(5, 1000, 12, 60)
    yield "report-loss-over-100", b"\x00" + report(250, 0xFFFF, 0xFFFF, 0xFFFF)
    yield "report-truncated", b"\x00" + report(1, 2, 3, 4)[:6]
    yield "version-2", b"\x00" + bytes([0x21, 0]) + u16(1) + u32(1) + b"\x48"
    yield "unknown-kind", b"\x00" + bytes([0x13]) + bytes(7)
    yield "empty", b"\x00"

    # Sequences (selector 0x01): control bits 0-3 = arrival step (x 10 ms), 4-6 = frames played.
    def play(step, pulls):
        return pulls << 4 | step

    in_order = [(play(2, 1), audio(n, n * 320, frames[n])) for n in range(12)]
    yield "seq-in-order", b"\x01" + records(*in_order, (play(0, 7), b""), (play(0, 7), b""))
    # A lost packet whose successor carries FEC, then reordering, a duplicate and a late packet.
    yield "seq-loss-fec", b"\x01" + records(
        *in_order[:3], in_order[4], (play(2, 2), b""), in_order[6], in_order[5], in_order[5], in_order[3],
        *in_order[7:], (play(0, 7), b""))
    yield "seq-jump", b"\x01" + records(
        *in_order[:4], (play(2, 1), audio(4, 4 * 320 + 16000 * 60, frames[4])), (play(2, 1), audio(5, 0xFFFFFF00, frames[5])),
        (play(15, 7), audio(0xFFFF, 0xFFFFFEC0, frames[6])), (play(15, 7), audio(0, 0, frames[7])))
    yield "seq-burst", b"\x01" + records(*[(play(0, 0), audio(n, n * 320, frames[n % 12])) for n in range(60)], (play(0, 7), b""))
    yield "seq-reports-and-muted", b"\x01" + records(
        (play(1, 1), report(10, 3, 20, 40)), (play(2, 1), audio(1, 320, frames[0], muted=True)),
        (play(2, 1), audio(2, 640, plain[2])), (play(2, 3), b"\x11\x00\x00"))


# --- Online rooms (PROTOCOL §18) -----------------------------------------------------------------

REGISTRATION_SIZE = 480


def short_text(s):
    data = s.encode()
    return u8(len(data)) + data


def wire_address(family, address, port):
    if family == 0:
        return u8(0)
    return u8(family) + address + u16(port)


def member_record(peer, version, name, key=b"\x07" * 32, flags=1, candidates=(), ufrag="abcd", password="0123456789abcdefghijklmn"):
    out = u32(peer) + u16(version) + short_text(name) + u8(len(key)) + key + u8(flags) + u8(len(candidates))
    for kind, family, address, port in candidates:
        out += u8(kind) + wire_address(family, address, port)
    return out + short_text(ufrag) + short_text(password)


def rendezvous(kind, request, body):
    out = u8(13) + u8(kind) + u64(request) + body
    if kind in (1, 2) and len(out) < REGISTRATION_SIZE:
        out += bytes(REGISTRATION_SIZE - len(out))
    return out


def online_seeds():
    token = bytes(range(16))
    room = u64(0x0102030405060708)
    holder = b"\x02" * 32
    record = member_record(42, 1, "Zoë", candidates=[(1, 4, bytes([10, 1, 2, 3]), 4000), (2, 6, bytes(15) + b"\x01", 5000)])
    ticket = b"\x01" + room + u32(42) + u64(1_800_000_600_000) + u64(1 << 30) + holder + bytes(64)
    create = rendezvous(1, 1, u64(9) + holder + record)
    join = rendezvous(2, 2, u64(9) + u32(0x1234567) + holder + record)
    refresh = rendezvous(3, 3, room + token + u32(5) + u8(1))
    messages = {
        "create": create, "join": join, "refresh": refresh,
        "leave": rendezvous(4, 4, room + token),
        "fetch": rendezvous(5, 5, room + token + u32(42)),
        "update": rendezvous(6, 6, room + token + record),
        "room": rendezvous(129, 1, u32(0x1234567) + room + token + u16(10) + wire_address(4, bytes([192, 0, 2, 9]), 7879) + u16(len(ticket)) + ticket),
        "roster": rendezvous(130, 0, room + u32(7) + wire_address(0, b"", 0) + u8(2) + u32(5) + u16(1) + u32(42) + u16(3) + u16(0)),
        "member": rendezvous(131, 5, room + record),
        "refused": rendezvous(132, 2, u8(2) + u32(0)),
        "left": rendezvous(133, 4, room),
        "allocate": u8(14) + u8(1) + u64(1_800_000_001_000) + u16(len(ticket)) + ticket + bytes(64),
        "allocated": u8(14) + u8(2) + u32(600) + u64(1 << 30),
        "relay-refused": u8(14) + u8(3) + u8(1),
        "relay-data": u8(15) + u8(0) + u32(42) + bytes([9, 0, 0, 0]) + bytes(40),
    }
    binding = u16(0x0001) + u16(0) + u32(0x2112A442) + bytes(range(12))
    for name, data in messages.items():
        yield name, b"\x00" + data
    yield "room-code", b"\x00" + b"7k3-qxm"
    # A rendezvous fed a room's life from four sources, and garbage.
    yield "serve-room", b"\x01" + records(
        (0, create), (1, join), (0, refresh), (5, messages["fetch"]), (0, messages["allocate"]),
        (1, messages["relay-data"]), (4, binding), (8, messages["leave"]))
    yield "serve-garbage", b"\x01" + records((0, b""), (1, b"\x0d"), (2, b"\x0e\x01"), (3, b"\xff" * 40), (0, create[:100]))
    # A room client fed its rendezvous's answers and a stranger's datagrams.
    yield "client-answers", b"\x03" + records(
        (0, messages["room"]), (0, messages["roster"]), (0, messages["member"]), (4, messages["refused"]),
        (0, messages["allocated"]), (2, messages["relay-data"]), (1, messages["relay-data"]), (0, binding))


def write(folder, seeds, max_len):
    path = os.path.join(CORPUS, folder)
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        os.remove(os.path.join(path, name))
    count = 0
    for name, data in seeds:
        assert len(data) <= max_len, (folder, name, len(data))  # scripts/fuzz's -max_len
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
        count += 1
    print(f"wrote {count} seeds to {path}")


def main():
    write("session", session_seeds(), 4096)
    write("signal", signal_seeds(), 4096)
    write("stun", traversal_seeds(), 4096)
    write("online", online_seeds(), 4096)
    write("voice", voice_seeds(), 8192)


if __name__ == "__main__":
    main()
