"""Tests for flowc.flink: Flink's hashing, key-group and pointwise-wiring arithmetic.

Expected values come from the Flink semantics spec §3/§4/§6 (rules with worked values),
Guava's published MurmurHash3 test vectors and Java's documented hashCode rules.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowc.flink.hashing import EdgeRef, hash_stream_nodes, to_hex
from flowc.flink.keygroups import (
    DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
    UPPER_BOUND_MAX_PARALLELISM,
    FlinkRuleError,
    JavaKey,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    check_parallelism_preconditions,
    compute_default_max_parallelism,
    compute_key_group_for_key_hash,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    java_hash_code,
    pointwise_consumers,
    pointwise_producers,
    round_up_to_power_of_two,
)
from flowc.flink.murmur import murmur3_x64_128, murmur_hash_int

M32 = 0xFFFFFFFF


# --- murmur3_x64_128 -------------------------------------------------------------------------


def test_murmur3_128_spec_vector() -> None:
    assert murmur3_x64_128(b"foo").hex() == "6145f501578671e2877dba2be487af7e"


@pytest.mark.parametrize(
    ("seed", "h1", "h2", "text"),
    [
        (0, 0x629942693E10F867, 0x92DB0B82BAEB5347, "hell"),
        (1, 0xA78DDFF5ADAE8D10, 0x128900EF20900135, "hello"),
        (2, 0x8A486B23F422E826, 0xF962A2C58947765F, "hello "),
        (3, 0x2EA59F466F6BED8C, 0xC610990ACC428A17, "hello w"),
        (4, 0x79F6305A386C572C, 0x46305AED3483B94E, "hello wo"),
        (5, 0xC2219D213EC1F1B5, 0xA1D8E2E0A52785BD, "hello wor"),
        (0, 0xE34BBC7BBC071B6C, 0x7A433CA9C49A9347, "The quick brown fox jumps over the lazy dog"),
        (0, 0x658CA970FF85269A, 0x43FEE3EAA68E5C3E, "The quick brown fox jumps over the lazy cog"),
    ],
)
def test_murmur3_128_guava_known_values(seed: int, h1: int, h2: int, text: str) -> None:
    assert murmur3_x64_128(text.encode("ascii"), seed) == struct.pack("<QQ", h1, h2)


def test_murmur3_128_smhasher_verification_value() -> None:
    """SMHasher's self-check covers every tail length 0..255 and many seeds at once."""
    key = bytes(range(256))
    digests = b"".join(murmur3_x64_128(key[:i], 256 - i) for i in range(256))
    final = murmur3_x64_128(digests, 0)
    assert int.from_bytes(final[:4], "little") == 0x6384BA69


def test_murmur3_128_negative_seed_is_sign_extended_like_guava() -> None:
    assert murmur3_x64_128(b"x", -1) != murmur3_x64_128(b"x", 0xFFFF)
    with pytest.raises(ValueError, match="Java int"):
        murmur3_x64_128(b"x", 1 << 31)


# --- MathUtils.murmurHash(int) ---------------------------------------------------------------


def test_murmur_hash_int_spec_value() -> None:
    assert murmur_hash_int(1) == 68075478


