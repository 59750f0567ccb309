"""Property tests: Flink's planning invariants on generated .flow topologies.

Hypothesis builds valid programs (sources with random parallelism, views with random
chains of steps and partition steps, hints, UNION ALL, keyed aggregates, views read by
several INSERTs) and every compiled job is checked against the rules of
flink-semantics.md §2, §4 and §6, recomputed here from the StreamGraph and from what
the generator asked for, not taken from flowc's own helpers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import flowc
from flowc.job import CompiledJob
from flowc.stream_graph import StreamEdge, StreamGraph
from flowc.vocabulary import ChainingStrategy, Partitioner

PARTITION_STEPS = [
    "REBALANCE",
    "RESCALE",
    "SHUFFLE",
    "BROADCAST",
    "GLOBAL",
    "FORWARD",
    "KEY BY k",
    "PARTITION BY k % 3",
]
CHAINING = {None: "ALWAYS", "always": "ALWAYS", "new_chain": "HEAD", "never": "NEVER"}


@dataclass
class Hint:
    parallelism: int | None = None
    max_parallelism: int | None = None
    group: str | None = None
    chaining: str | None = None
    uid: str | None = None


@dataclass
class Program:
    """A generated program and, per operator name, the hints the generator gave it."""

    batch: bool
    chaining: bool
    parallelism: int
    max_parallelism: int | None
    lines: list[str] = field(default_factory=list)
    hints: dict[str, Hint] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)  # sources and views some query reads

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class _Names:
    def __init__(self) -> None:
        self.count = 0

    def next(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"


@st.composite
def hints(draw: st.DrawFn, names: _Names, default_parallelism: int) -> Hint:
    # a max_parallelism hint must not be below the operator's parallelism (E0305)
    max_parallelism = [8, 13] if default_parallelism <= 5 else [128, 200]
    return Hint(
        parallelism=draw(st.one_of(st.none(), st.none(), st.integers(1, 5))),
        max_parallelism=draw(st.sampled_from([None, None, None, *max_parallelism])),
        group=draw(st.sampled_from([None] * 6 + ["a", "b"])),
        chaining=draw(st.sampled_from([None] * 6 + ["always", "new_chain", "never"])),
        uid=names.next("uid-") if draw(st.integers(0, 5)) == 0 else None,
    )


def render(hint: Hint, name: str | None) -> list[str]:
    parts = []
    if name is not None:
        parts.append(f"name = '{name}'")
    if hint.parallelism is not None:
        parts.append(f"parallelism = {hint.parallelism}")
    if hint.max_parallelism is not None:
        parts.append(f"max_parallelism = {hint.max_parallelism}")
    if hint.group is not None:
        parts.append(f"slot_sharing_group = '{hint.group}'")
    if hint.chaining is not None:
        parts.append(f"chaining = '{hint.chaining}'")
    if hint.uid is not None:
        parts.append(f"uid = '{hint.uid}'")
    return parts


@st.composite
def steps(draw: st.DrawFn, program: Program, names: _Names, streams: list[str]) -> list[str]:
    """0-4 pipe steps; every operator step is named after itself so it can be traced."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["select", "where", "partition", "aggregate", "union"]))
        if kind == "partition":
            out.append(draw(st.sampled_from(PARTITION_STEPS)))
            continue
        if kind == "union":
            others = draw(st.lists(st.sampled_from(streams), min_size=1, max_size=2))
            program.read.update(others)
            out.append("UNION ALL " + ", ".join(others))
            continue
        name = names.next("n")
        hint = draw(hints(names, program.parallelism))
        program.hints[name] = hint
        options = f" WITH ({', '.join(render(hint, name))})"
        body = {
            "select": "SELECT k, v",
            "where": "WHERE v > 0",
            "aggregate": "KEY BY k |> AGGREGATE sum(v) AS v",
        }[kind]
        out.append(body + options)
    return out


def pipe(origin: str, body: list[str]) -> str:
    return " |> ".join([f"FROM {origin}", *body])


