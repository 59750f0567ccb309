"""Changelog modes, as Flink's planner infers them (FlinkChangelogModeInferenceProgram).

Each StreamGraph node gets the changelog mode of its output, in Flink's notation (what
``EXPLAIN CHANGELOG_MODE`` prints): ``I`` insert-only, ``I,UB,UA,D`` retract (or a subset
of it), ``I,UA,D`` upsert; a sink's is ``NONE``, as Flink prints for its Sink node.

Two passes, as Flink's two phases: forward, which kinds of change each operator makes
(its ModifyKindSet: INSERT, UPDATE, DELETE) from its inputs'; backward, whether its
consumers need UPDATE_BEFORE (its UpdateKind): an upsert sink takes updates without it,
an aggregate, a Top-N or a join consuming updates needs it, a row-wise step passes its
consumers' need on. Both walk the graph once in topological order: linear, deterministic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from sqlglot import exp

from flowc.catalog import is_upsert
from flowc.fast_dataclass import dataclass
from flowc.graph.stream_graph import StreamGraph, StreamNode
from flowc.graph.transformations import TransformationTree
from flowc.program import (
    AggregateStep,
    DeduplicateStep,
    DimensionJoinStep,
    JoinStep,
    Program,
    Step,
    Stream,
    TopStep,
    WindowAggregateStep,
    WindowTopStep,
)
from flowc.vocabulary import JoinKind, NodeKind

#: What Flink prints for a sink node (it produces no rows).
SINK_MODE = "NONE"


@dataclass(frozen=True, slots=True)
class ModifyKinds:
    """Flink's ModifyKindSet: the kinds of change an operator emits besides INSERT."""

    update: bool = False
    delete: bool = False

    @property
    def insert_only(self) -> bool:
        return not (self.update or self.delete)

    def __or__(self, other: ModifyKinds) -> ModifyKinds:
        return ModifyKinds(self.update or other.update, self.delete or other.delete)


INSERT_ONLY = ModifyKinds()
ALL_CHANGES = ModifyKinds(update=True, delete=True)


def mode_text(kinds: ModifyKinds, before: bool) -> str:
    """Flink's ChangelogMode notation: ``I``, ``I,UB,UA``, ``I,UA,D``..."""
    parts = ["I"]
    if kinds.update and before:
        parts.append("UB")
    if kinds.update:
        parts.append("UA")
    if kinds.delete:
        parts.append("D")
    return ",".join(parts)


def is_interval_join(step: JoinStep, times: frozenset[str]) -> bool:
    """Whether Flink plans the JOIN as its IntervalJoin: ON bounds one side's event time by
    a range (BETWEEN, <, <=, >, >=) over the sources' event-time columns ``times``."""
    condition = step.node.condition
    if condition is None:
        return False
    for node in condition.tree.walk():
        if isinstance(node, exp.Between | exp.LT | exp.LTE | exp.GT | exp.GTE) and any(
            c.name in times for c in node.find_all(exp.Column)
        ):
            return True
    return False


def produced(
    step: Step | None, inputs: ModifyKinds, times: frozenset[str] = frozenset()
) -> ModifyKinds:
    """The kinds of change ``step`` emits, given the union of its inputs' (Flink's
    ModifyKindSetTrait per physical node); None is a node of no step (row-wise).
    ``times``: the sources' event-time columns (an interval join's bounds read them)."""
    if isinstance(step, AggregateStep):
        # GroupAggregate: INSERT and UPDATE; DELETE only when its input retracts rows.
        return ModifyKinds(update=True, delete=not inputs.insert_only)
    if isinstance(step, (WindowAggregateStep, WindowTopStep)):
        return INSERT_ONLY
    if isinstance(step, TopStep):
        return ALL_CHANGES
    if isinstance(step, DeduplicateStep):
        # keep-first Deduplicate emits inserts; over updates Flink plans a Rank instead.
        return INSERT_ONLY if inputs.insert_only else ALL_CHANGES
    if isinstance(step, DimensionJoinStep) and step.temporal:
        return INSERT_ONLY
    if isinstance(step, JoinStep) and inputs.insert_only and is_interval_join(step, times):
        # IntervalJoin over insert-only inputs (over updates Flink plans a regular Join).
        return INSERT_ONLY
    if isinstance(step, (JoinStep, DimensionJoinStep)):
        # An inner Join passes on its inputs' kinds; an outer one retracts its padded rows.
        return inputs if step.node.kind == JoinKind.INNER else ALL_CHANGES
    return inputs


