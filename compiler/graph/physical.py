"""Pass 4: JobGraph → physical plan: subtasks, key groups, wiring, regions and slots.

Follows Flink's runtime rules: the default max parallelism where a vertex has none
(SchedulerBase), key-group ranges per subtask (KeyGroupRangeAssignment), pointwise
wiring (VertexInputInfoComputationUtils), pipelined regions
(LogicalPipelinedRegionComputeUtil) and default slot sharing
(LocalInputPreferredSlotSharingStrategy). The Spark realization (``spark``) is the
:class:`~flowc.spark.spark_plan.SparkPlan` built by the pass before this one.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from flowc.fast_dataclass import dataclass
from flowc.flink.keygroups import (
    compute_default_max_parallelism,
    key_group_range_in_run,
    key_group_runs,
    pointwise_producers_in_run,
    pointwise_runs,
)
from flowc.graph.job_graph import JobEdge, JobGraph, JobVertex
from flowc.graph.stream_graph import DEFAULT_SLOT_SHARING_GROUP
from flowc.outputs import document, paused_gc, reference_name

if TYPE_CHECKING:
    from flowc.spark.spark_plan import SparkPlan

#: A vertex of at most this many subtasks is shown one line per subtask in text output;
#: a larger one as runs (JSON always has runs).
TEXT_SUBTASK_LIMIT = 16
#: Key groups and pointwise wiring are listed as runs of equal shares when that takes at
#: most this many runs, else as one run for the whole vertex (see docs/plans.md).
EQUAL_SHARE_RUNS = 8


@dataclass(frozen=True, slots=True)
class SlotRun:
    """Subtasks ``first..last`` sit in slots ``slot``, ``slot + step``, ... in order."""

    first: int
    last: int
    slot: int
    step: int = 1

    def slot_of(self, index: int) -> int:
        return self.slot + (index - self.first) * self.step

    @property
    def last_slot(self) -> int:
        return self.slot_of(self.last)

    def to_json(self) -> dict[str, Any]:
        return {
            "subtasks": [self.first, self.last],
            "slots": [self.slot, self.last_slot],
            "step": self.step,
        }


@dataclass(frozen=True, slots=True)
class KeyGroupRun:
    """Subtasks ``first..last`` own key groups ``low..high``, shared by Flink's rule."""

    first: int
    last: int
    low: int
    high: int

    def key_groups_of(self, index: int) -> tuple[int, int]:
        return key_group_range_in_run((self.first, self.last, self.low, self.high), index)

    def to_json(self) -> dict[str, Any]:
        return {"subtasks": [self.first, self.last], "key_groups": [self.low, self.high]}


@dataclass(frozen=True, slots=True)
class WiringRun:
    """Subtasks ``first..last`` read producer subtasks ``low..high``: each reads them all
    (ALL_TO_ALL), or they share them by Flink's pointwise rule (POINTWISE)."""

    first: int
    last: int
    low: int
    high: int

    def to_json(self) -> dict[str, Any]:
        return {"subtasks": [self.first, self.last], "producers": [self.low, self.high]}


@dataclass(slots=True, eq=False)
class PhysicalInput:
    """One JobEdge into a vertex, with the producer subtasks each subtask reads."""

    edge: JobEdge
    runs: list[WiringRun]

    @property
    def producer(self) -> str:
        return self.edge.producer

    @property
    def pointwise(self) -> bool:
        return self.edge.distribution == "POINTWISE"

    def producers_of(self, index: int) -> tuple[int, int]:
        """The inclusive range of producer subtasks subtask ``index`` reads."""
        run = self.runs[_run_at(self.runs, index)]
        if not self.pointwise:
            return run.low, run.high
        span = pointwise_producers_in_run((run.first, run.last, run.low, run.high), index)
        return span.start, span.stop - 1

    def expand(self) -> list[tuple[int, int]]:
        """Per subtask, in order, the inclusive range of producer subtasks it reads."""
        spans = []
        for run in self.runs:
            if not self.pointwise:
                spans.extend([(run.low, run.high)] * (run.last - run.first + 1))
                continue
            for index in range(run.first, run.last + 1):
                span = pointwise_producers_in_run((run.first, run.last, run.low, run.high), index)
                spans.append((span.start, span.stop - 1))
        return spans

    def to_json(self) -> dict[str, Any]:
        return {
            "vertex": self.producer,
            "ship_strategy": self.edge.ship_strategy,
            "distribution": self.edge.distribution,
            "producers": [r.to_json() for r in self.runs],
        }


