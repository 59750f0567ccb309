"""Flink's deduplication in SQL (issue 27): ``ROW_NUMBER() OVER (PARTITION BY k ORDER BY
pt ASC)`` kept at ``rn = 1``, ``pt`` a processing-time attribute, is the first row of each
key as rows arrive, an insert-only stream (Flink's Deduplicate, not a Rank): flowc's
DEDUPLICATE, in an append sink. Ordered otherwise (DESC: the last row, which Flink
updates), it stays a Top-N."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError
from flowc.spark.codegen import generate_pyspark
from flowc.vocabulary import Operator
from tests.helpers.files import Row, read_json_dir, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, run_generated, spark_codes

HEAD = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE Orders (
  order_id STRING, `user` STRING, num BIGINT,
  proctime AS PROCTIME()
) WITH (connector = 'files', path = 'orders', format = 'json', max_files_per_trigger = 1);
CREATE TABLE firsts (order_id STRING, `user` STRING, num BIGINT)
  WITH (connector = 'files', path = 'firsts', format = 'json');
"""
DEDUP = """INSERT INTO firsts
SELECT order_id, `user`, num
FROM (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime ASC) AS row_num
  FROM Orders)
WHERE row_num = 1;
"""
PIPE = """INSERT INTO firsts FROM Orders |> DEDUPLICATE ON order_id
  |> SELECT order_id, `user`, num;
"""


def test_flink_deduplication_plans_as_deduplicate() -> None:
    assert job_graph_json(HEAD + DEDUP) == job_graph_json(HEAD + PIPE)


def test_proctime_inline_plans_as_deduplicate_too() -> None:
    """``ORDER BY PROCTIME() ASC`` inline, which Flink 2.3 takes (its plan: a Rank whose
    output is insert-only, the first row per key), is the declared column's
    deduplication: the same JobGraph as the pipe's DEDUPLICATE, the same Spark program as
    the declared column's."""
    inline = DEDUP.replace("ORDER BY proctime ASC", "ORDER BY PROCTIME() ASC")
    assert job_graph_json(HEAD + inline) == job_graph_json(HEAD + PIPE)
    ours, declared = (flowc.compile(HEAD + q, "job.flow", for_spark=True) for q in (inline, DEDUP))
    assert generate_pyspark(ours) == generate_pyspark(declared)


@pytest.mark.parametrize(
    "query",
    [
        DEDUP.replace("ORDER BY proctime ASC", "ORDER BY PROCTIME() DESC"),
        DEDUP.replace("ORDER BY proctime ASC", "ORDER BY PROCTIME() ASC").replace(
            "row_num = 1", "row_num <= 2"
        ),
    ],
    ids=["last_row", "two_rows"],
)
def test_proctime_inline_elsewhere_says_to_declare_it(query: str) -> None:
    """Any other inline PROCTIME() (Flink's Rank over it) is refused at the call, its hint
    the declared column, not a function of another name."""
    with pytest.raises(CompileError) as refused:
        flowc.compile(HEAD + query, "job.flow", for_spark=True)
    (found,) = [d for d in refused.value.diagnostics if d.severity.name == "ERROR"]
    assert found.code == "E0230" and found.span.line == 13, found
    assert "pt AS PROCTIME()" in (found.help or ""), found


@pytest.mark.parametrize(
    "query",
    [
        DEDUP.replace("ORDER BY proctime ASC", "ORDER BY proctime DESC"),
        DEDUP.replace("row_num = 1", "row_num <= 2"),
        DEDUP.replace("ORDER BY proctime ASC", "ORDER BY num ASC"),
        DEDUP.replace("SELECT order_id, `user`, num\n", "SELECT *\n"),
    ],
    ids=["last_row", "two_rows", "not_processing_time", "rank_read"],
)
def test_other_rankings_stay_a_top_n(query: str) -> None:
    """The last row (Flink updates it), two rows, an order that is no processing time, or
    a rank the outer query reads: Flink's Rank, flowc's TOP (in an updating sink)."""
    head = HEAD.replace(
        "CREATE TABLE firsts (order_id STRING, `user` STRING, num BIGINT)\n"
        "  WITH (connector = 'files', path = 'firsts', format = 'json');",
        "CREATE SINK firsts WITH (connector = 'console', mode = 'update');",
    )
    job = flowc.compile(head + query, "job.flow", for_spark=True)
    operators = {t.operator for t in job.transformations.transformations.values()}
    assert Operator.RANK in operators and Operator.DEDUPLICATE not in operators


ORDERS: list[list[Row]] = [
    [
        {"order_id": "o1", "user": "ann", "num": 1},
        {"order_id": "o2", "user": "bob", "num": 2},
        {"order_id": "o1", "user": "ann", "num": 3},
    ],
    [
        {"order_id": "o3", "user": "cy", "num": 4},
        {"order_id": "o2", "user": "bob", "num": 5},
    ],
    [
        {"order_id": "o1", "user": "ann", "num": 6},
        {"order_id": "o4", "user": "dee", "num": 7},
        {"order_id": "o4", "user": "dee", "num": 8},
    ],
]


def test_flink_deduplication_keeps_each_keys_first_row_on_spark(spark: Any, tmp_path: Path) -> None:
    """Each order's first row as the rows arrive (one file a micro-batch, in order),
    written once, across three micro-batches and a restart on the same checkpoint:
    plain Python's first row per key."""
    write_batches(tmp_path / "orders", ORDERS[:2])
    job = compiled(tmp_path, HEAD + DEDUP)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "orders", ORDERS)
    run_generated(spark, tmp_path, compiled(tmp_path, HEAD + DEDUP))
    first: dict[str, Row] = {}
    for batch in ORDERS:
        for row in batch:
            first.setdefault(row["order_id"], row)
    rows = sorted((r["order_id"], r["user"], r["num"]) for r in read_json_dir(tmp_path / "firsts"))
    assert rows == sorted((r["order_id"], r["user"], r["num"]) for r in first.values())
