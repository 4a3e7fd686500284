"""SipHash-2-4 (Aumasson and Bernstein, 2012), the MAC of RFC 9018 server cookies.

Neither the standard library nor our dependencies expose it (CPython's own hash is SipHash-1-3 under a
random key), so it is written out here; tests/unit/wire/test_siphash.py checks it against the
reference vectors of the paper and of RFC 9018.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFFFFFFFFFF


def siphash24(key: bytes, data: bytes) -> bytes:
    """The 8-byte SipHash-2-4 of `data` under a 16-byte `key` (little-endian, as the reference code).
    The SipRounds are written out: loops and calls cost more than the arithmetic here."""
    if len(key) != 16:
        raise ValueError("SipHash needs a 16-byte key")
    M = _MASK
    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:], "little")
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    tail = n & ~7
    words = [int.from_bytes(data[i : i + 8], "little") for i in range(0, tail, 8)]
    words.append(int.from_bytes(data[tail:], "little") | ((n & 0xFF) << 56))
    for m in words:
        v3 ^= m
        v0 = (v0 + v1) & M
        v1 = ((v1 << 13) | (v1 >> 51)) & M ^ v0
        v0 = ((v0 << 32) | (v0 >> 32)) & M
        v2 = (v2 + v3) & M
        v3 = ((v3 << 16) | (v3 >> 48)) & M ^ v2
        v0 = (v0 + v3) & M
        v3 = ((v3 << 21) | (v3 >> 43)) & M ^ v0
        v2 = (v2 + v1) & M
        v1 = ((v1 << 17) | (v1 >> 47)) & M ^ v2
        v2 = ((v2 << 32) | (v2 >> 32)) & M
        v0 = (v0 + v1) & M
        v1 = ((v1 << 13) | (v1 >> 51)) & M ^ v0
        v0 = ((v0 << 32) | (v0 >> 32)) & M
        v2 = (v2 + v3) & M
        v3 = ((v3 << 16) | (v3 >> 48)) & M ^ v2
        v0 = (v0 + v3) & M
        v3 = ((v3 << 21) | (v3 >> 43)) & M ^ v0
        v2 = (v2 + v1) & M
        v1 = ((v1 << 17) | (v1 >> 47)) & M ^ v2
        v2 = ((v2 << 32) | (v2 >> 32)) & M
        v0 ^= m
    v2 ^= 0xFF
    v0 = (v0 + v1) & M
    v1 = ((v1 << 13) | (v1 >> 51)) & M ^ v0
    v0 = ((v0 << 32) | (v0 >> 32)) & M
    v2 = (v2 + v3) & M
    v3 = ((v3 << 16) | (v3 >> 48)) & M ^ v2
    v0 = (v0 + v3) & M
    v3 = ((v3 << 21) | (v3 >> 43)) & M ^ v0
    v2 = (v2 + v1) & M
    v1 = ((v1 << 17) | (v1 >> 47)) & M ^ v2
    v2 = ((v2 << 32) | (v2 >> 32)) & M
    v0 = (v0 + v1) & M
    v1 = ((v1 << 13) | (v1 >> 51)) & M ^ v0
    v0 = ((v0 << 32) | (v0 >> 32)) & M
    v2 = (v2 + v3) & M
    v3 = ((v3 << 16) | (v3 >> 48)) & M ^ v2
    v0 = (v0 + v3) & M
    v3 = ((v3 << 21) | (v3 >> 43)) & M ^ v0
    v2 = (v2 + v1) & M
    v1 = ((v1 << 17) | (v1 >> 47)) & M ^ v2
    v2 = ((v2 << 32) | (v2 >> 32)) & M
    v0 = (v0 + v1) & M
    v1 = ((v1 << 13) | (v1 >> 51)) & M ^ v0
    v0 = ((v0 << 32) | (v0 >> 32)) & M
    v2 = (v2 + v3) & M
    v3 = ((v3 << 16) | (v3 >> 48)) & M ^ v2
    v0 = (v0 + v3) & M
    v3 = ((v3 << 21) | (v3 >> 43)) & M ^ v0
    v2 = (v2 + v1) & M
    v1 = ((v1 << 17) | (v1 >> 47)) & M ^ v2
    v2 = ((v2 << 32) | (v2 >> 32)) & M
    v0 = (v0 + v1) & M
    v1 = ((v1 << 13) | (v1 >> 51)) & M ^ v0
    v0 = ((v0 << 32) | (v0 >> 32)) & M
    v2 = (v2 + v3) & M
    v3 = ((v3 << 16) | (v3 >> 48)) & M ^ v2
    v0 = (v0 + v3) & M
    v3 = ((v3 << 21) | (v3 >> 43)) & M ^ v0
    v2 = (v2 + v1) & M
    v1 = ((v1 << 17) | (v1 >> 47)) & M ^ v2
    v2 = ((v2 << 32) | (v2 >> 32)) & M
    return (v0 ^ v1 ^ v2 ^ v3).to_bytes(8, "little")
