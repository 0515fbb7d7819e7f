#!/usr/bin/env python3
"""Computes the fixed key-derivation vectors of Tests/GameKitTransportTests/KeyScheduleTests.swift
with an independent implementation (pyca/cryptography over OpenSSL), following docs/PROTOCOL.md §4.
Run: python3 scripts/key-vectors.py"""
import hashlib, hmac
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

def hkdf_extract(salt, ikm): return hmac.new(salt, ikm, hashlib.sha256).digest()
def hkdf_expand(prk, info, length):
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block; counter += 1
    return out[:length]

password = b"correct horse"
psk = hkdf_extract(b"OpenGameKit v1 psk", password)
psk_empty = hkdf_extract(b"OpenGameKit v1 psk", b"")
initiator_private = bytes(range(1, 33))
responder_private = bytes(range(101, 133))
ei = X25519PrivateKey.from_private_bytes(initiator_private)
er = X25519PrivateKey.from_private_bytes(responder_private)
ei_pub = ei.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
er_pub = er.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
shared = ei.exchange(X25519PublicKey.from_public_bytes(er_pub))
# The handshake's keys (PROTOCOL §4.2): HKDF-SHA256 of CPace's intermediate session key (the
# draft-irtf-cfrg-cpace ristretto255 vector's ISK_IR stands in for one) with the transcript hash as
# salt; CPace itself is checked against the draft's own vectors in CPaceTests.
isk = bytes.fromhex("b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dcae7b35cd"
                    "2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c3fa2068af7900447")
transcript = hashlib.sha256(b"initiation header" + b"challenge header").digest()
okm = hkdf_expand(hkdf_extract(transcript, isk), b"ogk2 handshake", 192)
nonce = bytes(4) + (5).to_bytes(8, "big")
sealed = ChaCha20Poly1305(okm[128:160]).encrypt(nonce, b"hello, link", bytes(16))
mac = hmac.new(b"0123456789abcdef", b"message", hashlib.sha256).digest()[:16]
first, second = sorted([ei_pub, er_pub])
liveness_key = hkdf_expand(hkdf_extract(psk, shared), b"ogk1 liveness" + first + second, 32)
probe = bytes([10, 1, 0, 0]) + ei_pub + (0x0102030405060708).to_bytes(8, "big")
probe += hmac.new(liveness_key, probe, hashlib.sha256).digest()[:16]
reply = bytes([11, 1, 0, 0]) + (0x0102030405060708).to_bytes(8, "big")
reply += hmac.new(liveness_key, reply, hashlib.sha256).digest()[:16]
verification = hashlib.sha256(b"ogk2 verification" + transcript).digest()[:5]
for name, value in [("psk", psk), ("pskEmpty", psk_empty), ("initiatorPublic", ei_pub), ("responderPublic", er_pub),
                    ("shared", shared), ("challengeKey", okm[:32]), ("requestKey", okm[32:64]),
                    ("responseKey", okm[64:96]), ("cancelKey", okm[96:128]),
                    ("initiatorToResponder", okm[128:160]), ("responderToInitiator", okm[160:]),
                    ("sealedPacket5", sealed), ("truncatedMAC", mac),
                    ("livenessKey", liveness_key), ("probe", probe), ("probeReply", reply),
                    ("verification", verification)]:
    print(f'static let {name} = "{value.hex()}"')
