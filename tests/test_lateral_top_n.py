"""Flink's LATERAL Top-N per group (issue 28): ``FROM (SELECT DISTINCT k FROM r) d, LATERAL
(SELECT ... FROM r WHERE r.k = d.k ORDER BY x DESC LIMIT n) t`` is the Rank Flink 2.3
decorrelates it into, flowc's TOP: the plans of the ROW_NUMBER() form, and on Spark the
current top n per group across micro-batches and a restart, against plain Python.
tests/test_lateral_against_flink.py compares the plans and changelog modes with Flink's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.files import Row, source, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import run_in, spark_codes

HEAD = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE src (c STRING, k STRING, v BIGINT) WITH ('connector' = 'datagen');
CREATE TABLE o (c STRING, k STRING, v BIGINT) WITH ('connector' = 'console');
"""
ROW_NUMBER = """INSERT INTO o SELECT c, k, v FROM (
  SELECT c, k, v, ROW_NUMBER() OVER (PARTITION BY c ORDER BY v DESC) AS rn FROM src)
WHERE rn <= 3;
"""


@pytest.mark.parametrize(
    "lateral",
    [
        "INSERT INTO o SELECT d.c, t.k, t.v FROM (SELECT DISTINCT c FROM src) d,\n"
        "  LATERAL (SELECT k, v FROM src WHERE src.c = d.c ORDER BY v DESC LIMIT 3) t;\n",
        "INSERT INTO o SELECT * FROM (SELECT c FROM src GROUP BY c) d CROSS JOIN LATERAL\n"
        "  (SELECT k, v FROM src AS s WHERE d.c = s.c ORDER BY v DESC LIMIT 3) t;\n",
        "INSERT INTO o SELECT d.c, k, v FROM (SELECT DISTINCT c FROM src) d JOIN LATERAL\n"
        "  (SELECT k, v FROM src WHERE c = d.c ORDER BY v DESC FETCH FIRST 3 ROWS ONLY) ON TRUE;\n",
    ],
    ids=["comma", "cross_join_star", "join_on_true_fetch_first"],
)
def test_lateral_top_n_plans_as_the_row_number_form(lateral: str) -> None:
    assert job_graph_json(HEAD + lateral) == job_graph_json(HEAD + ROW_NUMBER)


def test_lateral_output_is_the_groups_then_the_subquerys_columns() -> None:
    """``SELECT *`` is d's columns, then the LATERAL subquery's, as Flink's join outputs
    them: a key the subquery selects too is not repeated; no rank column."""
    job = flowc.compile(
        HEAD + "INSERT INTO o SELECT * FROM (SELECT DISTINCT c FROM src) d,\n"
        "  LATERAL (SELECT k, c, v FROM src WHERE src.c = d.c ORDER BY v DESC LIMIT 3) t;\n",
        "job.flow",
    )
    (insert,) = job.program.inserts
    assert [c.name for c in insert.stream.schema] == ["c", "k", "v"]


def test_lateral_over_an_aggregate_plans_rank_over_group_aggregate() -> None:
    """The Flink SQL Cookbook's form over an updating view: an AGGREGATE then TOP, the
    aggregate writing no UPDATE_BEFORE (Flink's UpdateFastStrategy over COUNT(*) DESC);
    on Spark both run as the processors of a TOP over updates, the TOP's changes by row
    (the ROW_NUMBER form's, tests/test_updating_pipelines.py)."""
    program = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE People (id INT, city STRING, state STRING) WITH ('connector' = 'datagen');
CREATE TEMPORARY VIEW CurrentPopulation AS
SELECT city, state, COUNT(*) AS population FROM People GROUP BY city, state;
CREATE TABLE o (state STRING, city STRING, population BIGINT,
  PRIMARY KEY (state, city) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'out/o', 'format' = 'json');
INSERT INTO o SELECT state, city, population
FROM (SELECT DISTINCT state FROM CurrentPopulation) States,
  LATERAL (SELECT city, population FROM CurrentPopulation WHERE state = States.state
    ORDER BY population DESC LIMIT 2);
"""
    job = flowc.compile(program, "job.flow")
    modes = {n.name: n.changelog_mode for n in job.stream_graph.nodes.values()}
    assert modes["Keyed Aggregate"] == "I,UA"
    assert modes["Rank(rankEnd=2, partitionBy=[state], orderBy=[population DESC])"] == "I,UA,D"
    on_spark = flowc.compile(program, "job.flow", for_spark=True)
    processors = sorted(on_spark.spark_plan.changelog_processors.items())
    assert [(c.kind, c.consumer, c.row_keys) for _, c in processors] == [
        ("AGGREGATE", False, ()),
        ("TOP", True, ("city", "state")),
    ]


SALES: list[list[Row]] = [
    [
        {"category": "x", "product": "a", "sales": 5},
        {"category": "x", "product": "f", "sales": 8},
        {"category": "y", "product": "c", "sales": 1},
    ],
    [
        {"category": "x", "product": "b", "sales": 9},
        {"category": "y", "product": "h", "sales": 4},
        {"category": "z", "product": "m", "sales": 6},
    ],
    [
        {"category": "x", "product": "g", "sales": 10},
        {"category": "y", "product": "k", "sales": 2},
        {"category": "x", "product": "e", "sales": 3},
        {"category": "z", "product": "n", "sales": 7},
    ],
]
LATERAL_JOB = (
    source("sales", "category STRING, product STRING, sales BIGINT")
    + """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE best (category STRING, product STRING, sales BIGINT,
  PRIMARY KEY (category, product) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'out/best', 'format' = 'parquet');
INSERT INTO best SELECT c.category, t.product, t.sales
FROM (SELECT DISTINCT category FROM sales) c,
  LATERAL (SELECT product, sales FROM sales WHERE sales.category = c.category
    ORDER BY sales DESC LIMIT 2) t;
"""
)


def _top_two(batches: list[list[Row]]) -> list[tuple[str, str, int]]:
    """Each category's two best products after ``batches`` (plain Python)."""
    best: dict[str, list[tuple[int, str]]] = {}
    for row in (r for batch in batches for r in batch):
        best.setdefault(row["category"], []).append((row["sales"], row["product"]))
    return sorted(
        (category, product, sales)
        for category, rows in best.items()
        for sales, product in sorted(rows, reverse=True)[:2]
    )


def _current_table(spark: Any, folder: Path) -> list[tuple[Any, ...]]:
    pointer = json.loads((folder / "_current").read_text(encoding="utf-8"))
    rows = spark.read.parquet(str(folder / pointer["version"])).collect()
    return sorted(tuple(row) for row in rows)


def test_lateral_top_n_on_spark_across_batches_and_a_restart(spark: Any, tmp_path: Path) -> None:
    """The upsert table after two micro-batches, then after a restart on the same
    checkpoint for the third, holds each category's current top two (rows pushed out
    deleted), as plain Python computes it."""
    job = flowc.compile(LATERAL_JOB, str(tmp_path / "job.flow"), for_spark=True)
    assert spark_codes(job) == set()
    table = tmp_path / "out" / "best"
    write_batches(tmp_path / "sales", SALES[:2])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert _current_table(spark, table) == _top_two(SALES[:2])
    write_batches(tmp_path / "sales", SALES)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert _current_table(spark, table) == _top_two(SALES)
    assert _top_two(SALES) != _top_two(SALES[:2])