@dataclass(frozen=True, slots=True)
class InputWiring:
    """Which producer subtasks one consumer subtask reads, as an inclusive range."""

    producer: str
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Subtask:
    """One subtask, expanded from the runs (for small plans and tests)."""

    index: int
    key_groups: tuple[int, int] | None
    slot: int
    inputs: tuple[InputWiring, ...]


@dataclass(slots=True, eq=False)
class PhysicalVertex:
    vertex: JobVertex
    max_parallelism: int
    slot_sharing_group: str
    slots: list[SlotRun]
    key_groups: list[KeyGroupRun] | None
    inputs: list[PhysicalInput]

    @property
    def parallelism(self) -> int:
        return self.vertex.parallelism

    def slot_of(self, index: int) -> int:
        return self.slots[_run_at(self.slots, index)].slot_of(index)

    def key_groups_of(self, index: int) -> tuple[int, int] | None:
        if self.key_groups is None:
            return None
        return self.key_groups[_run_at(self.key_groups, index)].key_groups_of(index)

    def subtask(self, index: int) -> Subtask:
        if not 0 <= index < self.parallelism:
            raise IndexError(f"subtask {index} outside 0..{self.parallelism - 1}")
        return Subtask(
            index,
            self.key_groups_of(index),
            self.slot_of(index),
            tuple(InputWiring(i.producer, *i.producers_of(index)) for i in self.inputs),
        )

    @property
    def subtasks(self) -> list[Subtask]:
        """Every subtask, expanded (one object each: meant for small plans)."""
        slots = [run.slot_of(i) for run in self.slots for i in range(run.first, run.last + 1)]
        key_groups: list[tuple[int, int] | None] = (
            [
                run.key_groups_of(i)
                for run in self.key_groups
                for i in range(run.first, run.last + 1)
            ]
            if self.key_groups is not None
            else [None] * self.parallelism
        )
        reads = [
            [InputWiring(physical_input.producer, *span) for span in physical_input.expand()]
            for physical_input in self.inputs
        ]
        return [
            Subtask(index, key_groups[index], slots[index], tuple(r[index] for r in reads))
            for index in range(self.parallelism)
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.vertex.id,
            "name": self.vertex.name,
            "parallelism": self.vertex.parallelism,
            "max_parallelism": self.max_parallelism,
            "slot_sharing_group": self.slot_sharing_group,
            "keyed": self.vertex.keyed,
            "slots": [r.to_json() for r in self.slots],
            "key_groups": (
                [r.to_json() for r in self.key_groups] if self.key_groups is not None else None
            ),
            "inputs": [i.to_json() for i in self.inputs],
            "span": self.vertex.span.to_json(),
        }


def _run_at(runs: Sequence[SlotRun | KeyGroupRun | WiringRun], index: int) -> int:
    """Position of the run holding subtask ``index`` (runs cover 0..p-1 in order)."""
    position = bisect.bisect_right(runs, index, key=lambda r: r.first) - 1
    if position < 0 or not runs[position].first <= index <= runs[position].last:
        raise IndexError(f"subtask {index} is in no run")
    return position


