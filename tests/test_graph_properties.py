"""Property tests: Flink's planning invariants on generated .flow topologies.

Hypothesis builds valid programs (sources with random parallelism, views with random
chains of steps and partition steps, hints, UNION ALL, keyed aggregates, views read by
several INSERTs) and every compiled job is checked against the rules of
flink-semantics.md §2, §4 and §6, recomputed here from the StreamGraph and from what
the generator asked for, not taken from flowc's own helpers.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given

import flowc
from flowc.graph.stream_graph import StreamEdge, StreamGraph
from flowc.job import CompiledJob
from flowc.vocabulary import ChainingStrategy, Partitioner
from tests.helpers.topologies import CHAINING, SETTINGS, Program, compile_or_reject, programs

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
        if program.batch:
            # A forward group takes its members' least max parallelism (docs/plans.md).
            if head.max_parallelism is not None:
                assert vertex.max_parallelism is not None
                assert vertex.max_parallelism <= head.max_parallelism
            for edge in vertex.inputs:
                if edge.ship_strategy == Partitioner.FORWARD:
                    producer = job.job_graph.vertices[edge.producer]
                    assert producer.max_parallelism == vertex.max_parallelism
        else:
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
    # BATCH mode: Flink's ForwardForUnspecifiedPartitioner (no partition step written between
    # equal parallelisms) ships RESCALE where it is not chained (docs/plans.md, "Batch mode").
    crossing = sorted(
        (
            owner[e.source_id],
            owner[e.target_id],
            Partitioner.RESCALE if program.batch and e.forward_for_unspecified else e.partitioner,
        )
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