def needs_before(step: Step | None) -> bool | None:
    """Whether ``step`` needs UPDATE_BEFORE from an updating input (True), or passes on its
    own consumers' need (None): row-wise steps do, stateful ones consuming updates retract."""
    if isinstance(step, (AggregateStep, TopStep, DeduplicateStep, JoinStep, DimensionJoinStep)):
        return True
    return None


def _steps(stream: Stream) -> Iterator[Step]:
    for step in stream.steps:
        yield step
        for other in step.inputs:
            yield from _steps(other)


def infer_changelog_modes(
    graph: StreamGraph, program: Program, tree: TransformationTree
) -> StreamGraph:
    """Set each node's ``changelog_mode`` (and return ``graph``)."""
    by_node: dict[int, Step] = {}
    streams = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    for stream in streams:
        for step in _steps(stream):
            node_id = tree.step_nodes.get(id(step))
            if node_id is not None:
                by_node.setdefault(node_id, step)
    upsert_sinks = {
        i.span: is_upsert(sink.connector, sink.mode)
        for i in program.inserts
        for sink in (program.sink(i.sink),)
    }
    times = frozenset(s.watermark.column for s in program.sources if s.watermark is not None)
    changes = changelog_sources(program, tree)
    order = _topological(graph)
    kinds: dict[int, ModifyKinds] = {}
    for node in order:
        inputs = INSERT_ONLY
        for edge in node.in_edges:
            # A source's side output (its malformed records) is inserts whatever it reads.
            side = edge.output_tag is not None and edge.source_id in changes
            inputs = inputs | (INSERT_ONLY if side else kinds[edge.source_id])
        kinds[node.id] = (
            changes.get(node.id, INSERT_ONLY)
            if node.kind is NodeKind.SOURCE
            else produced(by_node.get(node.id), inputs, times)
        )
    before: dict[int, bool] = {}
    for node in reversed(order):
        if node.id in changes:
            # Flink's CDC scan says I,UB,UA,D whatever its consumers need (a DropUpdateBefore
            # after it drops UPDATE_BEFORE for an upsert sink).
            before[node.id] = True
            continue
        need = False
        for edge in node.out_edges:
            consumer = graph.nodes[edge.target_id]
            if consumer.kind is NodeKind.SINK:
                need = need or not upsert_sinks.get(consumer.span, False)
                continue
            asked = needs_before(by_node.get(consumer.id))
            need = need or (before[consumer.id] if asked is None else asked)
        before[node.id] = need
    for node in order:
        node.changelog_mode = (
            SINK_MODE if node.kind is NodeKind.SINK else mode_text(kinds[node.id], before[node.id])
        )
    return graph


def changelog_sources(program: Program, tree: TransformationTree) -> dict[int, ModifyKinds]:
    """The source nodes whose records are changes (a debezium-json source): every kind,
    as Flink's scan of a CDC format (``changelogMode=[I,UB,UA,D]``, asked of Flink 2.3)."""
    return {
        tree.source_nodes[s.name]: ALL_CHANGES
        for s in program.sources
        if s.changelog and s.name in tree.source_nodes
    }


def _topological(graph: StreamGraph) -> list[StreamNode]:
    """The nodes, each after its inputs (Kahn's algorithm, ties by id)."""
    waiting = {n.id: len({e.source_id for e in n.in_edges}) for n in graph.nodes.values()}
    ready = deque(sorted(i for i, w in waiting.items() if w == 0))
    order: list[StreamNode] = []
    while ready:
        node = graph.nodes[ready.popleft()]
        order.append(node)
        for target in sorted({e.target_id for e in node.out_edges}):
            waiting[target] -= 1
            if waiting[target] == 0:
                ready.append(target)
    return order