@dataclass(slots=True, eq=False)
class PhysicalPlan:
    job_graph: JobGraph
    vertices: list[PhysicalVertex]
    pipelined_regions: list[list[str]]
    slots_required: int
    slots_per_group: dict[str, int]
    spark: SparkPlan | None = None

    def to_json(self) -> str:
        with paused_gc():
            body = {
                "job_name": self.job_graph.name,
                "slots_required": self.slots_required,
                "slot_sharing_groups": self.slots_per_group,
                "pipelined_regions": self.pipelined_regions,
                "vertices": [v.to_json() for v in self.vertices],
                "spark": self.spark.to_json() if self.spark is not None else None,
            }
            return document("physical", body)

    def to_text(self) -> str:
        with paused_gc():
            return self._text()

    def _text(self) -> str:
        names = {v.vertex.id: reference_name(v.vertex.name) for v in self.vertices}
        groups = ", ".join(f"'{g}' {n}" for g, n in self.slots_per_group.items())
        lines = [
            f"Physical plan of job '{self.job_graph.name}'",
            f"slots required: {self.slots_required} ({groups})",
            f"pipelined regions: {len(self.pipelined_regions)}",
        ]
        for vertex in self.vertices:
            lines.append("")
            lines.append(
                f"{vertex.vertex.name} [{vertex.vertex.id[:8]}]  (parallelism "
                f"{vertex.vertex.parallelism}, max parallelism "
                f"{vertex.max_parallelism}, group '{vertex.slot_sharing_group}')"
            )
            for edge in vertex.vertex.inputs:
                keys = f"({', '.join(edge.stream_edge.keys)})" if edge.stream_edge.keys else ""
                lines.append(
                    f"  reads {names[edge.producer]} [{edge.producer[:8]}]: "
                    f"{edge.ship_strategy}{keys} {edge.distribution}"
                )
            if vertex.parallelism <= TEXT_SUBTASK_LIMIT:
                lines.extend(_subtask_lines(vertex, names))
            else:
                lines.extend(_run_lines(vertex, names))
        lines.append("")
        lines.extend(self.spark.to_text() if self.spark else ["Spark realization: none"])
        return "\n".join(lines) + "\n"


def _subtask_lines(vertex: PhysicalVertex, names: dict[str, str]) -> Iterable[str]:
    """One line per subtask: its slot, key groups and pointwise reads."""
    for subtask in vertex.subtasks:
        key_groups = (
            f" key groups {subtask.key_groups[0]}-{subtask.key_groups[1]}"
            if subtask.key_groups is not None
            else ""
        )
        reads = "; ".join(
            f"{names[w.producer]}[{_span(w.first, w.last)}]"
            for w, physical_input in zip(subtask.inputs, vertex.inputs, strict=True)
            if physical_input.pointwise
        )
        reads_text = f" reads {reads}" if reads else ""
        yield f"  subtask {subtask.index}: slot {subtask.slot}{key_groups}{reads_text}"


def _run_lines(vertex: PhysicalVertex, names: dict[str, str]) -> Iterable[str]:
    """A large vertex as runs: slots, key groups, pointwise reads, one line per run (slot
    runs elided in the middle past :data:`TEXT_SUBTASK_LIMIT`; the JSON has them all)."""
    shown = vertex.slots
    half = TEXT_SUBTASK_LIMIT // 2
    if len(shown) > TEXT_SUBTASK_LIMIT:
        shown = [*shown[:half], *shown[-half:]]
    for position, slots in enumerate(shown):
        if position == half and len(vertex.slots) > TEXT_SUBTASK_LIMIT:
            yield f"  ... {len(vertex.slots) - TEXT_SUBTASK_LIMIT} more runs of slots"
        step = f" step {slots.step}" if slots.step != 1 and slots.first != slots.last else ""
        yield (
            f"  {_subtasks(slots.first, slots.last)}: "
            f"{'slot' if slots.first == slots.last else 'slots'} "
            f"{_span(slots.slot, slots.last_slot)}{step}"
        )
    for owned in vertex.key_groups or ():
        share = _shares(owned.high - owned.low + 1, owned.last - owned.first + 1)
        yield (
            f"  {_subtasks(owned.first, owned.last)}: key groups {owned.low}-{owned.high}, "
            f"{share} each"
        )
    for physical_input in vertex.inputs:
        if not physical_input.pointwise:
            continue
        for run in physical_input.runs:
            consumers, producers = run.last - run.first + 1, run.high - run.low + 1
            share = (
                f"{_shares(producers, consumers)} each"
                if producers >= consumers
                else f"{_shares(consumers, producers)} per producer subtask"
            )
            yield (
                f"  {_subtasks(run.first, run.last)}: read "
                f"{names[physical_input.producer]}[{_span(run.low, run.high)}], {share}"
            )


