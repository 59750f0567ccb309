"""Flink's KeyGroupRangeAssignment: how keyed records and state map to subtasks.

flowc must place every key exactly where Flink would, so that a flowc plan,
its state layout and a real Flink job agree; these functions reproduce Flink's
integer arithmetic (including Java's 32-bit wrapping and truncating division).
Also holds the pointwise (forward/rescale) subtask wiring, which is the same
kind of index arithmetic.
"""

from __future__ import annotations

import math
import struct
from typing import TypeAlias

from .murmur import murmur_hash_int

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "FlinkRuleError",
    "JavaKey",
    "assign_key_to_parallel_operator",
    "assign_to_key_group",
    "check_parallelism_preconditions",
    "compute_default_max_parallelism",
    "compute_key_group_for_key_hash",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "java_hash_code",
    "pointwise_consumers",
    "pointwise_producers",
    "round_up_to_power_of_two",
]

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_CANONICAL_NAN_BITS = 0x7FF8000000000000
_DOUBLE = struct.Struct("<d")
_U64 = struct.Struct("<Q")
_UTF16_UNIT = struct.Struct("<H")

JavaKey: TypeAlias = "str | int | float | tuple[JavaKey | None, ...]"
"""A Python value standing in for a Java key: String, Boolean, Integer/Long, Double or Tuple."""


class FlinkRuleError(ValueError):
    """A Flink rule rejected the input; the message is Flink's own, verbatim."""


def _to_int32(value: int) -> int:
    """Reinterpret the low 32 bits of ``value`` as a signed Java int."""
    value &= _MASK32
    return value - (1 << 32) if value > _INT32_MAX else value


def round_up_to_power_of_two(x: int) -> int:
    """Return ``MathUtils.roundUpToPowerOfTwo(x)`` with Java int semantics.

    The bit-smearing formula maps 0 to 0 and overflows above 2**30 exactly as
    Java does, so the result is kept as a signed 32-bit value.
    """
    x = (x - 1) & _MASK32
    x |= x >> 1
    x |= x >> 2
    x |= x >> 4
    x |= x >> 8
    x |= x >> 16
    return _to_int32(x + 1)


def check_parallelism_preconditions(parallelism: int) -> None:
    """Reject parallelism outside ``1..32768``, the range key groups can address."""
    if not 0 < parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise FlinkRuleError(f"Operator parallelism not within bounds: {parallelism}")