def _inverse_murmur_hash_body(target: int) -> int:
    """Return the int whose pre-abs murmur value is ``target`` (every step is invertible)."""

    def unxorshift(h: int, shift: int) -> int:
        result = h
        for _ in range(32 // shift):
            result = h ^ (result >> shift)
        return result & M32

    def rotr(x: int, r: int) -> int:
        return ((x >> r) | (x << (32 - r))) & M32

    h = unxorshift(target, 16)
    h = (h * pow(0xC2B2AE35, -1, 1 << 32)) & M32
    h = unxorshift(h, 13)
    h = (h * pow(0x85EBCA6B, -1, 1 << 32)) & M32
    h = unxorshift(h, 16)
    h ^= 4
    h = ((h - 0xE6546B64) * pow(5, -1, 1 << 32)) & M32
    k = rotr(h, 13)
    k = (k * pow(0x1B873593, -1, 1 << 32)) & M32
    k = rotr(k, 15)
    return (k * pow(0xCC9E2D51, -1, 1 << 32)) & M32


def test_murmur_hash_int_min_value_maps_to_zero() -> None:
    assert murmur_hash_int(_inverse_murmur_hash_body(0x80000000)) == 0
    assert murmur_hash_int(_inverse_murmur_hash_body(0x80000001)) == 0x7FFFFFFF
    assert murmur_hash_int(_inverse_murmur_hash_body(0xFFFFFFFF)) == 1
    assert murmur_hash_int(_inverse_murmur_hash_body(12345)) == 12345


@given(st.integers(min_value=-(1 << 40), max_value=1 << 40))
def test_murmur_hash_int_is_non_negative_and_wraps_like_java_int(code: int) -> None:
    result = murmur_hash_int(code)
    assert 0 <= result <= 0x7FFFFFFF
    assert murmur_hash_int(code + (1 << 32)) == result


# --- Java hashCode ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("A", 65),
        ("B", 66),
        ("hello", 99162322),
        ("", 0),
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
        (True, 1231),
        (False, 1237),
        (0, 0),
        (-1, -1),
        (2**31 - 1, 2**31 - 1),
        (-(2**31), -(2**31)),
        (2**31, -(2**31)),
        (2**32, 1),
        (-(2**31) - 1, -(2**31)),
        (2**63 - 1, -(2**31)),
        (1.0, 1072693248),
        (0.0, 0),
        (-0.0, -(2**31)),
        (float("nan"), 2146959360),
        (("a", 1), 31 * 97 + 1),
        ((None, 1), 1),
        (("a", None), 31 * 97),
        ((1, 2, 3), 31 * (31 * 1 + 2) + 3),
        ((7,), 7),
        ((), 0),
        ((("a", 1), 2), 31 * (31 * 97 + 1) + 2),
    ],
)
def test_java_hash_code(value: JavaKey, expected: int) -> None:
    assert java_hash_code(value) == expected


def test_java_hash_code_string_wraps_to_int32() -> None:
    text = "a fairly long string that overflows a java int many times over"
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & M32
    expected = h - (1 << 32) if h >= 1 << 31 else h
    assert java_hash_code(text) == expected
    assert -(2**31) <= expected < 2**31


def test_java_hash_code_rejects_null_and_unsupported_values() -> None:
    with pytest.raises(FlinkRuleError, match=r"^Assigned key must not be null!$"):
        java_hash_code(None)
    with pytest.raises(ValueError, match="Java long"):
        java_hash_code(2**63)
    with pytest.raises(TypeError):
        java_hash_code([1, 2])  # type: ignore[arg-type]


# --- key groups ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "key_group"),
    [
        ("A", 104),
        ("B", 17),
        ("hello", 35),
        (0, 94),
        (1, 86),
        (2, 127),
        (3, 113),
        (42, 29),
        (-1, 80),
    ],
)
def test_assign_to_key_group_at_128(key: str | int, key_group: int) -> None:
    assert assign_to_key_group(key, 128) == key_group


@pytest.mark.parametrize(
    ("key", "operators"),
    [("A", {1: 0, 2: 1, 4: 3, 8: 6}), ("B", {1: 0, 2: 0, 4: 0, 8: 1})],
)
def test_assign_key_to_parallel_operator_at_128(key: str, operators: dict[int, int]) -> None:
    for parallelism, operator in operators.items():
        assert assign_key_to_parallel_operator(key, 128, parallelism) == operator


def test_hello_at_max_parallelism_10() -> None:
    assert assign_to_key_group("hello", 10) == 9
    assert assign_key_to_parallel_operator("hello", 10, 5) == 4


def test_compute_key_group_for_key_hash() -> None:
    assert compute_key_group_for_key_hash(123456789, 10) == 9
    assert compute_key_group_for_key_hash(99162322, 128) == 35