def _span(first: int, last: int) -> str:
    return f"{first}" if first == last else f"{first}-{last}"


def _subtasks(first: int, last: int) -> str:
    return f"subtask {first}" if first == last else f"subtasks {first}-{last}"


def _shares(items: int, owners: int) -> str:
    """How many of ``items`` each of ``owners`` gets when shared evenly: ``3`` or ``3 or 4``."""
    low, high = items // owners, -(-items // owners)
    return f"{low}" if low == high else f"{low} or {high}"


def build_physical_plan(job: JobGraph, spark: SparkPlan | None = None) -> PhysicalPlan:
    ordered = job.topological()
    regions = _pipelined_regions(ordered)
    region_of = {vid: index for index, region in enumerate(regions) for vid in region}
    groups: dict[str, str] = {}
    for vertex in ordered:
        group = vertex.slot_sharing_group
        if not job.stream_graph.streaming and group == DEFAULT_SLOT_SHARING_GROUP:
            group = f"default (region {region_of[vertex.id]})"
        groups[vertex.id] = group
    slots, slots_per_group = _assign_slots(job, ordered, groups)
    physical = []
    for vertex in ordered:
        max_parallelism = (
            vertex.max_parallelism
            if vertex.max_parallelism is not None
            else compute_default_max_parallelism(vertex.parallelism)
        )
        key_groups = (
            [
                KeyGroupRun(*run)
                for run in key_group_runs(max_parallelism, vertex.parallelism, EQUAL_SHARE_RUNS)
            ]
            if vertex.keyed
            else None
        )
        inputs = []
        for edge in vertex.inputs:
            upstream = job.vertices[edge.producer].parallelism
            if edge.distribution == "POINTWISE":
                runs = pointwise_runs(upstream, vertex.parallelism, EQUAL_SHARE_RUNS)
            else:
                runs = [(0, vertex.parallelism - 1, 0, upstream - 1)]
            inputs.append(PhysicalInput(edge, [WiringRun(*run) for run in runs]))
        physical.append(
            PhysicalVertex(
                vertex,
                max_parallelism,
                groups[vertex.id],
                _slot_runs(slots[vertex.id]),
                key_groups,
                inputs,
            )
        )
    return PhysicalPlan(
        job_graph=job,
        vertices=physical,
        pipelined_regions=regions,
        slots_required=sum(slots_per_group.values()),
        slots_per_group=slots_per_group,
        spark=spark,
    )


def _pipelined_regions(ordered: list[JobVertex]) -> list[list[str]]:
    """Union vertices joined by PIPELINED(_BOUNDED) results; regions in topological order."""
    parent = {v.id: v.id for v in ordered}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for vertex in ordered:
        for edge in vertex.inputs:
            if edge.source.result_partition_type in ("PIPELINED", "PIPELINED_BOUNDED"):
                a, b = find(vertex.id), find(edge.producer)
                if a != b:
                    parent[a] = b
    regions: dict[str, list[str]] = {}
    for vertex in ordered:
        regions.setdefault(find(vertex.id), []).append(vertex.id)
    return list(regions.values())


