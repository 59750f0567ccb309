"""Operator names as every plan shows them: a ``name`` hint verbatim, else a readable default.

Defaults follow Flink's own (``Filter``, ``Map``, ``Flat Map``, ``Keyed Aggregate``,
``Source: x``, ``Sink: x``) so plans read like Flink's.
"""

from __future__ import annotations

from flowc import ast
from flowc.program import SinkDef, SourceDef, Step
from flowc.vocabulary import JoinKind, StepKind

_DEFAULTS = {
    StepKind.WHERE: "Filter",
    StepKind.SELECT: "Map",
    StepKind.EXTEND: "Map",
    StepKind.DROP: "Map",
    StepKind.RENAME: "Map",
    StepKind.EXPLODE: "Flat Map",
    StepKind.DEDUPLICATE: "Deduplicate",
    StepKind.ROUTE: "Route",
}


def step_name(step: Step) -> str:
    if step.hints.name is not None:
        return step.hints.name
    if step.kind in _DEFAULTS:
        return _DEFAULTS[step.kind]
    if step.kind == StepKind.AGGREGATE:
        return "Keyed Aggregate" if step.keys else "Aggregate"
    if step.kind == StepKind.WINDOW_AGGREGATE and step.window is not None:
        args = ", ".join(" ".join(a.text.split()) for a in step.window.args)
        return f"Window({step.window.kind}({args}))"
    if step.kind in (StepKind.TOP, StepKind.WINDOW_TOP) and isinstance(step.node, ast.Top):
        return rank_name(step.node, step.keys, step.window)
    if step.kind in (StepKind.JOIN, StepKind.DIMENSION_JOIN) and isinstance(step.node, ast.Join):
        kind = step.node.kind
        if step.temporal:  # Flink SQL's name for its event-time temporal join
            joined = "InnerJoin" if kind == JoinKind.INNER else "LeftOuterJoin"
            return f"TemporalJoin(joinType=[{joined}])"
        return "Join" if kind == JoinKind.INNER else f"{kind.capitalize()} Outer Join"
    return str(step.kind)


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