def test_null_key_is_rejected_with_flinks_message() -> None:
    message = r"^Assigned key must not be null!$"
    with pytest.raises(FlinkRuleError, match=message):
        assign_to_key_group(None, 128)
    with pytest.raises(FlinkRuleError, match=message):
        assign_key_to_parallel_operator(None, 128, 4)


@pytest.mark.parametrize(
    ("max_parallelism", "parallelism", "ranges"),
    [
        (128, 4, [(0, 31), (32, 63), (64, 95), (96, 127)]),
        (128, 3, [(0, 42), (43, 85), (86, 127)]),
        (10, 3, [(0, 3), (4, 6), (7, 9)]),
        (10, 5, [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]),
    ],
)
def test_key_group_ranges(
    max_parallelism: int, parallelism: int, ranges: list[tuple[int, int]]
) -> None:
    actual = [
        compute_key_group_range_for_operator_index(max_parallelism, parallelism, i)
        for i in range(parallelism)
    ]
    assert actual == ranges


def test_key_group_range_errors() -> None:
    with pytest.raises(
        FlinkRuleError, match=r"^Maximum parallelism must not be smaller than parallelism\.$"
    ):
        compute_key_group_range_for_operator_index(4, 8, 0)
    with pytest.raises(FlinkRuleError, match=r"^Operator parallelism not within bounds: 0$"):
        compute_key_group_range_for_operator_index(128, 0, 0)
    with pytest.raises(FlinkRuleError, match=r"^Operator parallelism not within bounds: 40000$"):
        compute_key_group_range_for_operator_index(0, 40000, 0)
    with pytest.raises(FlinkRuleError, match=r"^Operator parallelism not within bounds: 0$"):
        compute_key_group_range_for_operator_index(0, 1, 0)
    with pytest.raises(ValueError, match="operator index"):
        compute_key_group_range_for_operator_index(128, 4, 4)


def test_constants() -> None:
    assert DEFAULT_LOWER_BOUND_MAX_PARALLELISM == 128
    assert UPPER_BOUND_MAX_PARALLELISM == 32768


@pytest.mark.parametrize(
    ("x", "expected"),
    [(0, 0), (1, 1), (2, 2), (3, 4), (127, 128), (129, 256), (2**30, 2**30), (2**30 + 1, -(2**31))],
)
def test_round_up_to_power_of_two(x: int, expected: int) -> None:
    assert round_up_to_power_of_two(x) == expected


@pytest.mark.parametrize(
    ("parallelism", "expected"),
    [
        (1, 128),
        (2, 128),
        (64, 128),
        (85, 128),
        (86, 256),
        (100, 256),
        (128, 256),
        (1000, 2048),
        (21845, 32768),
        (21846, 32768),
        (32768, 32768),
    ],
)
def test_compute_default_max_parallelism(parallelism: int, expected: int) -> None:
    assert compute_default_max_parallelism(parallelism) == expected


@pytest.mark.parametrize("parallelism", [0, -1, 32769])
def test_parallelism_bounds(parallelism: int) -> None:
    message = f"^Operator parallelism not within bounds: {parallelism}$"
    with pytest.raises(FlinkRuleError, match=message):
        check_parallelism_preconditions(parallelism)
    with pytest.raises(FlinkRuleError, match=message):
        compute_default_max_parallelism(parallelism)


def test_flink_rule_error_is_a_value_error() -> None:
    assert issubclass(FlinkRuleError, ValueError)


@st.composite
def parallelism_pairs(draw: st.DrawFn) -> tuple[int, int]:
    max_parallelism = draw(st.integers(min_value=1, max_value=UPPER_BOUND_MAX_PARALLELISM))
    parallelism = draw(st.integers(min_value=1, max_value=max_parallelism))
    return max_parallelism, parallelism