def _assign_slots(
    job: JobGraph, ordered: list[JobVertex], groups: dict[str, str]
) -> tuple[dict[str, array[int]], dict[str, int]]:
    """LocalInputPreferredSlotSharingStrategy, vertex by vertex in topological order: first
    every subtask that can join a producer subtask's slot (same group, no subtask of its
    vertex there yet) does; then the others take any free slot of the group, else a new one.

    Works on one array of slot numbers per vertex (no object per subtask); the common
    shapes (a single same-group input) take whole slices at once.
    """
    slots: dict[str, array[int]] = {}
    group_slots: dict[str, list[int]] = {}  # group → its slots, in creation order
    created = 0
    for vertex in ordered:
        group = groups[vertex.id]
        shared = [e for e in vertex.inputs if groups[e.producer] == group]
        if len(shared) == 1:
            assigned = _follow_one_input(job, vertex, shared[0], slots[shared[0].producer])
        else:
            assigned = _follow_inputs(job, vertex, shared, slots)
        held = set(assigned)
        held.discard(-1)
        unplaced = [index for index, slot in enumerate(assigned) if slot < 0]
        candidates = group_slots.setdefault(group, [])
        free = [slot for slot in candidates if slot not in held][: len(unplaced)]
        fresh = range(created, created + len(unplaced) - len(free))
        created += len(fresh)
        candidates.extend(fresh)
        for index, slot in zip(unplaced, [*free, *fresh], strict=True):
            assigned[index] = slot
        slots[vertex.id] = assigned
    return slots, {group: len(members) for group, members in group_slots.items()}


def _follow_one_input(
    job: JobGraph, vertex: JobVertex, edge: JobEdge, producer_slots: array[int]
) -> array[int]:
    """First phase with one same-group input, in slices. ALL_TO_ALL: subtask i takes the
    slot of producer subtask i while there is one (each earlier producer slot already holds
    this vertex). POINTWISE: each subtask takes the slot of the first producer subtask it
    reads, unless the subtask before it already took that one."""
    p = vertex.parallelism
    upstream = job.vertices[edge.producer].parallelism
    assigned = array("q", [-1]) * p
    if edge.distribution != "POINTWISE" or upstream == p:
        shared = min(p, upstream)
        assigned[:shared] = producer_slots[:shared]
    elif upstream > p:
        assigned[:] = array("q", [producer_slots[i * upstream // p] for i in range(p)])
    else:
        for producer in range(upstream):
            assigned[(producer * p + upstream - 1) // upstream] = producer_slots[producer]
    return assigned


def _follow_inputs(
    job: JobGraph, vertex: JobVertex, shared: list[JobEdge], slots: dict[str, array[int]]
) -> array[int]:
    """First phase, general case (several same-group inputs), subtask by subtask: the first
    producer subtask, input by input, whose slot does not hold this vertex yet."""
    p = vertex.parallelism
    assigned = array("q", [-1]) * p
    if not shared:
        return assigned
    held: set[int] = set()
    # A slot that holds this vertex never frees up, so the first usable producer subtask
    # only moves forward: resume where the previous subtask stopped (per producer).
    cursor: dict[str, int] = {}
    wiring = []
    for edge in shared:
        upstream = job.vertices[edge.producer].parallelism
        pointwise = edge.distribution == "POINTWISE"
        runs = pointwise_runs(upstream, p, 0) if pointwise else []
        wiring.append((edge.producer, slots[edge.producer], upstream, runs))
    for index in range(p):
        for producer, producer_slots, upstream, runs in wiring:
            if runs:
                span = pointwise_producers_in_run(runs[0], index)
                first, last = span.start, span.stop - 1
            else:
                first, last = 0, upstream - 1
            start = max(first, cursor.get(producer, first))
            for producer_index in range(start, last + 1):
                slot = producer_slots[producer_index]
                if slot not in held:
                    assigned[index] = slot
                    held.add(slot)
                    cursor[producer] = producer_index
                    break
            if assigned[index] >= 0:
                break
    return assigned


def _slot_runs(assigned: array[int]) -> list[SlotRun]:
    """Slot numbers per subtask as maximal runs of a constant step."""
    runs = []
    count = len(assigned)
    index = 0
    while index < count:
        if index + 1 == count:
            runs.append(SlotRun(index, index, assigned[index]))
            break
        step = assigned[index + 1] - assigned[index]
        last = index + 1
        while last + 1 < count and assigned[last + 1] - assigned[last] == step:
            last += 1
        runs.append(SlotRun(index, last, assigned[index], step))
        index = last + 1
    return runs