def compute_default_max_parallelism(parallelism: int) -> int:
    """Return the max parallelism Flink picks when none is set: 1.5x p, as a power of two.

    Clamped to ``[128, 32768]`` so small jobs can still be rescaled later.
    """
    check_parallelism_preconditions(parallelism)
    rounded = round_up_to_power_of_two(parallelism + parallelism // 2)
    return min(
        max(rounded, DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    """Return the key group of a Java ``hashCode``: ``murmurHash(h) % maxP``.

    Re-hashing with murmur spreads poor ``hashCode`` values (e.g. small ints).
    """
    return murmur_hash_int(key_hash) % max_parallelism


def compute_operator_index_for_key_group(
    max_parallelism: int, parallelism: int, key_group: int
) -> int:
    """Return the subtask owning ``key_group``: ``kg * p / maxP`` (contiguous ranges)."""
    return key_group * parallelism // max_parallelism


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> tuple[int, int]:
    """Return the inclusive key-group range ``(start, end)`` owned by one subtask.

    This is the inverse of :func:`compute_operator_index_for_key_group`; the
    ranges of subtasks ``0..p-1`` partition ``[0, maxP - 1]``.
    """
    check_parallelism_preconditions(parallelism)
    check_parallelism_preconditions(max_parallelism)
    if max_parallelism < parallelism:
        raise FlinkRuleError("Maximum parallelism must not be smaller than parallelism.")
    if not 0 <= operator_index < parallelism:
        raise ValueError(f"operator index {operator_index} outside 0..{parallelism - 1}")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return start, end


def _long_hash_code(value: int) -> int:
    """Return ``Long.hashCode``: the two 32-bit halves XORed together."""
    bits = value & _MASK64
    return _to_int32(bits ^ (bits >> 32))


def _string_hash_code(value: str) -> int:
    """Return ``String.hashCode`` over UTF-16 code units (astral chars count twice)."""
    h = 0
    data = value.encode("utf-16-le", "surrogatepass")
    for (unit,) in _UTF16_UNIT.iter_unpack(data):
        h = (31 * h + unit) & _MASK32
    return _to_int32(h)


def java_hash_code(value: JavaKey | None) -> int:
    """Return the Java ``hashCode()`` Flink would see for this key, as a signed int.

    ``bool`` is Boolean (1231/1237); ``int`` is Integer when it fits 32 bits and
    Long otherwise; ``float`` is Double (NaN canonicalised like
    ``doubleToLongBits``); ``tuple`` is a Flink Tuple (``31 * h + h(f)`` folded left,
    null fields hash to 0). A ``None`` key is rejected the way Flink rejects it.
    """
    if value is None:
        raise FlinkRuleError("Assigned key must not be null!")
    if isinstance(value, str):
        return _string_hash_code(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if _INT32_MIN <= value <= _INT32_MAX:
            return value
        if _INT64_MIN <= value <= _INT64_MAX:
            return _long_hash_code(value)
        raise ValueError(f"integer key {value} does not fit a Java long")
    if isinstance(value, float):
        if math.isnan(value):
            return _long_hash_code(_CANONICAL_NAN_BITS)
        (bits,) = _U64.unpack(_DOUBLE.pack(value))
        return _long_hash_code(bits)
    if isinstance(value, tuple):
        h = 0
        for field in value:
            field_hash = 0 if field is None else java_hash_code(field)
            h = (31 * h + field_hash) & _MASK32
        return _to_int32(h)
    raise TypeError(f"no Java key counterpart for {type(value).__name__}")


def assign_to_key_group(key: JavaKey | None, max_parallelism: int) -> int:
    """Return the key group of ``key`` under ``max_parallelism`` key groups."""
    if key is None:
        raise FlinkRuleError("Assigned key must not be null!")
    return compute_key_group_for_key_hash(java_hash_code(key), max_parallelism)


def assign_key_to_parallel_operator(
    key: JavaKey | None, max_parallelism: int, parallelism: int
) -> int:
    """Return the subtask index a keyed (HASH) exchange sends ``key`` to."""
    if key is None:
        raise FlinkRuleError("Assigned key must not be null!")
    return compute_operator_index_for_key_group(
        max_parallelism, parallelism, assign_to_key_group(key, max_parallelism)
    )


def _check_pointwise(upstream: int, downstream: int, index: int, side: int) -> None:
    """Reject wiring questions that have no answer (bad parallelism or subtask index)."""
    if upstream < 1 or downstream < 1:
        raise ValueError(f"parallelism must be positive, got {upstream} -> {downstream}")
    if not 0 <= index < side:
        raise ValueError(f"subtask index {index} outside 0..{side - 1}")


def pointwise_consumers(upstream: int, downstream: int, producer: int) -> range:
    """Return the consumer subtasks that producer subtask ``producer`` feeds on a pointwise edge.

    Follows ``VertexInputInfoComputationUtils``: with more producers than
    consumers each producer feeds exactly one consumer; with fewer, each
    producer feeds a contiguous block of consumers.
    """
    _check_pointwise(upstream, downstream, producer, upstream)
    if upstream == downstream:
        return range(producer, producer + 1)
    if upstream > downstream:
        consumer = ((producer + 1) * downstream + upstream - 1) // upstream - 1
        return range(consumer, consumer + 1)
    start = (producer * downstream + upstream - 1) // upstream
    end = ((producer + 1) * downstream + upstream - 1) // upstream
    return range(start, end)


def pointwise_producers(upstream: int, downstream: int, consumer: int) -> range:
    """Return the producer subtasks that consumer subtask ``consumer`` reads on a pointwise edge.

    The inverse of :func:`pointwise_consumers`: a contiguous block of producers
    when fanning in, exactly one producer when fanning out.
    """
    _check_pointwise(upstream, downstream, consumer, downstream)
    if upstream == downstream:
        return range(consumer, consumer + 1)
    if upstream > downstream:
        return range(consumer * upstream // downstream, (consumer + 1) * upstream // downstream)
    producer = consumer * upstream // downstream
    return range(producer, producer + 1)