@settings(max_examples=200, deadline=None)
@given(parallelism_pairs(), st.lists(st.integers(min_value=0), min_size=1, max_size=50))
def test_key_group_ranges_partition_all_key_groups(
    pair: tuple[int, int], samples: list[int]
) -> None:
    max_parallelism, parallelism = pair
    ranges = [
        compute_key_group_range_for_operator_index(max_parallelism, parallelism, i)
        for i in range(parallelism)
    ]
    assert ranges[0][0] == 0
    assert ranges[-1][1] == max_parallelism - 1
    for (_, end), (next_start, _) in itertools.pairwise(ranges):
        assert next_start == end + 1
    for i, (start, end) in enumerate(ranges):
        assert start <= end
        assert compute_operator_index_for_key_group(max_parallelism, parallelism, start) == i
        assert compute_operator_index_for_key_group(max_parallelism, parallelism, end) == i
    starts = [start for start, _ in ranges]
    for sample in samples:
        key_group = sample % max_parallelism
        owner = bisect.bisect_right(starts, key_group) - 1
        assert (
            compute_operator_index_for_key_group(max_parallelism, parallelism, key_group) == owner
        )


@given(
    parallelism_pairs(),
    st.one_of(st.text(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.booleans()),
)
def test_assigned_operator_owns_the_keys_group(pair: tuple[int, int], key: str | int) -> None:
    max_parallelism, parallelism = pair
    key_group = assign_to_key_group(key, max_parallelism)
    assert 0 <= key_group < max_parallelism
    operator = assign_key_to_parallel_operator(key, max_parallelism, parallelism)
    start, end = compute_key_group_range_for_operator_index(max_parallelism, parallelism, operator)
    assert start <= key_group <= end


# --- pointwise wiring ------------------------------------------------------------------------


def test_pointwise_equal_parallelism_is_one_to_one() -> None:
    for i in range(3):
        assert pointwise_consumers(3, 3, i) == range(i, i + 1)
        assert pointwise_producers(3, 3, i) == range(i, i + 1)


def test_pointwise_rescale_2_to_4() -> None:
    assert [list(pointwise_consumers(2, 4, i)) for i in range(2)] == [[0, 1], [2, 3]]
    assert [list(pointwise_producers(2, 4, j)) for j in range(4)] == [[0], [0], [1], [1]]


def test_pointwise_rescale_4_to_2() -> None:
    assert [list(pointwise_producers(4, 2, j)) for j in range(2)] == [[0, 1], [2, 3]]
    assert [list(pointwise_consumers(4, 2, i)) for i in range(4)] == [[0], [0], [1], [1]]


def test_pointwise_rescale_5_to_8() -> None:
    assert [len(pointwise_consumers(5, 8, i)) for i in range(5)] == [2, 2, 1, 2, 1]
    assert [list(pointwise_consumers(5, 8, i)) for i in range(5)] == [
        [0, 1],
        [2, 3],
        [4],
        [5, 6],
        [7],
    ]


def test_pointwise_rejects_bad_indexes() -> None:
    with pytest.raises(ValueError):
        pointwise_consumers(2, 4, 2)
    with pytest.raises(ValueError):
        pointwise_producers(2, 4, 4)
    with pytest.raises(ValueError):
        pointwise_consumers(0, 4, 0)


@given(st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=300))
def test_pointwise_wiring_is_consistent_and_complete(upstream: int, downstream: int) -> None:
    forward = {
        (i, j) for i in range(upstream) for j in pointwise_consumers(upstream, downstream, i)
    }
    backward = {
        (i, j) for j in range(downstream) for i in pointwise_producers(upstream, downstream, j)
    }
    assert forward == backward
    assert {i for i, _ in forward} == set(range(upstream))
    assert {j for _, j in forward} == set(range(downstream))
    if upstream >= downstream:
        assert all(len(pointwise_consumers(upstream, downstream, i)) == 1 for i in range(upstream))
    if upstream <= downstream:
        assert all(
            len(pointwise_producers(upstream, downstream, j)) == 1 for j in range(downstream)
        )


