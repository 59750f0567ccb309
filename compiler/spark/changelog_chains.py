"""Updating pipelines on Spark: a TOP or an AGGREGATE whose updates another AGGREGATE
consumes (issue 28; docs/language.md, "Updating pipelines on Spark").

Spark's own aggregation cannot retract a row it has counted, so where an updating step's
output feeds another stateful step Spark refuses the query (E0702). flowc runs the shapes
found here as Flink does: the updating step (the producer) as a processor emitting Flink's
changelog ('+I', '-U', '+U', '-D' in column ``__flowc_op``), the AGGREGATE after it (the
consumer) as a processor that retracts a row's contribution and adds the new one, and the
upsert sink applying the consumer's changelog by key. A TOP or an AGGREGATE over an
AGGREGATE's updates is found through views read by nothing else and through steps that
only select or rename columns (the SQL ``ROW_NUMBER()`` form over a ``GROUP BY``, and a
``GROUP BY`` over a ``GROUP BY`` subquery, lower so), the AGGREGATE's keys traced by
name. Every other consumer of updates stays refused (E0702). One pass over the INSERT's
steps (and its views'): linear.
"""

from __future__ import annotations

from sqlglot import exp

from flowc.analyze.upsert_sinks import upsert_key
from flowc.fast_dataclass import dataclass
from flowc.graph.changelog import rowtime_first_tops
from flowc.program import (
    CHANGE_KEEPING_STEPS,
    ROW_WISE_STEPS,
    AggregateStep,
    CdcJoin,
    DropStep,
    FromSource,
    InsertDef,
    JoinStep,
    KeyByStep,
    Program,
    RenameStep,
    Schema,
    SelectStep,
    Step,
    Stream,
    TopStep,
    WhereStep,
    carries_changes,
    carries_filtered_changes,
    cdc_producer,
    cdc_top,
    last_aggregate,
    streams_from_source,
)
from flowc.sql.spark_sql import UnsupportedOnSpark, select_columns
from flowc.vocabulary import JoinKind

#: The calls the retracting aggregate computes (Flink's count, sum, avg, min and max with
#: retraction: min and max keep a count per value).
CHANGELOG_CALLS = ("count", "sum", "avg", "min", "max")


@dataclass(frozen=True, slots=True)
class UpdatingChain:
    """An INSERT whose updating ``producer`` (a TOP or AGGREGATE without WINDOW, over
    insert-only rows) feeds ``consumer``, an AGGREGATE without WINDOW with group keys
    (or a TOP without WINDOW with PER columns over an AGGREGATE's updates, its rows
    identified by that AGGREGATE's keys, which hold the PER columns), through KEY BY
    steps only; the consumer's rows go straight to the sink. Without a
    producer, the updates are a CDC source's (``source``, debezium-json), reaching the
    consumer through row-wise steps and KEY BY, its rows the sink through projections
    keeping its keys (``carrying``). ``input`` is the consumer's input row."""

    producer: TopStep | AggregateStep | None
    consumer: AggregateStep | TopStep
    input: Schema
    source: str | None = None
    #: A TOP consumer's row identity where its rank does not reach the sink: the
    #: AGGREGATE's keys as the TOP's input names them (Flink's upsert key then); empty
    #: where the rank does, and for an AGGREGATE consumer.
    row_keys: tuple[str, ...] = ()
    #: A TOP consumer's upsert key as the sink's columns name it: the PER columns and the
    #: rank, or the row keys (after the projections following the TOP).
    sink_key: tuple[str, ...] = ()
    #: The projections (by ``id``) between the AGGREGATE and the TOP and after the TOP,
    #: or after an AGGREGATE consumer: each passes every change on with its kind.
    carrying: frozenset[int] = frozenset()
    #: The producer's input row (its qualified columns read by name: :func:`changelog_call`).
    producer_input: Schema = ()
    #: A WHERE follows the consumer (a CDC source's AGGREGATE): the sink deletes the key of
    #: a '-U' that passes it unless the micro-batch upserts the key (Flink's sink takes the
    #: UPDATE_BEFORE its Calc emits as a delete).
    before_deletes: bool = False

    def origin_text(self, keyword: str) -> str:
        """What produces the updates, as a diagnostic names it."""
        if self.producer is None:
            return f"CDC source '{self.source}'"
        return f"{keyword} on line {self.producer.span.line}"


