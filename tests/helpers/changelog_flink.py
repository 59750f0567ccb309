"""Flink's changelog modes beside flowc's: a PyFlink probe printing each physical node's
``changelogMode`` under ``EXPLAIN CHANGELOG_MODE``, a flowc program as the SQL Flink runs
(sources datagen, sinks print or blackhole), and both plans' (kind, mode) pairs. Shared by
the tests comparing changelog modes with Flink 2.3."""

from __future__ import annotations

import re

from flowc.graph.stream_graph import StreamGraph
from flowc.vocabulary import NodeKind

#: Flink's physical node kinds, as the flowc kind they are compared with.
FLINK_KINDS = {
    "GroupWindowAggregate": "window",
    "GlobalWindowAggregate": "window",
    "WindowAggregate": "window",
    "GroupAggregate": "aggregate",
    "Rank": "rank",
    "Deduplicate": "rank",
    "WindowRank": "window rank",
    "Match": "match",
    "TableSourceScan": "source",
}

PROBE = r"""
import json, re, sys
from pyflink.table import EnvironmentSettings, ExplainDetail, TableEnvironment
out = {}
for name, statements in json.loads(sys.argv[1]).items():
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    inserts = env.create_statement_set()
    try:
        for s in statements:
            if s.lstrip().upper().startswith("INSERT"):
                inserts.add_insert_sql(s)
            else:
                env.execute_sql(s)
        plan = inserts.explain(ExplainDetail.CHANGELOG_MODE)
    except Exception as e:
        out[name] = str(e).splitlines()[1][:300] if "\n" in str(e) else str(e)[:300]
        continue
    physical = plan.split("== Optimized Physical Plan ==")[1].split("== Optimized Execution")[0]
    out[name] = [
        [len(m.group(1)), m.group(2), m.group(3)]
        for m in (
            re.match(r"^([ +:|-]*)(\w+)\(.*changelogMode=\[([A-Z,]+)\]", line)
            for line in physical.splitlines()
        )
        if m
    ]
print(json.dumps(out))
"""


def as_flink_sql(program: str) -> list[str]:
    """``program``'s statements as Flink runs them: sources datagen, sinks print/blackhole."""
    body = "\n".join(
        line for line in program.splitlines() if not line.strip().upper().startswith("SET ")
    )
    statements = [s.strip() for s in body.split(";") if s.strip()]
    sinks = {
        m.group(1).lower() for s in statements if (m := re.match(r"INSERT\s+INTO\s+(\w+)", s, re.I))
    }
    out = []
    for s in statements:
        if m := re.match(r"CREATE\s+TABLE\s+(\w+)", s, re.I):
            options = re.search(r"WITH\s*\((.*)\)\s*$", s, re.S | re.I)
            head = s[: options.start()] if options else s
            text = options.group(1) if options else ""
            upsert = "PRIMARY KEY" in head.upper() and re.search(r"'(files|postgres)'", text)
            if m.group(1).lower() not in sinks:
                connector = "datagen"
            else:
                connector = "blackhole" if upsert else "print"
            s = f"{head}WITH ('connector' = '{connector}')"
        out.append(s)
    return out


def flowc_modes(graph: StreamGraph) -> set[tuple[str, str]]:
    """The (kind, mode) pairs of the compared flowc nodes, and ("sink input", mode): sets,
    as flowc reads a source once where Flink scans it once per query of a UNION ALL."""
    modes: set[tuple[str, str]] = set()
    for node in graph.nodes.values():
        name = node.name
        kind = (
            "source"
            if node.kind is NodeKind.SOURCE
            else "window rank"
            if name.startswith("WindowRank")
            else "window"
            if name.startswith("Window(")
            else "aggregate"
            if name == "Keyed Aggregate"
            else "rank"
            if name.startswith(("Rank(", "Deduplicate"))
            else "match"
            if name.startswith("Match(")
            else None
        )
        if kind is not None:
            modes.add((kind, node.changelog_mode))
        for edge in node.out_edges:
            if graph.nodes[edge.target_id].kind is NodeKind.SINK:
                modes.add(("sink input", node.changelog_mode))
    return modes


def flink_modes(plan: list[list[object]]) -> set[tuple[str, str]]:
    """The same of Flink's physical plan (a list of [indent, kind, mode], parents first:
    the line after a Sink is its input)."""
    modes: set[tuple[str, str]] = set()
    for i, (_, kind, mode) in enumerate(plan):
        assert isinstance(kind, str) and isinstance(mode, str)
        if kind in FLINK_KINDS:
            modes.add((FLINK_KINDS[kind], mode))
        if i and plan[i - 1][1] == "Sink":
            modes.add(("sink input", mode))
    return modes