# --- StreamGraphHasherV2 ---------------------------------------------------------------------

SOURCE_UID_HASH = "e5a72f353fc1e6bbf3bd96a41384998c"
MAP_UID_HASH = "23ab3a59b17e9c45f95cff4c728611fc"
FIRST_NODE_UNCHAINED = "bc764cd8ddf7a0cff126f51c16239658"
FIRST_NODE_ONE_CHAINED = "cbc357ccb763df2852fee8c4fc7d55f2"
CHAINED_MAP_AFTER_SOURCE = "7df19f87deec5680128845fd9a6ca18d"


def _mix(own: bytes, *inputs: bytes) -> bytes:
    """The documented input mixing, byte by byte: h = h*37 XOR o (low 8 bits)."""
    out = bytearray(own)
    for other in inputs:
        for j in range(16):
            out[j] = (out[j] * 37 ^ other[j]) & 0xFF
    return bytes(out)


def _edges(*pairs: tuple[int, int]) -> tuple[dict[int, list[EdgeRef]], dict[int, list[EdgeRef]]]:
    out_edges: dict[int, list[EdgeRef]] = {}
    in_edges: dict[int, list[EdgeRef]] = {}
    for src, dst in pairs:
        edge = EdgeRef(src, dst)
        out_edges.setdefault(src, []).append(edge)
        in_edges.setdefault(dst, []).append(edge)
    return out_edges, in_edges


def _always(_: EdgeRef) -> bool:
    return True


def _never(_: EdgeRef) -> bool:
    return False


def test_to_hex() -> None:
    assert to_hex(bytes([0, 1, 0xAB, 0xFF])) == "0001abff"


def test_single_node_without_chained_outputs() -> None:
    hashes = hash_stream_nodes([1], {}, {}, {}, _always)
    assert {n: to_hex(h) for n, h in hashes.items()} == {1: FIRST_NODE_UNCHAINED}


def test_source_chained_to_map() -> None:
    out_edges, in_edges = _edges((1, 2))
    hashes = hash_stream_nodes([1], out_edges, in_edges, {}, _always)
    assert to_hex(hashes[1]) == FIRST_NODE_ONE_CHAINED
    assert to_hex(hashes[2]) == CHAINED_MAP_AFTER_SOURCE


def test_unchained_edge_changes_only_the_producer_local_hash() -> None:
    out_edges, in_edges = _edges((1, 2))
    hashes = hash_stream_nodes([1], out_edges, in_edges, {}, _never)
    assert to_hex(hashes[1]) == FIRST_NODE_UNCHAINED
    assert hashes[2] == _mix(murmur3_x64_128(struct.pack("<i", 1)), hashes[1])
    assert to_hex(hashes[2]) != CHAINED_MAP_AFTER_SOURCE


def test_user_specified_uids() -> None:
    out_edges, in_edges = _edges((1, 2))
    uids = {1: "source", 2: "map"}
    hashes = hash_stream_nodes([1], out_edges, in_edges, uids, _always)
    assert to_hex(hashes[1]) == SOURCE_UID_HASH
    assert to_hex(hashes[2]) == MAP_UID_HASH


def test_three_node_chain_with_uid_source() -> None:
    out_edges, in_edges = _edges((1, 2), (2, 3))
    hashes = hash_stream_nodes([1], out_edges, in_edges, {1: "source", 3: None}, _always)
    assert to_hex(hashes[1]) == SOURCE_UID_HASH
    map_hash = _mix(murmur3_x64_128(struct.pack("<ii", 1, 1)), hashes[1])
    sink_hash = _mix(murmur3_x64_128(struct.pack("<i", 2)), map_hash)
    assert hashes[2] == map_hash
    assert hashes[3] == sink_hash
    assert list(hashes) == [1, 2, 3]


