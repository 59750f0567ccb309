"""Updating pipelines on Spark: a TOP or an AGGREGATE whose updates another AGGREGATE
consumes (issue 28; docs/language.md, "Updating pipelines on Spark").

Spark's own aggregation cannot retract a row it has counted, so where an updating step's
output feeds another stateful step Spark refuses the query (E0702). flowc runs the shapes
found here as Flink does: the updating step (the producer) as a processor emitting Flink's
changelog ('+I', '-U', '+U', '-D' in column ``__flowc_op``), the AGGREGATE after it (the
consumer) as a processor that retracts a row's contribution and adds the new one, and the
upsert sink applying the consumer's changelog by key. Every other consumer of updates
stays refused (E0702). One pass over the INSERT's steps: linear.
"""

from __future__ import annotations

from sqlglot import exp

from flowc.analyze.upsert_sinks import upsert_key
from flowc.fast_dataclass import dataclass
from flowc.program import (
    CHANGE_KEEPING_STEPS,
    ROW_WISE_STEPS,
    AggregateStep,
    CdcJoin,
    FromSource,
    InsertDef,
    JoinStep,
    KeyByStep,
    Program,
    Schema,
    Stream,
    TopStep,
)
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
    consumer through row-wise steps and KEY BY. ``input`` is the consumer's input row."""

    producer: TopStep | AggregateStep | None
    consumer: AggregateStep | TopStep
    input: Schema
    source: str | None = None

    def origin_text(self, keyword: str) -> str:
        """What produces the updates, as a diagnostic names it."""
        if self.producer is None:
            return f"CDC source '{self.source}'"
        return f"{keyword} on line {self.producer.span.line}"


def updating_chain(program: Program, insert: InsertDef) -> UpdatingChain | None:
    """The INSERT's updating chain, None where its steps are not one (views, JOINs and
    UNION ALLs, a third stateful step, a step between the two other than KEY BY, a step
    after the consumer)."""
    stream = insert.stream
    if not isinstance(stream.origin, FromSource):
        return None
    steps = stream.steps
    joined = [i for i, step in enumerate(steps) if step.inputs]
    source = program.source(stream.origin.name)
    if joined:
        return _joined_chain(program, insert) if not source.changelog else None
    stateful = [i for i, step in enumerate(steps) if step.stateful]
    if source.changelog:
        return _cdc_chain(program, insert, source.schema)
    if len(stateful) != 2:
        return None
    first, second = stateful
    producer, consumer = steps[first], steps[second]
    if not isinstance(producer, TopStep | AggregateStep) or producer.window is not None:
        return None
    if isinstance(consumer, TopStep):
        if not isinstance(producer, AggregateStep) or not set(consumer.keys) <= set(producer.keys):
            return None
    elif not isinstance(consumer, AggregateStep):
        return None
    if consumer.window is not None or not consumer.keys or steps[second + 1 :]:
        return None
    if not all(isinstance(step, KeyByStep) for step in steps[first + 1 : second]):
        return None
    return UpdatingChain(producer, consumer, steps[second - 1].schema)


def _joined_chain(program: Program, insert: InsertDef) -> UpdatingChain | None:
    """Nexmark q4's shape: one inner stream-stream JOIN of the INSERT's source with
    another source read through row-wise steps only (an insert-only join: Flink's regular
    join of two append streams emits no retraction), row-wise steps and KEY BY around it,
    then an AGGREGATE without WINDOW, KEY BY steps, and an AGGREGATE with keys ending the
    INSERT."""
    steps = insert.stream.steps
    stateful = [i for i, step in enumerate(steps) if step.stateful]
    if len(stateful) != 3:
        return None
    join, first, second = stateful
    step = steps[join]
    if not isinstance(step, JoinStep) or step.node.kind is not JoinKind.INNER:
        return None
    if len(step.inputs) != 1 or not _insert_only_source(program, step.inputs[0]):
        return None
    before = steps[:join] + steps[join + 1 : first]
    if not all(isinstance(s, CHANGE_KEEPING_STEPS) and not s.inputs for s in before):
        return None
    producer, consumer = steps[first], steps[second]
    if not isinstance(producer, AggregateStep) or not isinstance(consumer, AggregateStep):
        return None
    if producer.window is not None or consumer.window is not None or not consumer.keys:
        return None
    if steps[second + 1 :]:
        return None
    if not all(isinstance(s, KeyByStep) for s in steps[first + 1 : second]):
        return None
    return UpdatingChain(producer, consumer, steps[second - 1].schema)


def _insert_only_source(program: Program, stream: Stream) -> bool:
    """A JOIN's other side as the chain takes it: a source that is no CDC source, read
    through row-wise steps only."""
    if not isinstance(stream.origin, FromSource) or program.source(stream.origin.name).changelog:
        return False
    return all(isinstance(s, ROW_WISE_STEPS) and not s.inputs for s in stream.steps)


def _cdc_chain(program: Program, insert: InsertDef, schema: Schema) -> UpdatingChain | None:
    """A CDC source's changes into an AGGREGATE (streaming): the source's row-wise steps
    and KEY BY, then the AGGREGATE without WINDOW, with keys, as the INSERT's last step."""
    if program.settings.execution_mode == "batch":
        return None
    steps = insert.stream.steps
    if not steps:
        return None
    *before, consumer = steps
    if not isinstance(consumer, AggregateStep) or consumer.window is not None:
        return None
    if not consumer.keys or not all(isinstance(s, CHANGE_KEEPING_STEPS) for s in before):
        return None
    assert isinstance(insert.stream.origin, FromSource)
    return UpdatingChain(
        None, consumer, before[-1].schema if before else schema, insert.stream.origin.name
    )


def changelog_call(expr: exp.Expr) -> tuple[str, str | None] | None:
    """An AGGREGATE item as (function, column or None for ``*``) when the retracting
    aggregate computes it; None otherwise."""
    if not isinstance(expr, exp.Count | exp.Sum | exp.Avg | exp.Min | exp.Max):
        return None
    argument = expr.this
    if isinstance(argument, exp.Star) and isinstance(expr, exp.Count):
        return ("count", None)
    if isinstance(argument, exp.Column) and not argument.table:
        return (expr.sql_name().lower(), argument.name)
    return None


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
