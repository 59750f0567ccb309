"""Flink's KeyGroupRangeAssignment: how keyed records and state map to subtasks.

flowc must place every key exactly where Flink would, so that a flowc plan,
its state layout and a real Flink job agree; these functions reproduce Flink's
integer arithmetic (including Java's 32-bit wrapping and truncating division).
Also holds the pointwise (forward/rescale) subtask wiring, which is the same
kind of index arithmetic, and both rules in compact form: *runs* of consecutive
subtasks that share a block of key groups (or producer subtasks) by the same rule, so
that a plan of 10,000 subtasks need not list them one by one.
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
    "key_group_range_in_run",
    "key_group_runs",
    "pointwise_consumers",
    "pointwise_producers",
    "pointwise_producers_in_run",
    "pointwise_runs",
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


# ------------------------------------------------------------------ runs
#
# A run ``(first, last, low, high)`` says: subtasks ``first..last`` together own the items
# ``low..high`` (key groups, or producer subtasks), shared out by the same rule Flink
# applies to a whole vertex, applied within the run. Runs of equal share sizes are exact
# under that reading (their own rule gives every subtask the same share), and so is the
# one run that covers the whole vertex (it *is* Flink's rule); nothing else is produced.

Run: TypeAlias = tuple[int, int, int, int]


def key_group_range_in_run(run: Run, index: int) -> tuple[int, int]:
    """The inclusive key-group range of subtask ``index`` of a key-group run.

    The ``n`` subtasks of the run share its ``k`` key groups as Flink shares ``maxP`` key
    groups among ``p`` subtasks: subtask ``j`` of the run starts at ``ceil(j * k / n)``.
    """
    first, last, low, high = run
    if not first <= index <= last:
        raise ValueError(f"subtask {index} outside the run {first}..{last}")
    n, k, j = last - first + 1, high - low + 1, index - first
    return low + (j * k + n - 1) // n, low + ((j + 1) * k - 1) // n


def pointwise_producers_in_run(run: Run, index: int) -> range:
    """The producer subtasks consumer subtask ``index`` of a pointwise run reads.

    Within the run, the rule of :func:`pointwise_producers` with the run's ``k`` producers
    as upstream and its ``n`` consumers as downstream: subtask ``j`` of the run starts at
    ``floor(j * k / n)`` and reads up to the next one's start (at least one producer).
    """
    first, last, low, high = run
    if not first <= index <= last:
        raise ValueError(f"subtask {index} outside the run {first}..{last}")
    n, k, j = last - first + 1, high - low + 1, index - first
    start = j * k // n
    return range(low + start, low + max(start + 1, (j + 1) * k // n))


def _equal_runs(boundaries: list[int], owners: list[int], limit: int) -> list[Run] | None:
    """Group consecutive blocks of equal size: block ``b`` spans items
    ``boundaries[b]..boundaries[b + 1] - 1`` and subtasks ``owners[b]..owners[b + 1] - 1``.
    ``None`` when more than ``limit`` runs would be needed."""
    runs: list[Run] = []
    start = 0
    blocks = len(boundaries) - 1
    for block in range(1, blocks + 1):
        if block == blocks or (
            boundaries[block + 1] - boundaries[block] != boundaries[block] - boundaries[block - 1]
            or owners[block + 1] - owners[block] != owners[block] - owners[block - 1]
        ):
            if len(runs) == limit:
                return None
            runs.append(
                (owners[start], owners[block] - 1, boundaries[start], boundaries[block] - 1)
            )
            start = block
    return runs


def key_group_runs(max_parallelism: int, parallelism: int, limit: int) -> list[Run]:
    """The key groups of a keyed vertex as runs (see :func:`key_group_range_in_run`).

    Consecutive subtasks that own equally many key groups form one run, when that takes at
    most ``limit`` runs; otherwise the whole vertex is one run (``maxP`` rarely divides
    evenly: at p 10,000 and maxP 32,768 sizes 3 and 4 alternate, 5,536 runs).
    """
    compute_key_group_range_for_operator_index(max_parallelism, parallelism, 0)  # checks
    whole = (0, parallelism - 1, 0, max_parallelism - 1)
    if max_parallelism % parallelism == 0 or limit < 1:
        return [whole]
    starts = [(i * max_parallelism + parallelism - 1) // parallelism for i in range(parallelism)]
    starts.append(max_parallelism)
    runs = _equal_runs(starts, list(range(parallelism + 1)), limit)
    return runs if runs is not None else [whole]


def pointwise_runs(upstream: int, downstream: int, limit: int) -> list[Run]:
    """A pointwise edge's wiring as runs of consumers (see :func:`pointwise_producers_in_run`).

    Fanning in, consecutive consumers that read equally many producers form one run;
    fanning out, consecutive producers that feed equally many consumers do. At most
    ``limit`` runs, else one run for the whole edge.
    """
    _check_pointwise(upstream, downstream, 0, downstream)
    whole = (0, downstream - 1, 0, upstream - 1)
    if upstream % downstream == 0 or downstream % upstream == 0 or limit < 1:
        return [whole]
    if upstream > downstream:  # block per consumer: its producers
        items = [j * upstream // downstream for j in range(downstream + 1)]
        runs = _equal_runs(items, list(range(downstream + 1)), limit)
    else:  # block per producer: the consumers it feeds
        owners = [(i * downstream + upstream - 1) // upstream for i in range(upstream + 1)]
        runs = _equal_runs(list(range(upstream + 1)), owners, limit)
    return runs if runs is not None else [whole]