def updating_chain(program: Program, insert: InsertDef) -> UpdatingChain | None:
    """The INSERT's updating chain, None where its steps are not one (UNION ALLs, an outer
    JOIN, a third stateful step, a step between the two other than KEY BY or a projection,
    a step after the consumer other than a projection keeping its keys; for a TOP over an
    AGGREGATE, see :func:`_top_over_updates`)."""
    found = _top_over_updates(program, insert) or _top_over_changes(program, insert)
    if found is not None:
        return found
    streams = streams_from_source(program, insert.stream)
    origin = streams[0].origin if streams is not None else None
    if isinstance(origin, FromSource) and program.source(origin.name).changelog:
        assert streams is not None
        steps = [step for s in streams for step in s.steps]
        if any(step.inputs for step in steps):
            return None
        return _cdc_chain(program, origin.name, steps) or _aggregate_over_updates(program, insert)
    return _aggregate_over_updates(program, insert)


def _aggregate_over_updates(program: Program, insert: InsertDef) -> UpdatingChain | None:
    """An AGGREGATE without WINDOW with keys (the consumer) over the updates of a TOP or
    an AGGREGATE without WINDOW (the producer) over a source that is no CDC source: the
    INSERT's steps and those of the views it reads, each read by nothing else (Flink SQL's
    ``GROUP BY`` over a ``GROUP BY`` subquery lowers to such a view, ending with the
    producer and the projection of the subquery's SELECT list). Nexmark q4's shape has an
    inner stream-stream JOIN with another source, read through row-wise steps only (an
    insert-only join: Flink's regular join of two append streams emits no retraction),
    before an AGGREGATE producer, row-wise steps and KEY BY around it. Between producer and
    consumer only KEY BY and projections (:func:`_projection`), after the consumer only
    projections keeping its keys (:func:`~flowc.program.carries_changes`: the outer SELECT
    list): each passes every change on with its kind."""
    steps = _steps_through_views(program, insert.stream)
    if steps is None:
        return None
    stateful = [i for i, step in enumerate(steps) if step.stateful]
    joined = [i for i, step in enumerate(steps) if step.inputs]
    if joined:
        if len(stateful) != 3 or joined != stateful[:1]:
            return None
        join = steps[joined[0]]
        if not isinstance(join, JoinStep) or join.node.kind is not JoinKind.INNER:
            return None
        if len(join.inputs) != 1 or not _insert_only_source(program, join.inputs[0]):
            return None
        stateful = stateful[1:]
    if len(stateful) != 2:
        return None
    first, second = stateful
    producer, consumer = steps[first], steps[second]
    if not isinstance(producer, TopStep | AggregateStep) or producer.window is not None:
        return None
    if id(producer) in rowtime_first_tops(program, alone=True):
        return None  # insert-only (Flink's keep-first row by event time): no updates
    if joined and not isinstance(producer, AggregateStep):
        return None
    if joined and not all(
        isinstance(s, CHANGE_KEEPING_STEPS) for s in steps[:first] if s is not steps[joined[0]]
    ):
        return None
    if not isinstance(consumer, AggregateStep) or consumer.window is not None:
        return None
    between = [s for s in steps[first + 1 : second] if not isinstance(s, KeyByStep)]
    after = steps[second + 1 :]
    if not consumer.keys or _traced(between, producer.schema) is None:
        return None
    if not carries_changes(after, consumer.keys):
        return None
    origin = streams_from_source(program, insert.stream)
    assert origin is not None and isinstance(origin[0].origin, FromSource)
    return UpdatingChain(
        producer,
        consumer,
        steps[second - 1].schema,
        carrying=frozenset(id(s) for s in [*between, *after]),
        producer_input=(
            steps[first - 1].schema
            if first
            else program.source(origin[0].origin.name).output_schema
        ),
    )


