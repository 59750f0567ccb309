"""Operator names as every plan shows them: a ``name`` hint verbatim, else a readable default.

Defaults follow Flink's own (``Filter``, ``Map``, ``Flat Map``, ``Keyed Aggregate``,
``Source: x``, ``Sink: x``) so plans read like Flink's.
"""

from __future__ import annotations

from flowc.program import SinkDef, SourceDef, Step

_DEFAULTS = {
    "where": "Filter",
    "select": "Map",
    "extend": "Map",
    "drop": "Map",
    "rename": "Map",
    "explode": "Flat Map",
    "deduplicate": "Deduplicate",
    "route": "Route",
}


def step_name(step: Step) -> str:
    if step.hints.name is not None:
        return step.hints.name
    if step.kind in _DEFAULTS:
        return _DEFAULTS[step.kind]
    if step.kind == "aggregate":
        return "Keyed Aggregate" if step.keys else "Aggregate"
    if step.kind == "window_aggregate" and step.window is not None:
        args = ", ".join(" ".join(a.text.split()) for a in step.window.args)
        return f"Window({step.window.kind}({args}))"
    if step.kind == "join":
        kind = getattr(step.node, "kind", "INNER")
        return "Join" if kind == "INNER" else f"{kind.capitalize()} Outer Join"
    return step.kind


def source_name(source: SourceDef) -> str:
    return source.hints.name if source.hints.name is not None else f"Source: {source.name}"


def sink_name(sink: SinkDef) -> str:
    return sink.hints.name if sink.hints.name is not None else f"Sink: {sink.name}"
