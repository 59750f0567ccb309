"""Plans far larger than this machine: the physical plan's runs (docs/plans.md).

The compact form must expand to exactly Flink's per-subtask values (key groups, pointwise
wiring, slots), and a plan of 20 vertices at parallelism 10,000 must render to text and
JSON of bounded size.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowc
from flowc.flink.keygroups import (
    UPPER_BOUND_MAX_PARALLELISM,
    compute_key_group_range_for_operator_index,
    key_group_range_in_run,
    key_group_runs,
    pointwise_producers,
    pointwise_producers_in_run,
    pointwise_runs,
)
from flowc.graph.physical import EQUAL_SHARE_RUNS, PhysicalPlan
from tests.helpers.topologies import SETTINGS, compile_or_reject, programs
from tests.helpers.topologies import Program as GeneratedProgram

# ------------------------------------------------------------------ expanding the JSON
# Written from docs/plans.md alone, not from flowc's helpers.


def expand_key_groups(runs: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Subtask a+j of a run owns low + ceil(j*k/n) .. low + ceil((j+1)*k/n) - 1."""
    ranges = []
    for run in runs:
        (a, b), (low, high) = run["subtasks"], run["key_groups"]
        assert a == len(ranges)
        n, k = b - a + 1, high - low + 1
        ranges.extend((low + -(-j * k // n), low + -(-(j + 1) * k // n) - 1) for j in range(n))
    return ranges


def expand_producers(runs: list[dict[str, Any]], pointwise: bool) -> list[tuple[int, int]]:
    """ALL_TO_ALL: every subtask reads low..high. POINTWISE: subtask a+j reads from
    low + floor(j*k/n) up to the next subtask's start - 1, at least one."""
    ranges = []
    for run in runs:
        (a, b), (low, high) = run["subtasks"], run["producers"]
        assert a == len(ranges)
        n, k = b - a + 1, high - low + 1
        for j in range(n):
            start = j * k // n
            end = max(start, (j + 1) * k // n - 1) if pointwise else k - 1
            ranges.append((low + start, low + end) if pointwise else (low, high))
    return ranges


def expand_slots(runs: list[dict[str, Any]]) -> list[int]:
    slots: list[int] = []
    for run in runs:
        (a, b), (first, last), step = run["subtasks"], run["slots"], run["step"]
        assert a == len(slots)
        slots.extend(first + j * step for j in range(b - a + 1))
        assert slots[-1] == last
    return slots


# ------------------------------------------------------------------ key groups


def _flink_ranges(max_parallelism: int, parallelism: int) -> list[tuple[int, int]]:
    return [
        compute_key_group_range_for_operator_index(max_parallelism, parallelism, i)
        for i in range(parallelism)
    ]


def _runs_as_json(runs: list[tuple[int, int, int, int]], key: str) -> list[dict[str, Any]]:
    return [{"subtasks": [a, b], key: [low, high]} for a, b, low, high in runs]


@st.composite
def parallelism_pairs(draw: st.DrawFn) -> tuple[int, int]:
    max_parallelism = draw(
        st.one_of(
            st.integers(min_value=1, max_value=300),
            st.integers(min_value=1, max_value=UPPER_BOUND_MAX_PARALLELISM),
            st.sampled_from([128, 256, 4096, UPPER_BOUND_MAX_PARALLELISM]),
        )
    )
    parallelism = draw(
        st.one_of(
            st.integers(min_value=1, max_value=min(max_parallelism, 300)),
            st.integers(min_value=1, max_value=max_parallelism),
            st.sampled_from([1, max_parallelism, max(1, max_parallelism // 3)]),
        )
    )
    return max_parallelism, parallelism


@settings(max_examples=300, deadline=None)
@given(parallelism_pairs(), st.sampled_from([0, 1, 2, 3, EQUAL_SHARE_RUNS, 10_000]))
def test_key_group_runs_expand_to_flinks_ranges(pair: tuple[int, int], limit: int) -> None:
    max_parallelism, parallelism = pair
    runs = key_group_runs(max_parallelism, parallelism, limit)
    assert 1 <= len(runs) <= max(limit, 1)
    assert expand_key_groups(_runs_as_json(runs, "key_groups")) == _flink_ranges(
        max_parallelism, parallelism
    )
    for run in runs:  # flowc's own reading of a run agrees
        for index in (run[0], (run[0] + run[1]) // 2, run[1]):
            assert key_group_range_in_run(run, index) == compute_key_group_range_for_operator_index(
                max_parallelism, parallelism, index
            )


@pytest.mark.parametrize(
    ("max_parallelism", "parallelism", "expected"),
    [
        (128, 4, [(0, 3, 0, 127)]),
        (128, 3, [(0, 1, 0, 85), (2, 2, 86, 127)]),
        (10, 3, [(0, 0, 0, 3), (1, 2, 4, 9)]),
        (32768, 32768, [(0, 32767, 0, 32767)]),
        (32768, 1, [(0, 0, 0, 32767)]),
        (1, 1, [(0, 0, 0, 0)]),
        (32768, 10000, [(0, 9999, 0, 32767)]),  # 3 and 4 alternate: 5,536 equal runs
        (10001, 10000, [(0, 0, 0, 1), (1, 9999, 2, 10000)]),
    ],
)
def test_key_group_runs(
    max_parallelism: int, parallelism: int, expected: list[tuple[int, int, int, int]]
) -> None:
    assert key_group_runs(max_parallelism, parallelism, EQUAL_SHARE_RUNS) == expected
    assert expand_key_groups(_runs_as_json(expected, "key_groups")) == _flink_ranges(
        max_parallelism, parallelism
    )


# ------------------------------------------------------------------ pointwise wiring


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=400),
    st.integers(min_value=1, max_value=400),
    st.sampled_from([0, 1, 2, EQUAL_SHARE_RUNS, 10_000]),
)
def test_pointwise_runs_expand_to_flinks_wiring(upstream: int, downstream: int, limit: int) -> None:
    runs = pointwise_runs(upstream, downstream, limit)
    assert 1 <= len(runs) <= max(limit, 1)
    expected = [
        (span.start, span.stop - 1)
        for span in (pointwise_producers(upstream, downstream, i) for i in range(downstream))
    ]
    assert expand_producers(_runs_as_json(runs, "producers"), pointwise=True) == expected
    for run in runs:
        for index in range(run[0], run[1] + 1):
            assert pointwise_producers_in_run(run, index) == pointwise_producers(
                upstream, downstream, index
            )


def test_pointwise_runs_examples() -> None:
    # 5 -> 8: producers feed 2, 2, 1, 2, 1 consumers (flink-semantics.md §6)
    assert pointwise_runs(5, 8, EQUAL_SHARE_RUNS) == [
        (0, 3, 0, 1),
        (4, 4, 2, 2),
        (5, 6, 3, 3),
        (7, 7, 4, 4),
    ]
    assert pointwise_runs(4, 2, EQUAL_SHARE_RUNS) == [(0, 1, 0, 3)]
    assert pointwise_runs(10_000, 10_000, EQUAL_SHARE_RUNS) == [(0, 9999, 0, 9999)]


# ------------------------------------------------------------------ slots


def reference_slots(plan: PhysicalPlan) -> dict[str, list[int]]:
    """LocalInputPreferredSlotSharingStrategy subtask by subtask (flowc's algorithm before
    runs): each subtask takes the first slot of a producer subtask it reads (same group,
    inputs in order, producers from where the previous subtask stopped) that holds no
    subtask of its vertex yet; the rest take free slots of the group in creation order,
    else new slots."""
    holds: list[set[str]] = []
    group_slots: dict[str, list[int]] = {}
    slots: dict[str, list[int]] = {}
    parallelism = {v.vertex.id: v.parallelism for v in plan.vertices}
    groups = {v.vertex.id: v.slot_sharing_group for v in plan.vertices}
    for vertex in plan.vertices:  # topological order
        vid, group = vertex.vertex.id, vertex.slot_sharing_group
        assigned = [-1] * vertex.parallelism
        cursor: dict[str, int] = {}
        for index in range(vertex.parallelism):
            for edge in vertex.vertex.inputs:
                if groups[edge.producer] != group:
                    continue
                up = parallelism[edge.producer]
                if edge.distribution == "POINTWISE":
                    span = pointwise_producers(up, vertex.parallelism, index)
                    first, last = span.start, span.stop - 1
                else:
                    first, last = 0, up - 1
                for producer in range(max(first, cursor.get(edge.producer, first)), last + 1):
                    slot = slots[edge.producer][producer]
                    if vid not in holds[slot]:
                        assigned[index] = slot
                        holds[slot].add(vid)
                        cursor[edge.producer] = producer
                        break
                if assigned[index] >= 0:
                    break
        candidates = group_slots.setdefault(group, [])
        for index in range(vertex.parallelism):
            if assigned[index] >= 0:
                continue
            free = [slot for slot in candidates if vid not in holds[slot]]
            if free:
                slot = free[0]
            else:
                slot = len(holds)
                holds.append(set())
                candidates.append(slot)
            assigned[index] = slot
            holds[slot].add(vid)
        slots[vid] = assigned
    return slots


@SETTINGS
@given(programs())
def test_slot_runs_match_the_subtask_by_subtask_strategy(program: GeneratedProgram) -> None:
    plan = compile_or_reject(program).physical_plan
    expected = reference_slots(plan)
    document = json.loads(plan.to_json())
    for vertex, data in zip(plan.vertices, document["vertices"], strict=True):
        assert expand_slots(data["slots"]) == expected[vertex.vertex.id], vertex.vertex.name
        assert [s.slot for s in vertex.subtasks] == expected[vertex.vertex.id]


RESCALES = """
SET parallelism = 2;
CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'datagen', parallelism = {up});
CREATE SINK o WITH (connector = 'noop');
INSERT INTO o FROM s |> RESCALE |> WHERE v > 0 WITH (parallelism = {down})
  |> REBALANCE |> SELECT k, v WITH (parallelism = {last});
"""


@pytest.mark.parametrize(
    ("up", "down", "last"), [(8, 4, 3), (4, 8, 8), (5, 8, 2), (8, 5, 9), (7, 3, 7), (40, 24, 40)]
)
def test_slots_follow_pointwise_producers_in_runs(up: int, down: int, last: int) -> None:
    plan = flowc.compile(RESCALES.format(up=up, down=down, last=last), "t.flow").physical_plan
    document = json.loads(plan.to_json())
    expected = reference_slots(plan)
    for vertex, data in zip(plan.vertices, document["vertices"], strict=True):
        assert expand_slots(data["slots"]) == expected[vertex.vertex.id]
    # fan-in 8 -> 4: subtask j in the slot of producer 2j, one run with step 2
    if (up, down) == (8, 4):
        assert document["vertices"][1]["slots"] == [
            {"subtasks": [0, 3], "slots": [0, 6], "step": 2}
        ]


# ------------------------------------------------------------------ p 10,000


def wide_job(vertices: int, parallelism: int, max_parallelism: int) -> str:
    """A chain of vertices at one parallelism, entered by KEY BY, REBALANCE or RESCALE."""
    steps = (
        "KEY BY k |> AGGREGATE sum(v) AS v WITH (uid = 'agg-{i}') |> WHERE v > {i}",
        "REBALANCE |> SELECT k, v + 1 AS v |> WHERE k <> {i}",
        "RESCALE |> WHERE v < {i} |> FORWARD |> SELECT k, v - 1 AS v",
    )
    lines = [
        f"SET parallelism = {parallelism};",
        f"SET max_parallelism = {max_parallelism};",
        "CREATE SOURCE src (k BIGINT, v BIGINT) WITH (connector = 'datagen');",
        "CREATE SINK out WITH (connector = 'noop', mode = 'update');",
    ]
    previous = "src"
    for i in range(vertices - 1):
        lines.append(f"CREATE VIEW v{i} AS FROM {previous} |> {steps[i % 3].format(i=i)};")
        previous = f"v{i}"
    lines.append(f"INSERT INTO out FROM {previous};")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def wide_plan() -> PhysicalPlan:
    return flowc.compile(wide_job(20, 10_000, 32_768), "wide.flow").physical_plan


def test_a_plan_at_parallelism_10000_renders_small(wide_plan: PhysicalPlan) -> None:
    assert len(wide_plan.vertices) == 20
    assert wide_plan.slots_required == 10_000
    text, data = wide_plan.to_text(), wide_plan.to_json()
    assert len(text.encode()) < 50_000
    assert len(data.encode()) < 200_000
    assert "  subtasks 0-9999: slots 0-9999\n" in text
    assert "  subtasks 0-9999: key groups 0-32767, 3 or 4 each\n" in text
    assert "  subtasks 0-9999: read Map -> Filter[0-9999], 1 each\n" in text
    assert "subtask 5000" not in text


def test_a_plan_at_parallelism_10000_expands_to_flinks_values(wide_plan: PhysicalPlan) -> None:
    document = json.loads(wide_plan.to_json())
    assert document["schema_version"] == 2
    flink = _flink_ranges(32_768, 10_000)
    keyed = [v for v in document["vertices"] if v["keyed"]]
    assert len(keyed) == 7
    for vertex in document["vertices"]:
        assert (vertex["parallelism"], vertex["max_parallelism"]) == (10_000, 32_768)
        assert expand_slots(vertex["slots"]) == list(range(10_000))
        if vertex["keyed"]:
            assert expand_key_groups(vertex["key_groups"]) == flink
        for physical_input in vertex["inputs"]:
            pointwise = physical_input["distribution"] == "POINTWISE"
            reads = expand_producers(physical_input["producers"], pointwise)
            assert reads == ([(i, i) for i in range(10_000)] if pointwise else [(0, 9999)] * 10_000)
    # flowc's own per-subtask view agrees, at both ends and in between
    vertex = next(v for v in wide_plan.vertices if v.vertex.keyed)
    for index in (0, 1, 4999, 7680, 9999):
        subtask = vertex.subtask(index)
        assert subtask.key_groups == flink[index]
        assert subtask.slot == index


def test_text_elides_long_lists_of_slot_runs() -> None:
    # 100 -> 60 rescale: subtask j in the slot of producer floor(5j/3), runs of 2 or 3
    plan = flowc.compile(RESCALES.format(up=100, down=60, last=100), "t.flow").physical_plan
    runs = len(plan.vertices[1].slots)
    assert runs > 16
    text = plan.to_text()
    block = text[text.index("\nFilter [") + 1 :].split("\n\n")[0].splitlines()[1:]
    assert block[:2] == [
        "  reads Source: s [bc764cd8]: RESCALE POINTWISE",
        "  subtasks 0-1: slots 0-1",
    ]
    assert block[9] == f"  ... {runs - 16} more runs of slots"
    assert len(block) == 1 + 16 + 1 + 1  # reads, slot runs, elision, pointwise reads
    assert block[-1] == "  subtasks 0-59: read Source: s[0-99], 1 or 2 each"


# ------------------------------------------------------------------ default max parallelism


def flink_default_max_parallelism(parallelism: int) -> int:
    """KeyGroupRangeAssignment.computeDefaultMaxParallelism, restated from Flink's source:
    ``min(max(roundUpToPowerOfTwo(p + p / 2), 128), 32768)`` with Java's integer ``p / 2``."""
    wanted = parallelism + parallelism // 2
    power_of_two = 1 << (wanted - 1).bit_length()
    return min(max(power_of_two, 128), 32768)


@pytest.mark.parametrize(
    ("parallelism", "expected"),
    [
        (1, 128),  # the floor
        (85, 128),  # 127: the last under the floor
        (86, 256),  # 129: the first above it
        (171, 256),  # 256 exactly; 1.5 * p rounded up (257) would give 512
        (172, 512),
        (683, 1024),  # 1024 exactly; ceil(1.5 * p) = 1025 would give 2048
        (684, 2048),
        (2731, 4096),  # 4096 exactly; ceil(1.5 * p) = 4097 would give 8192
        (2732, 8192),
        (21845, 32768),  # 32767: the last that rounds to the cap itself
        (21846, 32768),  # 32769 would round to 65536: capped
        (32768, 32768),  # the largest parallelism there is
    ],
)
def test_default_max_parallelism_of_a_compiled_plan(parallelism: int, expected: int) -> None:
    """Through a real compile: the physical plan's max parallelism where none is set, and
    the key groups its keyed vertex splits, at the points where the rounding changes."""
    assert flink_default_max_parallelism(parallelism) == expected
    program = (
        f"SET parallelism = {parallelism};\n"
        "CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'noop', mode = 'update');\n"
        "INSERT INTO o FROM s |> REBALANCE |> KEY BY k |> AGGREGATE sum(v) AS v;\n"
    )
    plan = flowc.compile(program, "default_max_parallelism.flow").physical_plan
    assert [v.vertex.max_parallelism for v in plan.vertices] == [None, None]  # not set
    assert [(v.parallelism, v.max_parallelism) for v in plan.vertices] == [
        (parallelism, expected)
    ] * 2
    document = json.loads(plan.to_json())
    keyed = [v for v in document["vertices"] if v["keyed"]]
    assert [v["max_parallelism"] for v in document["vertices"]] == [expected] * 2
    (vertex,) = keyed
    key_groups = expand_key_groups(vertex["key_groups"])
    assert key_groups[0][0] == 0 and key_groups[-1][1] == expected - 1
    assert key_groups == _flink_ranges(expected, parallelism)


@pytest.mark.parametrize("parallelism", [171, 683, 2731])
def test_the_boundaries_tell_integer_halving_from_rounding_up(parallelism: int) -> None:
    """At these p, ``p + p // 2`` is a power of two and ``ceil(1.5 * p)`` is one above it:
    a port that computed 1.5 * p in floating point would double the key groups."""
    exact = parallelism + parallelism // 2
    assert exact & (exact - 1) == 0
    assert -(-3 * parallelism // 2) == exact + 1