def _top_over_updates(program: Program, insert: InsertDef) -> UpdatingChain | None:
    """A TOP without WINDOW over an AGGREGATE without WINDOW whose keys hold the PER
    columns (a row never moves between partitions), from a source that is no CDC source:
    the INSERT's steps and those of the views it reads, each view read by nothing else
    (its processors' output is this chain's). Between the two only KEY BY and
    projections, after the TOP only projections (:func:`_projection`), which keep the
    AGGREGATE's keys and the sink's upsert key (the PER columns and the rank where the
    rank reaches the sink, else the AGGREGATE's keys)."""
    steps = _steps_through_views(program, insert.stream)
    if steps is None:
        return None
    stateful = [i for i, step in enumerate(steps) if step.stateful]
    if len(stateful) != 2 or any(step.inputs for step in steps):
        return None
    first, second = stateful
    producer, consumer = steps[first], steps[second]
    if not isinstance(producer, AggregateStep) or not isinstance(consumer, TopStep):
        return None
    if producer.window is not None or consumer.window is not None:
        return None
    between = [s for s in steps[first + 1 : second] if not isinstance(s, KeyByStep)]
    names = _traced(between, producer.schema)
    after = steps[second + 1 :]
    final = _traced(after, consumer.schema)
    if names is None or final is None:
        return None
    carrying = {id(s) for s in [*between, *after]}
    if any(k not in names for k in producer.keys):
        return None
    row_keys = tuple(names[k] for k in producer.keys)
    if not set(consumer.keys) <= set(row_keys):
        return None
    rank = consumer.node.rank
    ranked = rank is not None and rank.value in final
    wanted = [*consumer.keys, rank.value] if rank is not None and ranked else list(row_keys)
    if any(k not in final for k in wanted):
        return None
    return UpdatingChain(
        producer,
        consumer,
        steps[second - 1].schema,
        row_keys=() if ranked else row_keys,
        sink_key=tuple(final[k] for k in wanted),
        carrying=frozenset(carrying),
    )


def _steps_through_views(program: Program, stream: Stream) -> list[Step] | None:
    """The steps from a source to the end of ``stream``, through the views it reads
    (:func:`~flowc.program.streams_from_source`). From a CDC source, only where its
    changes reach the producer as its retract input (:func:`~flowc.program.cdc_producer`:
    row-wise steps and KEY BY, no JOIN)."""
    streams = streams_from_source(program, stream)
    if streams is None:
        return None
    origin = streams[0].origin
    if not isinstance(origin, FromSource):
        return None
    steps = [step for s in streams for step in s.steps]
    if program.source(origin.name).changelog and (
        cdc_producer(program, stream) is None or any(step.inputs for step in steps)
    ):
        return None
    return steps


def _top_over_changes(program: Program, insert: InsertDef) -> UpdatingChain | None:
    """A TOP over a CDC source's changes (:func:`~flowc.program.cdc_top`): its input rows
    are identified by the source's PRIMARY KEY; the sink's upsert key is the PER columns
    and the rank where the rank reaches the sink, else that key (each as the last
    projection names it; empty where one does not reach the sink, which E0742 says)."""
    found = cdc_top(program, insert)
    if found is None:
        return None
    top = found.top
    final = _traced(list(found.after), top.schema)
    if final is None:
        return None
    rank = top.node.rank
    ranked = rank is not None and rank.value in final
    wanted = [*top.keys, rank.value] if rank is not None and ranked else list(found.identity)
    return UpdatingChain(
        None,
        top,
        found.input,
        found.source.name,
        row_keys=() if ranked else found.identity,
        sink_key=tuple(final[k] for k in wanted) if all(k in final for k in wanted) else (),
        carrying=frozenset(id(s) for s in found.after),
    )


def _traced(steps: list[Step], schema: Schema) -> dict[str, str] | None:
    """Where each column of ``schema`` ends up after ``steps``, all projections
    (:func:`_projection`): its name there (the first, where a SELECT repeats it), absent
    where dropped; None where a step is no projection."""
    names = {c.name: c.name for c in schema}  # the name now -> the name in ``schema``
    for step in steps:
        projected = _projection(step)
        if projected is None:
            return None
        names = {out: names[source] for out, source in projected if source in names}
    return {original: current for current, original in reversed(names.items())}