@st.composite
def programs(draw: st.DrawFn) -> Program:
    names = _Names()
    # now and then a parallelism above 85, whose default max parallelism is 256, not 128
    parallelism = draw(st.sampled_from([1, 2, 3, 4] * 3 + [90]))
    program = Program(
        batch=draw(st.sampled_from([False, False, False, True])),
        chaining=draw(st.sampled_from([True, True, True, False])),
        parallelism=parallelism,
        max_parallelism=draw(st.sampled_from([None, None, 16] if parallelism <= 4 else [None])),
    )
    lines = program.lines
    lines.append(f"SET parallelism = {program.parallelism};")
    if program.max_parallelism is not None:
        lines.append(f"SET max_parallelism = {program.max_parallelism};")
    if not program.chaining:
        lines.append("SET chaining = false;")
    if program.batch:
        lines.append("SET execution.mode = batch;")
    streams: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        source = names.next("s")
        hint = draw(hints(names, program.parallelism))
        program.hints[f"Source: {source}"] = hint
        options = ["connector = 'datagen'", *render(hint, None)]
        if program.batch:
            options.append("number_of_rows = 10")
        lines.append(f"CREATE SOURCE {source} (k BIGINT, v BIGINT) WITH ({', '.join(options)});")
        streams.append(source)
    views: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        view = names.next("v")
        origin = draw(st.sampled_from(streams))
        program.read.add(origin)
        lines.append(f"CREATE VIEW {view} AS {pipe(origin, draw(steps(program, names, streams)))};")
        streams.append(view)
        views.append(view)
    # every view is read by 1-3 INSERTs (a fork when more than one); sources maybe directly
    readers = [(v, draw(st.integers(1, 3))) for v in views]
    if not views or draw(st.booleans()):
        readers.append((draw(st.sampled_from(streams)), 1))
    for stream, count in readers:
        for _ in range(count):
            sink = names.next("o")
            hint = draw(hints(names, program.parallelism))
            program.hints[f"Sink: {sink}"] = hint
            options = ["connector = 'console'", *render(hint, None)]
            lines.append(f"CREATE SINK {sink} WITH ({', '.join(options)});")
            body = draw(steps(program, names, streams))
            program.read.add(stream)
            lines.append(f"INSERT INTO {sink} {pipe(stream, body)};")
    return program


def compile_or_reject(program: Program) -> CompiledJob:
    """FORWARD between different parallelisms is the one error the generator may produce."""
    try:
        return flowc.compile(program.text, "gen.flow")
    except flowc.CompileError as error:
        codes = {d.code for d in error.diagnostics if d.severity is flowc.Severity.ERROR}
        if codes == {"E0310"}:
            assume(False)
        raise


# ---------------------------------------------------------------- Flink's rules, restated


def default_max_parallelism(p: int) -> int:
    rounded = 1
    while rounded < p + p // 2:
        rounded *= 2
    return min(max(rounded, 128), 32768)


def chainable(graph: StreamGraph, edge: StreamEdge, enabled: bool) -> bool:
    """§2 isChainable: in-degree 1 and every isChainableInput condition."""
    up, down = graph.nodes[edge.source_id], graph.nodes[edge.target_id]
    return (
        len(down.in_edges) == 1
        and enabled
        and up.slot_sharing_group == down.slot_sharing_group
        and up.chaining_strategy in (ChainingStrategy.ALWAYS, ChainingStrategy.HEAD)
        and down.chaining_strategy == ChainingStrategy.ALWAYS
        and up.parallelism == down.parallelism
        and edge.partitioner == Partitioner.FORWARD
        and edge.exchange_mode != "BATCH"
        and not any(o is not edge and o.type_number == edge.type_number for o in down.in_edges)
    )


