"""Pass 4: JobGraph → physical plan: subtasks, key groups, wiring, regions and slots.

Follows Flink's runtime rules: the default max parallelism where a vertex has none
(SchedulerBase), key-group ranges per subtask (KeyGroupRangeAssignment), pointwise
wiring (VertexInputInfoComputationUtils), pipelined regions
(LogicalPipelinedRegionComputeUtil) and default slot sharing
(LocalInputPreferredSlotSharingStrategy). The Spark realization is attached by the
runtime (``spark``); the compiler leaves it empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowc.flink.keygroups import (
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    pointwise_producers,
)
from flowc.job_graph import JobGraph, JobVertex
from flowc.outputs import document

#: Past this many subtasks, text output shows ranges instead of one line per subtask.
TEXT_SUBTASK_LIMIT = 16


@dataclass(frozen=True, slots=True)
class InputWiring:
    """Which producer subtasks one consumer subtask reads, as an inclusive range."""

    producer: str
    first: int
    last: int


@dataclass(slots=True, eq=False)
class Subtask:
    index: int
    key_groups: tuple[int, int] | None
    slot: int
    inputs: list[InputWiring] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class PhysicalVertex:
    vertex: JobVertex
    max_parallelism: int
    slot_sharing_group: str
    subtasks: list[Subtask]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.vertex.id,
            "name": self.vertex.name,
            "parallelism": self.vertex.parallelism,
            "max_parallelism": self.max_parallelism,
            "slot_sharing_group": self.slot_sharing_group,
            "keyed": self.vertex.keyed,
            "subtasks": [
                {
                    "index": s.index,
                    "key_groups": list(s.key_groups) if s.key_groups is not None else None,
                    "slot": s.slot,
                    "inputs": [
                        {"vertex": w.producer, "subtasks": [w.first, w.last]} for w in s.inputs
                    ],
                }
                for s in self.subtasks
            ],
            "span": self.vertex.span.to_json(),
        }


@dataclass(slots=True, eq=False)
class PhysicalPlan:
    job_graph: JobGraph
    vertices: list[PhysicalVertex]
    pipelined_regions: list[list[str]]
    slots_required: int
    slots_per_group: dict[str, int]
    spark: dict[str, Any] | None = None

    def to_json(self) -> str:
        body = {
            "job_name": self.job_graph.name,
            "slots_required": self.slots_required,
            "slot_sharing_groups": self.slots_per_group,
            "pipelined_regions": self.pipelined_regions,
            "vertices": [v.to_json() for v in self.vertices],
            "spark": self.spark,
        }
        return document("physical", body)

    def to_text(self) -> str:
        names = {v.vertex.id: v.vertex.name for v in self.vertices}
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
            shown = vertex.subtasks
            if len(shown) > TEXT_SUBTASK_LIMIT:
                shown = [*shown[: TEXT_SUBTASK_LIMIT // 2], *shown[-TEXT_SUBTASK_LIMIT // 2 :]]
            for position, subtask in enumerate(shown):
                if (
                    position == TEXT_SUBTASK_LIMIT // 2
                    and len(vertex.subtasks) > TEXT_SUBTASK_LIMIT
                ):
                    lines.append(f"  ... {len(vertex.subtasks) - TEXT_SUBTASK_LIMIT} more subtasks")
                key_groups = (
                    f" key groups {subtask.key_groups[0]}-{subtask.key_groups[1]}"
                    if subtask.key_groups is not None
                    else ""
                )
                reads = "; ".join(
                    f"{names[w.producer]}[{w.first}]"
                    if w.first == w.last
                    else f"{names[w.producer]}[{w.first}-{w.last}]"
                    for w in subtask.inputs
                    if self._pointwise(vertex, w)
                )
                reads_text = f" reads {reads}" if reads else ""
                lines.append(
                    f"  subtask {subtask.index}: slot {subtask.slot}{key_groups}{reads_text}"
                )
        lines.append("")
        lines.extend(_spark_text(self.spark))
        return "\n".join(lines) + "\n"

    @staticmethod
    def _pointwise(vertex: PhysicalVertex, wiring: InputWiring) -> bool:
        return any(
            e.producer == wiring.producer and e.distribution == "POINTWISE"
            for e in vertex.vertex.inputs
        )


def _spark_text(spark: dict[str, Any] | None) -> list[str]:
    if not spark:
        return ["Spark realization: none"]
    lines = [
        "Spark realization (Structured Streaming):",
        f"  shuffle partitions: {spark['shuffle_partitions']} "
        f"({spark['shuffle_partitions_reason']})",
    ]
    for query in spark["queries"]:
        lines.append(
            f"  query '{query['name']}': writes {query['sink']['connector']} sink "
            f"'{query['sink']['name']}', output mode {query['output_mode']}, reads "
            f"{', '.join(query['reads'])}"
        )
        lines.append(f"    trigger: {query['trigger']}")
        lines.append(f"    checkpoint: {query['checkpoint_location']}")
        if "rescaling" in query:
            lines.append(f"    rescaling: {query['rescaling']}")
        lines.append(f"    exchanges planned: {query['exchanges_planned']}")
        for exchange in query["exchanges"]:
            lines.append(
                f"    - {exchange['from']} -> {exchange['to']}: {exchange['ship_strategy']} as "
                f"{exchange['spark']} [{exchange['partitioning']}]: {exchange['why']}"
            )
    return lines


def build_physical_plan(job: JobGraph) -> PhysicalPlan:
    ordered = job.topological()
    regions = _pipelined_regions(job, ordered)
    region_of = {vid: index for index, region in enumerate(regions) for vid in region}
    physical: dict[str, PhysicalVertex] = {}
    for vertex in ordered:
        max_parallelism = (
            vertex.max_parallelism
            if vertex.max_parallelism is not None
            else compute_default_max_parallelism(vertex.parallelism)
        )
        group = vertex.slot_sharing_group
        if not job.stream_graph.streaming and group == "default":
            group = f"default (region {region_of[vertex.id]})"
        subtasks = []
        for index in range(vertex.parallelism):
            key_groups = (
                compute_key_group_range_for_operator_index(
                    max_parallelism, vertex.parallelism, index
                )
                if vertex.keyed
                else None
            )
            subtasks.append(Subtask(index=index, key_groups=key_groups, slot=-1))
        for edge in vertex.inputs:
            producer = job.vertices[edge.producer]
            for subtask in subtasks:
                if edge.distribution == "POINTWISE":
                    span = pointwise_producers(
                        producer.parallelism, vertex.parallelism, subtask.index
                    )
                    subtask.inputs.append(InputWiring(producer.id, span.start, span.stop - 1))
                else:
                    subtask.inputs.append(InputWiring(producer.id, 0, producer.parallelism - 1))
        physical[vertex.id] = PhysicalVertex(vertex, max_parallelism, group, subtasks)
    slots_per_group = _assign_slots(job, ordered, physical)
    return PhysicalPlan(
        job_graph=job,
        vertices=[physical[v.id] for v in ordered],
        pipelined_regions=regions,
        slots_required=sum(slots_per_group.values()),
        slots_per_group=slots_per_group,
    )


def _pipelined_regions(job: JobGraph, ordered: list[JobVertex]) -> list[list[str]]:
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
    job: JobGraph, ordered: list[JobVertex], physical: dict[str, PhysicalVertex]
) -> dict[str, int]:
    """LocalInputPreferredSlotSharingStrategy, vertex by vertex in topological order: first
    every subtask that can join a producer subtask's slot (same group, no subtask of its
    vertex there yet) does; then the others take any free slot of the group, else a new one."""
    slots: list[set[str]] = []  # slot index → vertices it holds
    slot_group: list[str] = []
    subtask_slot: dict[tuple[str, int], int] = {}
    group_slots: dict[str, list[int]] = {}
    for vertex in ordered:
        plan = physical[vertex.id]
        group = plan.slot_sharing_group
        cursor: dict[str, int] = {}
        unplaced: list[Subtask] = []
        for subtask in plan.subtasks:
            chosen = None
            for wiring in subtask.inputs:
                if physical[wiring.producer].slot_sharing_group != group:
                    continue
                # A slot that holds this vertex never frees up, so the first usable producer
                # subtask only moves forward: resume where the previous subtask stopped.
                start = max(wiring.first, cursor.get(wiring.producer, wiring.first))
                for producer_index in range(start, wiring.last + 1):
                    slot = subtask_slot[(wiring.producer, producer_index)]
                    if vertex.id not in slots[slot]:
                        chosen = slot
                        cursor[wiring.producer] = producer_index
                        break
                if chosen is not None:
                    break
            if chosen is None:
                unplaced.append(subtask)
                continue
            slots[chosen].add(vertex.id)
            subtask_slot[(vertex.id, subtask.index)] = chosen
            subtask.slot = chosen
        free = 0
        candidates = group_slots.setdefault(group, [])
        for subtask in unplaced:
            while free < len(candidates) and vertex.id in slots[candidates[free]]:
                free += 1
            if free < len(candidates):
                chosen = candidates[free]
            else:
                chosen = len(slots)
                slots.append(set())
                slot_group.append(group)
                candidates.append(chosen)
            slots[chosen].add(vertex.id)
            subtask_slot[(vertex.id, subtask.index)] = chosen
            subtask.slot = chosen
    counts: dict[str, int] = {}
    for group in slot_group:
        counts[group] = counts.get(group, 0) + 1
    return counts
