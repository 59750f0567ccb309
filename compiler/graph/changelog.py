"""Changelog modes, as Flink's planner infers them (FlinkChangelogModeInferenceProgram).

Each StreamGraph node gets the changelog mode of its output, in Flink's notation (what
``EXPLAIN CHANGELOG_MODE`` prints): ``I`` insert-only, ``I,UB,UA,D`` retract (or a subset
of it), ``I,UA,D`` upsert; a sink's is ``NONE``, as Flink prints for its Sink node.

Two passes, as Flink's two phases: forward, which kinds of change each operator makes
(its ModifyKindSet: INSERT, UPDATE, DELETE) from its inputs'; backward, whether its
consumers need UPDATE_BEFORE (its UpdateKind): an upsert sink takes updates without it,
an aggregate, a Top-N or a join consuming updates needs it, a row-wise step passes its
consumers' need on, but a WHERE over updates needs it always (Flink's Calc with a
condition, FLINK-9528, asked of Flink 2.3: a debezium-json scan filtered into an upsert
sink shows the Calc ``I,UB,UA,D`` and no DropUpdateBefore). Both walk the graph once in
topological order: linear, deterministic.

A TOP over an aggregate's updates is Flink's UpdateFastStrategy Rank, which needs no
UPDATE_BEFORE, where Flink's RankProcessStrategy picks it: the aggregate's keys (its upsert
key) hold the TOP's PER columns and every BY column only grows in its direction (COUNT or
MAX descending, MIN ascending, over an insert-only input; a key column is constant).
Flink 2.3 also finds a SUM that only grows from a WHERE bounding its argument (its
column intervals): flowc does not, and plans that one as the RetractStrategy Rank.
Otherwise it is the RetractStrategy Rank, which needs it.

A TOP 1 whose first BY expression is an event-time attribute (a source's WATERMARK column,
read unchanged through row-wise steps) ascending, over an insert-only input, is
insert-only (asked of Flink 2.3: ``Rank(strategy=[AppendFastStrategy], ...,
orderBy=[ROWTIME ts ASC])``, ``changelogMode=[I]``, with or without PER, the rank
selected or a second BY expression): Flink emits each group's first row once, when the
watermark passes its time (RowTimeDeduplicateKeepFirstRowFunction), and drops late rows
(:func:`rowtime_first_tops`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterator

from sqlglot import exp

from flowc.catalog import is_upsert
from flowc.fast_dataclass import dataclass
from flowc.graph.stream_graph import StreamGraph, StreamNode
from flowc.graph.transformations import TransformationTree
from flowc.program import (
    ROW_WISE_STEPS,
    AggregateStep,
    DeduplicateStep,
    DimensionJoinStep,
    DropStep,
    ExtendStep,
    FromSource,
    FromView,
    JoinStep,
    OverStep,
    Program,
    RenameStep,
    SelectStep,
    Step,
    Stream,
    TopStep,
    UnionStep,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
    cdc_join,
    cdc_top,
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
        """The kinds of both; one of the four shared sets (a frozen value, equal to the one a
        new object would be: the changelog pass joins kinds thousands of times a compile)."""
        return _KINDS[bool(self.update or other.update), bool(self.delete or other.delete)]


#: Every ModifyKinds value, by (update, delete).
_KINDS = {
    (update, delete): ModifyKinds(update, delete)
    for update in (False, True)
    for delete in (False, True)
}
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
    step: Step | None,
    inputs: ModifyKinds,
    times: frozenset[str] = frozenset(),
    rowtime_tops: Container[int] = (),
) -> ModifyKinds:
    """The kinds of change ``step`` emits, given the union of its inputs' (Flink's
    ModifyKindSetTrait per physical node); None is a node of no step (row-wise).
    ``times``: the sources' event-time columns (an interval join's bounds read them);
    ``rowtime_tops``: the TOPs (by ``id``) of :func:`rowtime_first_tops`."""
    if isinstance(step, TopStep) and id(step) in rowtime_tops and inputs.insert_only:
        # Flink's keep-first row by event time: each group's first row, once, final.
        return INSERT_ONLY
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


def needs_before(step: Step | None, update_fast: bool = False) -> bool | None:
    """Whether ``step`` needs UPDATE_BEFORE from an updating input (True), or passes on its
    own consumers' need (None): row-wise steps do, stateful ones consuming updates retract,
    but for a TOP planned as Flink's UpdateFastStrategy Rank (``update_fast``)."""
    if isinstance(step, TopStep) and update_fast:
        return False
    if isinstance(step, (AggregateStep, TopStep, DeduplicateStep, JoinStep, DimensionJoinStep)):
        return True
    return None


#: A column's monotonicity under updates (Flink's SqlMonotonicity, the kinds it tells apart).
CONSTANT, INCREASING, DECREASING = "constant", "increasing", "decreasing"

#: Aggregate functions whose value over an insert-only input only moves one way (Flink's
#: FlinkRelMdModifiedMonotonicity; COUNT DISTINCT too; SUM only where Flink knows the
#: argument's sign, which flowc does not follow).
_MONOTONIC_CALLS = {"count": INCREASING, "max": INCREASING, "min": DECREASING}


