"""MurmurHash3 variants with Flink's exact bit semantics, in pure Python.

Flink derives operator IDs from Guava's ``murmur3_128(0)`` and key groups from
``MathUtils.murmurHash(int)``; both must match bit for bit, so the wrapping
arithmetic of the JVM is emulated with explicit masks.
"""

from __future__ import annotations

import struct

__all__ = ["murmur3_x64_128", "murmur_hash_int"]

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_TWO_LE_U64 = struct.Struct("<QQ")


def murmur3_x64_128(data: bytes, seed: int = 0) -> bytes:
    """Return MurmurHash3_x64_128 of ``data`` as h1 (LE) followed by h2 (LE).

    This is the byte layout of Guava's ``murmur3_128(seed).hashBytes(data).asBytes()``,
    which Flink uses for operator and vertex IDs. ``seed`` is a Java ``int`` as in
    Guava: negative seeds are sign-extended to 64 bits. A compile hashes every operator
    and vertex, so the constants are locals and the final mix is written out in place.
    """
    if not -(1 << 31) <= seed < (1 << 31):
        raise ValueError(f"seed must fit a Java int, got {seed}")
    mask, c1, c2 = _MASK64, _C1, _C2
    h1 = h2 = seed & mask
    length = len(data)
    tail_start = length - (length & 15)
    if tail_start:
        for k1, k2 in _TWO_LE_U64.iter_unpack(data[:tail_start]):
            k1 = (k1 * c1) & mask
            h1 ^= ((((k1 << 31) | (k1 >> 33)) & mask) * c2) & mask
            h1 = ((h1 << 27) | (h1 >> 37)) & mask
            h1 = ((h1 + h2) * 5 + 0x52DCE729) & mask
            k2 = (k2 * c2) & mask
            h2 ^= ((((k2 << 33) | (k2 >> 31)) & mask) * c1) & mask
            h2 = ((h2 << 31) | (h2 >> 33)) & mask
            h2 = ((h2 + h1) * 5 + 0x38495AB5) & mask
    if tail_start != length:
        # A zero tail word mixes to zero, so skipping it is equivalent to the
        # reference's length-driven switch.
        k1 = int.from_bytes(data[tail_start : tail_start + 8], "little")
        k2 = int.from_bytes(data[tail_start + 8 : length], "little")
        if k2:
            k2 = (k2 * c2) & mask
            h2 ^= ((((k2 << 33) | (k2 >> 31)) & mask) * c1) & mask
        if k1:
            k1 = (k1 * c1) & mask
            h1 ^= ((((k1 << 31) | (k1 >> 33)) & mask) * c2) & mask
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    # the final avalanche (fmix64) of each half: spreads every input bit
    h1 ^= h1 >> 33
    h1 = (h1 * 0xFF51AFD7ED558CCD) & mask
    h1 ^= h1 >> 33
    h1 = (h1 * 0xC4CEB9FE1A85EC53) & mask
    h1 ^= h1 >> 33
    h2 ^= h2 >> 33
    h2 = (h2 * 0xFF51AFD7ED558CCD) & mask
    h2 ^= h2 >> 33
    h2 = (h2 * 0xC4CEB9FE1A85EC53) & mask
    h2 ^= h2 >> 33
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    return _TWO_LE_U64.pack(h1, h2)


def murmur_hash_int(code: int) -> int:
    """Return Flink's ``MathUtils.murmurHash(int)``: a non-negative int used for key groups.

    It is murmur3_32 (seed 0) of the int's four little-endian bytes, made
    non-negative the Java way: ``abs`` except that ``Integer.MIN_VALUE`` maps to 0.
    ``code`` is taken modulo 2**32, like a Java int.
    """
    k = (code * 0xCC9E2D51) & _MASK32
    k = ((k << 15) | (k >> 17)) & _MASK32
    k = (k * 0x1B873593) & _MASK32
    h = ((k << 13) | (k >> 19)) & _MASK32
    h = (h * 5 + 0xE6546B64) & _MASK32
    h ^= 4
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    if h < 0x80000000:
        return h
    if h == 0x80000000:
        return 0
    return 0x100000000 - h