def _projection(step: Step) -> list[tuple[str, str]] | None:
    """A step that only selects, renames or drops columns, as its (output, input) column
    names; None for any other (a computed item, a WHERE, a qualified name). Such a step
    passes each change on as it is, so the rows it names keep their identity."""
    if isinstance(step, RenameStep):
        renamed = {i.old.value: i.new.value for i in step.node.items}
        inverse = {new: old for old, new in renamed.items()}
        return [(c.name, inverse.get(c.name, c.name)) for c in step.schema]
    if isinstance(step, DropStep):
        return [(c.name, c.name) for c in step.schema]
    if not isinstance(step, SelectStep) or step.watermark is not None:
        return None
    try:
        items = select_columns(step.node.items, [c.name for c in step.schema])
    except UnsupportedOnSpark:
        return None
    pairs = []
    for item, name in items:
        if item is None:
            pairs.append((name, name))
            continue
        tree = item.expr.tree
        if not isinstance(tree, exp.Column) or not isinstance(tree.this, exp.Identifier):
            return None
        if tree.table:
            return None
        pairs.append((name, tree.name))
    return pairs


def _insert_only_source(program: Program, stream: Stream) -> bool:
    """A JOIN's other side as the chain takes it: a source that is no CDC source, read
    through row-wise steps only."""
    if not isinstance(stream.origin, FromSource) or program.source(stream.origin.name).changelog:
        return False
    return all(isinstance(s, ROW_WISE_STEPS) and not s.inputs for s in stream.steps)


def _cdc_chain(program: Program, source: str, steps: list[Step]) -> UpdatingChain | None:
    """A CDC source's changes into an AGGREGATE (streaming): the source's row-wise steps
    and KEY BY, then the AGGREGATE without WINDOW, with keys, the INSERT's last one,
    followed only by projections keeping its keys (:func:`carries_changes`: the SQL form's
    outer SELECT) and WHEREs (:func:`carries_filtered_changes`: a HAVING). ``steps``: the
    INSERT's and those of the views it reads, each read by nothing else (Flink inlines a
    view, so its steps are the INSERT's)."""
    if program.settings.execution_mode == "batch":
        return None
    last = last_aggregate(steps)
    if last is None:
        return None
    before, consumer, after = steps[:last], steps[last], steps[last + 1 :]
    if not isinstance(consumer, AggregateStep) or consumer.window is not None:
        return None
    if not consumer.keys or not all(isinstance(s, CHANGE_KEEPING_STEPS) for s in before):
        return None
    if not carries_filtered_changes(after, consumer.keys):
        return None
    return UpdatingChain(
        None,
        consumer,
        before[-1].schema if before else program.source(source).schema,
        source,
        carrying=frozenset(map(id, after)),
        before_deletes=any(isinstance(s, WhereStep) for s in after),
    )


def changelog_call(expr: exp.Expr, input: Schema | None) -> tuple[str, str | None] | None:
    """An AGGREGATE item as (function, column or None for ``*``) when the retracting
    aggregate computes it; None otherwise. The processor reads a column by its name, so a
    qualified one (``MAX(B.price)``, as Flink SQL writes it) only where ``input``, the
    AGGREGATE's input row, holds that name once, of that relation (``None``: the
    streaming rules have checked so, as the code generator asks after them)."""
    if not isinstance(expr, exp.Count | exp.Sum | exp.Avg | exp.Min | exp.Max):
        return None
    argument = expr.this
    if isinstance(argument, exp.Star) and isinstance(expr, exp.Count):
        return ("count", None)
    if not isinstance(argument, exp.Column) or not isinstance(argument.this, exp.Identifier):
        return None
    if argument.table and input is not None:
        named = [c for c in input if c.name.lower() == argument.name.lower()]
        if len(named) != 1 or (named[0].qualifier or "").lower() != argument.table.lower():
            return None
    return (expr.sql_name().lower(), argument.name)


def join_row_key(program: Program, insert: InsertDef, joined: CdcJoin) -> tuple[str, ...]:
    """The sink's key as columns of the CDC join's rows (each a joined column the steps
    after the JOIN pass on unchanged, under its name there); () where one is not."""
    key = upsert_key(program.sink(insert.sink))
    reached: dict[str, str] = {}
    for column in (*joined.left, *joined.right):
        names = frozenset({column.name})
        for step in joined.after:
            names = step.passes_on(names)
        for name in names:
            reached.setdefault(name.lower(), column.name)
    found = [reached.get(k.lower()) for k in key]
    return tuple(f for f in found if f is not None) if key and None not in found else ()