def pointwise_producers(up: int, down: int, consumer: int) -> tuple[int, int]:
    """§6 pointwise wiring, as the inclusive producer range one consumer subtask reads."""
    if up >= down:
        return consumer * up // down, (consumer + 1) * up // down - 1
    producer = max(i for i in range(up) if (i * down + up - 1) // up <= consumer)
    return producer, producer


def owners(job: CompiledJob) -> dict[int, str]:
    owner: dict[int, str] = {}
    for vertex in job.job_graph.vertices.values():
        for op in vertex.operators:
            assert op.node_id not in owner, f"node {op.node_id} in two vertices"
            owner[op.node_id] = vertex.id
    return owner


SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


# ---------------------------------------------------------------- StreamGraph


def check_stream_nodes_follow_hints_and_inheritance(program: Program, job: CompiledJob) -> None:
    graph = job.stream_graph
    # operators and sinks are always translated; a source only when something reads it
    # (Flink reaches sources through the inputs of env.transformations only)
    expected = [
        name
        for name in program.hints
        if not name.startswith("Source: ") or name.removeprefix("Source: ") in program.read
    ]
    assert sorted(n.name for n in graph.nodes.values()) == sorted(expected)
    for node in graph.nodes.values():
        hint = program.hints[node.name]
        assert node.parallelism == (hint.parallelism or program.parallelism)
        assert node.max_parallelism == (hint.max_parallelism or program.max_parallelism)
        assert node.chaining_strategy == CHAINING[hint.chaining]
        if hint.group is not None:
            group = hint.group
        else:
            inputs = {graph.nodes[e.source_id].slot_sharing_group for e in node.in_edges}
            group = inputs.pop() if len(inputs) == 1 else "default"
        assert node.slot_sharing_group == group, node.name
        for edge in node.in_edges:
            assert edge.target_id == node.id
            assert edge in graph.nodes[edge.source_id].out_edges
            if edge.partitioner == Partitioner.FORWARD:
                assert graph.nodes[edge.source_id].parallelism == node.parallelism


def check_operator_ids_are_distinct_and_deterministic(program: Program, job: CompiledJob) -> None:
    again = flowc.compile(program.text, "gen.flow")
    graph = job.stream_graph
    ids = [graph.operator_id(n) for n in graph.nodes]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    for stage in ("stream_graph", "job_graph", "physical_plan"):
        assert getattr(job, stage).to_json() == getattr(again, stage).to_json()


# ---------------------------------------------------------------- JobGraph: chaining


def check_chaining_matches_flinks_conditions(program: Program, job: CompiledJob) -> None:
    graph = job.stream_graph
    owner = owners(job)
    # every StreamNode is in exactly one vertex
    assert set(owner) == set(graph.nodes)
    for edge in graph.edges():
        same_vertex = owner[edge.source_id] == owner[edge.target_id]
        # chained operators satisfy every condition; no chainable edge is left unchained
        assert same_vertex == chainable(graph, edge, program.chaining), (
            graph.nodes[edge.source_id].name,
            graph.nodes[edge.target_id].name,
        )


def check_vertices_take_their_heads_properties(program: Program, job: CompiledJob) -> None:
    graph = job.stream_graph

    def chained_name(node_id: int) -> str:
        node = graph.nodes[node_id]
        children = [
            chained_name(e.target_id)
            for e in node.out_edges
            if chainable(graph, e, program.chaining)
        ]
        if not children:
            return node.name
        if len(children) == 1:
            return f"{node.name} -> {children[0]}"
        return f"{node.name} -> ({', '.join(children)})"

    heads = {v.head for v in job.job_graph.vertices.values()}
    for node in graph.nodes.values():
        chained_in = [e for e in node.in_edges if chainable(graph, e, program.chaining)]
        assert (node.id in heads) == (not chained_in)
    for vertex in job.job_graph.vertices.values():
        head = graph.nodes[vertex.head]
        assert vertex.operators[0].node_id == head.id
        assert vertex.id == graph.operator_id(head.id)
        assert vertex.name == chained_name(head.id)
        assert vertex.parallelism == head.parallelism
        assert vertex.max_parallelism == head.max_parallelism
        assert vertex.slot_sharing_group == head.slot_sharing_group
        for op in vertex.operators:
            member = graph.nodes[op.node_id]
            assert op.operator_id == graph.operator_id(member.id)
            assert member.parallelism == vertex.parallelism
            assert member.slot_sharing_group == vertex.slot_sharing_group


def check_job_edges_match_unchained_stream_edges(program: Program, job: CompiledJob) -> None:
    graph = job.stream_graph
    owner = owners(job)
    crossing = sorted(
        (owner[e.source_id], owner[e.target_id], e.partitioner)
        for e in graph.edges()
        if owner[e.source_id] != owner[e.target_id]
    )
    job_edges = []
    for vertex in job.job_graph.vertices.values():
        for edge in vertex.inputs:
            job_edges.append((edge.producer, vertex.id, edge.ship_strategy))
            pointwise = edge.ship_strategy in (Partitioner.FORWARD, Partitioner.RESCALE)
            assert edge.distribution == ("POINTWISE" if pointwise else "ALL_TO_ALL")
            assert edge.exchange == ("blocking" if program.batch else "pipelined_bounded")
    assert sorted(job_edges) == crossing


# ---------------------------------------------------------------- physical plan


def check_topological_order_and_regions(program: Program, job: CompiledJob) -> None:
    ordered = job.job_graph.topological()
    assert sorted(v.id for v in ordered) == sorted(job.job_graph.vertices)
    position = {v.id: i for i, v in enumerate(ordered)}
    for vertex in ordered:
        assert all(position[e.producer] < position[vertex.id] for e in vertex.inputs)

    regions = job.physical_plan.pipelined_regions
    if program.batch:
        expected = {frozenset([v]) for v in job.job_graph.vertices}
    else:
        parent = {v: v for v in job.job_graph.vertices}

        def find(x: str) -> str:
            while parent[x] != x:
                x = parent[x]
            return x

        for vertex in ordered:
            for edge in vertex.inputs:
                parent[find(vertex.id)] = find(edge.producer)
        groups: dict[str, set[str]] = defaultdict(set)
        for v in job.job_graph.vertices:
            groups[find(v)].add(v)
        expected = {frozenset(g) for g in groups.values()}
    assert {frozenset(r) for r in regions} == expected
    assert sum(len(r) for r in regions) == len(job.job_graph.vertices)


def check_key_groups_partition_the_range(program: Program, job: CompiledJob) -> None:
    graph = job.stream_graph
    for plan in job.physical_plan.vertices:
        vertex = plan.vertex
        p = vertex.parallelism
        max_p = plan.max_parallelism
        expected_max = (
            vertex.max_parallelism
            if vertex.max_parallelism is not None
            else default_max_parallelism(p)
        )
        assert max_p == expected_max
        assert [s.index for s in plan.subtasks] == list(range(p))
        keyed = any(e.partitioner == Partitioner.HASH for e in graph.nodes[vertex.head].in_edges)
        if not keyed:
            assert all(s.key_groups is None for s in plan.subtasks)
            continue
        covered = []
        for subtask in plan.subtasks:
            assert subtask.key_groups is not None
            first, last = subtask.key_groups
            assert first <= last
            covered.extend(range(first, last + 1))
            for key_group in range(first, last + 1):
                # KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup
                assert key_group * p // max_p == subtask.index
        assert covered == list(range(max_p))


def check_pointwise_and_all_to_all_wiring(program: Program, job: CompiledJob) -> None:
    vertices = job.job_graph.vertices
    for plan in job.physical_plan.vertices:
        down = plan.vertex.parallelism
        for subtask in plan.subtasks:
            assert len(subtask.inputs) == len(plan.vertex.inputs)
            for edge, wiring in zip(plan.vertex.inputs, subtask.inputs, strict=True):
                up = vertices[edge.producer].parallelism
                assert wiring.producer == edge.producer
                if edge.distribution == "POINTWISE":
                    expected = pointwise_producers(up, down, subtask.index)
                else:
                    expected = (0, up - 1)
                assert (wiring.first, wiring.last) == expected


def check_slots(program: Program, job: CompiledJob) -> None:
    plan = job.physical_plan
    slot_of: dict[tuple[str, int], int] = {}
    group_of_slot: dict[int, str] = {}
    largest: dict[str, int] = defaultdict(int)
    for vertex in plan.vertices:
        slots = [s.slot for s in vertex.subtasks]
        # a slot holds at most one subtask of each vertex
        assert len(set(slots)) == len(slots)
        for subtask in vertex.subtasks:
            slot_of[(vertex.vertex.id, subtask.index)] = subtask.slot
            # slots are never shared between slot sharing groups
            assert group_of_slot.setdefault(subtask.slot, vertex.slot_sharing_group) == (
                vertex.slot_sharing_group
            )
        largest[vertex.slot_sharing_group] = max(
            largest[vertex.slot_sharing_group], vertex.vertex.parallelism
        )
    assert plan.slots_per_group == dict(largest)
    assert plan.slots_required == sum(largest.values())
    assert plan.slots_required == len(group_of_slot)
    if not program.batch:
        # streaming: all "default" vertices share one group; named groups are job-wide
        assert all(v.slot_sharing_group == v.vertex.slot_sharing_group for v in plan.vertices)
    else:
        # batch: a "default" vertex gets the group of its pipelined region
        region_of = {v: i for i, r in enumerate(plan.pipelined_regions) for v in r}
        for vertex in plan.vertices:
            if vertex.vertex.slot_sharing_group == "default":
                same_group = [
                    other.vertex.id
                    for other in plan.vertices
                    if other.slot_sharing_group == vertex.slot_sharing_group
                ]
                assert {region_of[v] for v in same_group} == {region_of[vertex.vertex.id]}
            else:
                assert vertex.slot_sharing_group == vertex.vertex.slot_sharing_group
    # a subtask whose only input is FORWARD from the same group sits in its producer's slot
    groups = {v.vertex.id: v.slot_sharing_group for v in plan.vertices}
    for vertex in plan.vertices:
        inputs = vertex.vertex.inputs
        if len(inputs) != 1 or inputs[0].ship_strategy != Partitioner.FORWARD:
            continue
        if groups[inputs[0].producer] != vertex.slot_sharing_group:
            continue
        for subtask in vertex.subtasks:
            assert subtask.slot == slot_of[(inputs[0].producer, subtask.index)]


# ---------------------------------------------------------------- the tests


@SETTINGS
@given(programs())
def test_stream_graph_properties(program: Program) -> None:
    job = compile_or_reject(program)
    check_stream_nodes_follow_hints_and_inheritance(program, job)
    check_operator_ids_are_distinct_and_deterministic(program, job)


@SETTINGS
@given(programs())
def test_job_graph_properties(program: Program) -> None:
    job = compile_or_reject(program)
    check_chaining_matches_flinks_conditions(program, job)
    check_vertices_take_their_heads_properties(program, job)
    check_job_edges_match_unchained_stream_edges(program, job)


@SETTINGS
@given(programs())
def test_physical_plan_properties(program: Program) -> None:
    job = compile_or_reject(program)
    check_topological_order_and_regions(program, job)
    check_key_groups_partition_the_range(program, job)
    check_pointwise_and_all_to_all_wiring(program, job)
    check_slots(program, job)