def _aggregate_columns(step: AggregateStep, insert_only_input: bool) -> dict[str, str]:
    """Each output column of ``step`` that only moves one way, and how."""
    columns = {key: CONSTANT for key in step.keys}
    if not insert_only_input:
        return columns
    for item, column in zip(step.node.items, step.schema[len(step.keys) :], strict=False):
        tree = item.expr.tree
        if isinstance(tree, exp.Count):
            columns[column.name] = INCREASING
        elif isinstance(tree, exp.Max | exp.Min) and len(tree.expressions) == 0:
            columns[column.name] = _MONOTONIC_CALLS[tree.key]
    return columns


def _row_wise(step: Step | None, columns: dict[str, str], keys: set[str]) -> bool:
    """Carry ``columns`` (monotonicity) and ``keys`` (the upsert key) through a row-wise
    ``step``, by name (in place); False for a step this does not follow."""
    if step is None or isinstance(step, WhereStep):
        return True
    if isinstance(step, SelectStep | ExtendStep):
        kept: dict[str, str] = dict(columns) if isinstance(step, ExtendStep) else {}
        kept_keys = set(keys) if isinstance(step, ExtendStep) else set()
        for item in step.node.items:
            tree = item.expr.tree
            if not isinstance(tree, exp.Column):
                if item.alias is not None:
                    kept.pop(item.alias.value, None)
                continue
            name = item.alias.value if item.alias is not None else tree.name
            if tree.name in columns:
                kept[name] = columns[tree.name]
            if tree.name in keys:
                kept_keys.add(name)
        columns.clear()
        columns.update(kept)
        keys.clear()
        keys.update(kept_keys)
        return True
    if isinstance(step, DropStep):
        for dropped in step.node.columns:
            columns.pop(dropped.value, None)
            keys.discard(dropped.value)
        return True
    if isinstance(step, RenameStep):
        renamed = {i.old.value: i.new.value for i in step.node.items}
        moved = {renamed.get(c, c): m for c, m in columns.items()}
        columns.clear()
        columns.update(moved)
        moved_keys = {renamed.get(k, k) for k in keys}
        keys.clear()
        keys.update(moved_keys)
        return True
    return False


def is_update_fast(
    graph: StreamGraph, node: StreamNode, by_node: dict[int, Step], kinds: dict[int, ModifyKinds]
) -> bool:
    """Whether the TOP at ``node`` is Flink's UpdateFastStrategy Rank: its input is an
    aggregate's updates, read through row-wise steps only, whose keys hold the PER columns
    and whose BY columns only grow in the order's direction (module docstring)."""
    step = by_node.get(node.id)
    if not isinstance(step, TopStep) or kinds_of_input(node, kinds).insert_only:
        return False
    chain: list[Step | None] = []
    current = node
    while True:
        sources = {e.source_id for e in current.in_edges}
        if len(sources) != 1:
            return False
        current = graph.nodes[sources.pop()]
        found = by_node.get(current.id)
        if isinstance(found, AggregateStep):
            break
        chain.append(found)
    columns = _aggregate_columns(found, kinds_of_input(current, kinds).insert_only)
    keys = set(found.keys)
    for row_step in reversed(chain):
        if not _row_wise(row_step, columns, keys):
            return False
    per = {p.tree.name for p in step.node.per if isinstance(p.tree, exp.Column)}
    if len(per) != len(step.node.per) or not per <= keys or not step.node.order:
        return False
    for item in step.node.order:
        tree = item.expr.tree
        moves = columns.get(tree.name) if isinstance(tree, exp.Column) else None
        if moves is None or (moves != CONSTANT and (moves == INCREASING) != item.descending):
            return False
    return True


def time_attributes(program: Program, stream: Stream, upto: int | None = None) -> frozenset[str]:
    """The columns still Flink's event-time attributes after ``stream``'s first ``upto``
    steps: a source's WATERMARK column, read unchanged (selected, renamed) through row-wise
    steps and KEY BY, as Flink keeps a rowtime attribute through a Calc; none from a CDC
    source. So a TOP reading one has an insert-only input. flowc keeps none
    after a stateful step, a JOIN or an OVER (Flink keeps one through some of them: such a
    TOP is then planned as an updating Rank, a known difference: docs/language.md)."""
    chain: list[tuple[Stream, int | None]] = [(stream, upto)]
    while isinstance(chain[-1][0].origin, FromView):  # a loop: views may chain deep
        chain.append((program.view(chain[-1][0].origin.name).stream, None))
    origin = chain[-1][0].origin
    columns: frozenset[str] = frozenset()
    if isinstance(origin, FromSource) and not program.source(origin.name).changelog:
        watermark = program.source(origin.name).watermark
        columns = frozenset({watermark.column} if watermark is not None else ())
    # else a CDC source's changes (no insert-only input), a side output or malformed
    # records: not followed
    for current, last in reversed(chain):
        for step in current.steps[:last]:
            if step.stateful or step.inputs or isinstance(step, OverStep | UnionStep):
                columns = frozenset()
            else:
                columns = step.passes_on(columns)
    return columns


