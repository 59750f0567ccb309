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
    if step.kind in (StepKind.JOIN, StepKind.DIMENSION_JOIN) and isinstance(step.node, ast.Join):
        kind = step.node.kind
        return "Join" if kind == JoinKind.INNER else f"{kind.capitalize()} Outer Join"
    return str(step.kind)


def source_name(source: SourceDef) -> str:
    return source.hints.name if source.hints.name is not None else f"Source: {source.name}"


def sink_name(sink: SinkDef) -> str:
    return sink.hints.name if sink.hints.name is not None else f"Sink: {sink.name}"
