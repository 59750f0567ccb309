"""Operator names as every plan shows them: a ``name`` hint verbatim, else a readable default.

Defaults follow Flink's own (``Filter``, ``Map``, ``Flat Map``, ``Keyed Aggregate``,
``Source: x``, ``Sink: x``) so plans read like Flink's.
"""

from __future__ import annotations

from collections.abc import Callable

from flowc import ast
from flowc.program import (
    AggregateStep,
    DeduplicateStep,
    DimensionJoinStep,
    DropStep,
    ExplodeStep,
    ExtendStep,
    JoinStep,
    KeyByStep,
    MatchStep,
    OverStep,
    PartitionByStep,
    PartitionStep,
    RenameStep,
    RouteStep,
    SelectStep,
    SetStep,
    SinkDef,
    SourceDef,
    Step,
    TopStep,
    UnionStep,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
)
from flowc.sql.spark_sql import interval_millis
from flowc.vocabulary import JoinKind


def _aggregate(step: AggregateStep) -> str:
    return "Keyed Aggregate" if step.keys else "Aggregate"


def _window_aggregate(step: WindowAggregateStep) -> str:
    args = ", ".join(" ".join(a.text.split()) for a in step.window.args)
    return f"Window({step.window.kind}({args}))"


def _top(step: TopStep | WindowTopStep) -> str:
    return rank_name(step.node, step.keys, step.window)


def _join(step: JoinStep | DimensionJoinStep) -> str:
    kind = step.node.kind
    if step.temporal:  # Flink SQL's name for its event-time temporal join
        joined = "InnerJoin" if kind == JoinKind.INNER else "LeftOuterJoin"
        return f"TemporalJoin(joinType=[{joined}])"
    return "Join" if kind == JoinKind.INNER else f"{kind.capitalize()} Outer Join"


def _over(step: OverStep) -> str:
    """Flink SQL's name for its OverAggregate, without its ``select=[...]`` (Flink's own
    decomposition of the calls): ``OverAggregate(partitionBy=[seller], orderBy=[ts ASC],
    window=[ ROWS BETWEEN 10 PRECEDING AND CURRENT ROW])``, a RANGE interval in ms."""
    node = step.node
    start = (
        node.preceding.text
        if node.rows or node.preceding.text == "UNBOUNDED"
        else str(interval_millis(node.preceding))
    )
    frame = f"{'ROWS' if node.rows else 'RANGE'} BETWEEN {start} PRECEDING AND CURRENT ROW"
    parts = [f"partitionBy=[{', '.join(step.keys)}]"] if step.keys else []
    parts += [f"orderBy=[{node.order.value} ASC]", f"window=[ {frame}]"]
    return f"OverAggregate({', '.join(parts)})"


def _match(step: MatchStep) -> str:
    """Flink SQL's name for its Match, without its measures, pattern and conditions:
    ``Match(partitionBy=[symbol], orderBy=[rowtime ASC], rowsPerMatch=[ONE ROW PER
    MATCH], after=[SKIP PAST LAST ROW])``."""
    node = step.node
    after = "SKIP PAST LAST ROW" if node.past_last_row else "SKIP TO NEXT ROW"
    return (
        f"Match(partitionBy=[{', '.join(step.keys)}], orderBy=[{node.order.value} ASC], "
        f"rowsPerMatch=[ONE ROW PER MATCH], after=[{after}])"
    )


def _named(name: str) -> Callable[[Step], str]:
    return lambda step: name


def _partition(step: Step) -> str:
    """KEY BY and PARTITION run no operator of their own: plans never show their name."""
    return str(step.kind)


#: Each step class's default name (tests/test_step_classes.py: every class has one).
DEFAULT_NAMES: dict[type[Step], Callable[..., str]] = {
    WhereStep: _named("Filter"),
    SelectStep: _named("Map"),
    ExtendStep: _named("Map"),
    SetStep: _named("Map"),
    DropStep: _named("Map"),
    RenameStep: _named("Map"),
    ExplodeStep: _named("Flat Map"),
    KeyByStep: _partition,
    PartitionStep: _partition,
    PartitionByStep: _partition,
    AggregateStep: _aggregate,
    WindowAggregateStep: _window_aggregate,
    DeduplicateStep: _named("Deduplicate"),
    OverStep: _over,
    MatchStep: _match,
    TopStep: _top,
    WindowTopStep: _top,
    JoinStep: _join,
    DimensionJoinStep: _join,
    UnionStep: _named("union"),
    RouteStep: _named("Route"),
}


def step_name(step: Step) -> str:
    if step.hints.name is not None:
        return step.hints.name
    return DEFAULT_NAMES[type(step)](step)


def rank_name(node: ast.Top, keys: tuple[str, ...], window: ast.Window | None) -> str:
    """Flink SQL's name for its Top-N operator: ``Rank(rankEnd=3, partitionBy=[auction],
    orderBy=[price DESC])``, ``WindowRank(window=[TUMBLE(ts, ...)], ...)`` after a WINDOW."""
    order = ", ".join(
        f"{' '.join(o.expr.text.split())} {'DESC' if o.descending else 'ASC'}" for o in node.order
    )
    parts = [f"rankEnd={node.count}", f"partitionBy=[{', '.join(keys)}]", f"orderBy=[{order}]"]
    if window is None:
        return f"Rank({', '.join(parts)})"
    args = ", ".join(" ".join(a.text.split()) for a in window.args)
    return f"WindowRank(window=[{window.kind}({args})], {', '.join(parts)})"


def source_name(source: SourceDef) -> str:
    return source.hints.name if source.hints.name is not None else f"Source: {source.name}"


def sink_name(sink: SinkDef) -> str:
    return sink.hints.name if sink.hints.name is not None else f"Sink: {sink.name}"