def rowtime_first(step: TopStep, times: frozenset[str], alone: bool = False) -> bool:
    """Whether ``step`` is TOP 1 whose first BY expression is one of the event-time
    attributes ``times`` (of its input) ascending, which Flink 2.3 plans insert-only;
    ``alone``: and the only BY expression, which Flink runs as its keep-first row by event
    time (RowTimeDeduplicateKeepFirstRowFunction). With a second BY expression Flink runs
    FastTop1Function, which emits updates (+U) and drops no late row, though its plan
    says insert-only (asked of Flink 2.3; docs/language.md, "Top-N")."""
    first = step.node.order[0] if step.node.order else None
    return (
        step.node.count == 1
        and (len(step.node.order) == 1 or not alone)
        and first is not None
        and not first.descending
        and isinstance(first.expr.tree, exp.Column)
        and not first.expr.tree.table
        and first.expr.tree.name in times
    )


def rowtime_first_tops(program: Program, alone: bool = False) -> frozenset[int]:
    """The TOPs (by ``id``) of :func:`rowtime_first` in the program's views and INSERTs
    (each reads an insert-only input: :func:`time_attributes`); ``alone`` as there."""
    found: set[int] = set()
    streams = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    for stream in streams:
        for index, step in enumerate(stream.steps):
            if isinstance(step, TopStep) and rowtime_first(
                step, time_attributes(program, stream, index), alone
            ):
                found.add(id(step))
    return frozenset(found)


def kinds_of_input(
    node: StreamNode, kinds: dict[int, ModifyKinds], changes: Container[int] = ()
) -> ModifyKinds:
    """The union of the kinds of change ``node``'s inputs emit. ``changes``: the CDC
    sources, whose side output (their malformed records) is inserts whatever they read."""
    inputs = INSERT_ONLY
    for edge in node.in_edges:
        side = edge.output_tag is not None and edge.source_id in changes
        inputs = inputs | (INSERT_ONLY if side else kinds[edge.source_id])
    return inputs


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
    # A TOP over a CDC source's changes without its rank, and a JOIN over changes (a CDC
    # source's or an AGGREGATE's), have no upsert key in Flink 2.3: the table flowc writes
    # is its ON CONFLICT DO DEDUPLICATE one, whose SinkUpsertMaterializer reads
    # UPDATE_BEFORE (asked of Flink 2.3: the Rank I,UB,UA,D; the Join over a GROUP BY
    # I,UB,UA).
    materialized = {
        i.span
        for i in program.inserts
        if ((top := cdc_top(program, i)) and not top.ranked) or cdc_join(program, i)
    }
    upsert_sinks = {
        i.span: is_upsert(sink.connector, sink.mode) and i.span not in materialized
        for i in program.inserts
        for sink in (program.sink(i.sink),)
    }
    times = frozenset(s.watermark.column for s in program.sources if s.watermark is not None)
    rowtime_tops = rowtime_first_tops(program)
    changes = changelog_sources(program, tree)
    order = _topological(graph)
    kinds: dict[int, ModifyKinds] = {}
    for node in order:
        kinds[node.id] = (
            changes.get(node.id, INSERT_ONLY)
            if node.kind is NodeKind.SOURCE
            else produced(
                by_node.get(node.id), kinds_of_input(node, kinds, changes), times, rowtime_tops
            )
        )
    update_fast = {n.id for n in order if is_update_fast(graph, n, by_node, kinds)}
    filtered = _filtered_updates(graph, order, by_node, kinds)
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
            asked = needs_before(by_node.get(consumer.id), consumer.id in update_fast)
            need = need or (before[consumer.id] if asked is None else asked)
        if node.id in filtered:
            # Flink's Calc with a condition takes no upserts (FLINK-9528: a filtered-out
            # update after would leave the old row): it reads and emits UPDATE_BEFORE.
            need = True
        before[node.id] = need
    for node in order:
        node.changelog_mode = (
            SINK_MODE if node.kind is NodeKind.SINK else mode_text(kinds[node.id], before[node.id])
        )
    return graph


def _filtered_updates(
    graph: StreamGraph,
    order: list[StreamNode],
    by_node: dict[int, Step],
    kinds: dict[int, ModifyKinds],
) -> set[int]:
    """The nodes of Flink's Calcs with a condition over updates: a WHERE whose input has
    updates, and the row-wise steps after it, which Flink merges into the same Calc."""
    filtered: set[int] = set()
    for node in order:
        step = by_node.get(node.id)
        if not kinds[node.id].update or not isinstance(step, ROW_WISE_STEPS):
            continue
        sources = {e.source_id for e in node.in_edges}
        if isinstance(step, WhereStep) or (len(sources) == 1 and sources <= filtered):
            filtered.add(node.id)
    return filtered


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