def test_three_node_chain_without_uids_extends_worked_values() -> None:
    out_edges, in_edges = _edges((1, 2), (2, 3))
    hashes = hash_stream_nodes([1], out_edges, in_edges, {}, _always)
    assert to_hex(hashes[1]) == FIRST_NODE_ONE_CHAINED
    assert to_hex(hashes[2]) != CHAINED_MAP_AFTER_SOURCE
    assert hashes[2] == _mix(murmur3_x64_128(struct.pack("<ii", 1, 1)), hashes[1])


def test_position_not_node_id_drives_the_hash() -> None:
    out_edges, in_edges = _edges((10, 20))
    renumbered = hash_stream_nodes([10], out_edges, in_edges, {}, _always)
    assert to_hex(renumbered[10]) == FIRST_NODE_ONE_CHAINED
    assert to_hex(renumbered[20]) == CHAINED_MAP_AFTER_SOURCE


def test_identical_sources_get_distinct_hashes_in_ascending_id_order() -> None:
    hashes = hash_stream_nodes([7, 3], {}, {}, {}, _always)
    assert list(hashes) == [3, 7]
    assert to_hex(hashes[3]) == FIRST_NODE_UNCHAINED
    assert hashes[7] == murmur3_x64_128(struct.pack("<i", 1))


def test_node_waiting_for_a_later_input_is_postponed() -> None:
    # Sources 1 and 2; 1 -> 4 directly, 2 -> 3 -> 4. Node 4 is dequeued before 3 is hashed.
    out_edges, in_edges = _edges((1, 4), (2, 3), (3, 4))
    hashes = hash_stream_nodes([1, 2], out_edges, in_edges, {}, _never)
    assert list(hashes) == [1, 2, 3, 4]
    assert hashes[3] == _mix(murmur3_x64_128(struct.pack("<i", 2)), hashes[2])
    assert hashes[4] == _mix(murmur3_x64_128(struct.pack("<i", 3)), hashes[1], hashes[3])


def test_in_edge_order_matters() -> None:
    out_edges, in_edges = _edges((1, 3), (2, 3))
    first = hash_stream_nodes([1, 2], out_edges, in_edges, {}, _never)
    in_edges[3].reverse()
    second = hash_stream_nodes([1, 2], out_edges, in_edges, {}, _never)
    assert first[3] != second[3]
    assert second[3] == _mix(murmur3_x64_128(struct.pack("<i", 2)), first[2], first[1])


def test_uid_node_does_not_wait_for_inputs() -> None:
    out_edges, in_edges = _edges((1, 4), (2, 3), (3, 4))
    hashes = hash_stream_nodes([1, 2], out_edges, in_edges, {4: "map"}, _never)
    assert list(hashes) == [1, 2, 4, 3]
    assert to_hex(hashes[4]) == MAP_UID_HASH


def test_duplicate_uid_is_a_collision() -> None:
    out_edges, in_edges = _edges((1, 2))
    message = (
        'Hash collision on user-specified ID "dup". Most likely cause is a non-unique ID. '
        "Please check that all IDs specified via `uid(String)` are unique."
    )
    with pytest.raises(FlinkRuleError) as excinfo:
        hash_stream_nodes([1], out_edges, in_edges, {1: "dup", 2: "dup"}, _always)
    assert str(excinfo.value) == message


def test_unreachable_and_cyclic_nodes_are_not_hashed() -> None:
    out_edges, in_edges = _edges((1, 2), (3, 4), (4, 3))
    hashes = hash_stream_nodes([1], out_edges, in_edges, {}, _always)
    assert set(hashes) == {1, 2}


@dataclass(frozen=True)
class _TaggedEdge:
    source_id: int
    target_id: int
    forward: bool


def test_caller_edge_type_reaches_is_chainable() -> None:
    a = _TaggedEdge(1, 2, forward=True)
    b = _TaggedEdge(1, 3, forward=False)
    hashes = hash_stream_nodes([1], {1: [a, b]}, {2: [a], 3: [b]}, {}, lambda edge: edge.forward)
    assert to_hex(hashes[1]) == FIRST_NODE_ONE_CHAINED
