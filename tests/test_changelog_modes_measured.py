"""Changelog modes without Flink, as Flink 2.3's EXPLAIN CHANGELOG_MODE printed them for the
updating and windowed forms below (tests/test_changelog_against_flink.py compares them live)."""

from __future__ import annotations

import json

import pytest

import flowc
from flowc.graph.changelog import ALL_CHANGES, INSERT_ONLY, ModifyKinds, mode_text
from tests.helpers.flink_sql_cases import flink_sql

SOURCE = """
CREATE TABLE b (k STRING, p BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen');
"""

CASES = {
    # GroupAggregate into a retract sink: [I,UB,UA] (Flink's agg_print).
    "aggregate_retract_sink": (
        """
        CREATE TABLE o (k STRING, n BIGINT) WITH ('connector' = 'console');
        INSERT INTO o SELECT k, COUNT(*) AS n FROM b GROUP BY k;
        """,
        {"Keyed Aggregate": ["I,UB,UA"], "Source: b": ["I"], "Sink: o": ["NONE"]},
    ),
    # Into an upsert sink with a PRIMARY KEY: [I,UA], no UPDATE_BEFORE.
    "aggregate_upsert_sink": (
        """
        CREATE TABLE o (k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out/o', 'format' = 'json');
        INSERT INTO o SELECT k, COUNT(*) AS n FROM b GROUP BY k;
        """,
        {"Keyed Aggregate": ["I,UA"]},
    ),
    # An aggregate over an aggregate: the inner one must retract ([I,UB,UA]), the outer
    # one deletes the groups its input retracts ([I,UB,UA,D]).
    "aggregate_over_aggregate": (
        """
        CREATE TABLE o (n BIGINT, c BIGINT) WITH ('connector' = 'console');
        INSERT INTO o SELECT n, COUNT(*) AS c FROM (SELECT k, COUNT(*) AS n FROM b GROUP BY k)
          GROUP BY n;
        """,
        {"Keyed Aggregate": ["I,UB,UA", "I,UB,UA,D"]},
    ),
    # A window aggregate emits each window once: insert-only.
    "window_aggregate": (
        """
        CREATE TABLE o (k STRING, n BIGINT) WITH ('connector' = 'console');
        INSERT INTO o SELECT k, COUNT(*) AS n
          FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
          GROUP BY k, window_start, window_end;
        """,
        {"Source: b": ["I"], "Sink: o": ["NONE"]},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_changelog_modes_per_operator(case: str) -> None:
    program, expected = CASES[case]
    graph = flowc.compile(flink_sql(SOURCE, program), "d.flow").stream_graph
    modes: dict[str, list[str]] = {}
    for node in graph.nodes.values():
        modes.setdefault(node.name, []).append(node.changelog_mode)
    assert {name: sorted(modes.get(name, [])) for name in expected} == expected


def test_every_node_has_a_mode_in_json_and_text() -> None:
    program, _ = CASES["aggregate_over_aggregate"]
    job = flowc.compile(flink_sql(SOURCE, program), "d.flow")
    nodes = json.loads(job.stream_graph.to_json())["nodes"]
    assert [n["changelog_mode"] for n in nodes if n["changelog_mode"] == "I,UB,UA,D"]
    assert all(n["changelog_mode"] for n in nodes)
    assert "changelog I,UB,UA,D" in job.stream_graph.to_text()
    # The outer aggregate and the Map chained after it, as operators of the JobGraph.
    assert job.job_graph.to_json().count('"changelog_mode": "I,UB,UA,D"') == 2


@pytest.mark.parametrize(
    ("kinds", "before", "text"),
    [
        (INSERT_ONLY, True, "I"),
        (ALL_CHANGES, True, "I,UB,UA,D"),
        (ALL_CHANGES, False, "I,UA,D"),
        (ModifyKinds(update=True), True, "I,UB,UA"),
        (ModifyKinds(update=True), False, "I,UA"),
    ],
)
def test_mode_text_is_flinks_notation(kinds: ModifyKinds, before: bool, text: str) -> None:
    assert mode_text(kinds, before) == text
