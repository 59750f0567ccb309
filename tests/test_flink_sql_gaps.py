"""Flink SQL as Flink users write it (issue 27): a GROUP BY key named with its relation
after a join (``GROUP BY o.id``) is the pipe form's ``KEY BY orders.id``, read after the
grouping as ``id``, in both dialects (the plans are equal). A Flink-dialect UNION ALL of
SELECTs whose column types differ and widen alike in Flink and Spark (INT with BIGINT,
an integer with DOUBLE, DECIMALs) has Flink's common types: on Spark its rows (values and
types) equal plain Python's over micro-batches and a restart."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.files import Row, committed_files, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, run_generated, spark_codes

HEAD = """SET max_parallelism = 16;
CREATE SOURCE orders (id BIGINT, amount INT) WITH (connector = 'datagen');
CREATE SOURCE shipments (order_id BIGINT, carrier STRING) WITH (connector = 'datagen');
CREATE SINK totals WITH (connector = 'console', mode = 'update');
"""
GROUPED = """INSERT INTO totals
SELECT o.id, s.carrier, o.id + 1 AS next_id, count(*) AS n, sum(o.amount) AS total
FROM orders o JOIN shipments s ON o.id = s.order_id
GROUP BY o.id, s.carrier HAVING o.id > 3 AND count(*) > 1;
"""
PIPE = """INSERT INTO totals FROM orders
|> JOIN shipments ON orders.id = shipments.order_id
|> KEY BY orders.id, shipments.carrier
|> AGGREGATE count(*) AS n, sum(orders.amount) AS total
|> WHERE id > 3 AND n > 1
|> SELECT id, carrier, id + 1 AS next_id, n, total;
"""


@pytest.mark.parametrize("dialect", ["", "SET sql.dialect = 'flink';\n"], ids=["spark", "flink"])
def test_a_qualified_group_by_key_plans_as_the_pipe_forms_key_by(dialect: str) -> None:
    assert job_graph_json(dialect + HEAD + GROUPED) == job_graph_json(dialect + HEAD + PIPE)


UNION_HEAD = """SET sql.dialect = 'flink';
CREATE SOURCE a (k INT, v INT, d DECIMAL(5, 3), w BIGINT)
  WITH (connector = 'files', path = 'a', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE b (k BIGINT, v DOUBLE, d DECIMAL(10, 1), w INT)
  WITH (connector = 'files', path = 'b', format = 'json', max_files_per_trigger = 1);
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');
"""
UNION = """INSERT INTO out SELECT k, v, d, w FROM a WHERE k > 0
UNION ALL SELECT k, v, d, w FROM b WHERE v < 100;
"""
A_ROWS: list[list[Row]] = [
    [{"k": 1, "v": 3, "d": 1.234, "w": 7}, {"k": -1, "v": 4, "d": 2.5, "w": 8}],
    [{"k": 2147483647, "v": -5, "d": 99.999, "w": 9000000000}],
    [{"k": 3, "v": 0, "d": 0.001, "w": 0}],
]
B_ROWS: list[list[Row]] = [
    [{"k": 3000000000, "v": 1.5, "d": 123456789.5, "w": -2}],
    [{"k": -4, "v": 250.0, "d": 1.0, "w": 5}, {"k": 5, "v": -0.25, "d": 0.1, "w": 2147483647}],
    [{"k": 6, "v": 99.5, "d": 7.7, "w": 1}],
]


def _flink_union(a: list[list[Row]], b: list[list[Row]]) -> list[tuple[int, str, str, int]]:
    """Flink's rows: BIGINT k, DOUBLE v, DECIMAL(12, 3) d, BIGINT w (Calcite's common types),
    each input's WHERE first; v and d as JSON writes them (a DOUBLE with its point, a
    DECIMAL with its three places)."""
    rows = [r for batch in a for r in batch if r["k"] > 0]
    rows += [r for batch in b for r in batch if r["v"] < 100]
    return sorted(
        (int(r["k"]), repr(float(r["v"])), f"{Decimal(str(r['d'])):.3f}", int(r["w"])) for r in rows
    )


def test_a_flink_union_of_narrower_and_wider_columns_on_spark(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "a", A_ROWS[:2])
    write_batches(tmp_path / "b", B_ROWS[:2])
    program = UNION_HEAD + UNION
    job = compiled(tmp_path, program)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "a", A_ROWS)
    write_batches(tmp_path / "b", B_ROWS)
    run_generated(spark, tmp_path, compiled(tmp_path, program))
    written = [  # numbers as written: 3 (an integer) is no DOUBLE, 12.5 no DECIMAL(12, 3)
        json.loads(line, parse_float=Decimal)
        for part in committed_files(tmp_path / "out")
        for line in part.read_text().splitlines()
        if line
    ]
    rows = sorted((r["k"], str(r["v"]), str(r["d"]), r["w"]) for r in written)
    assert rows == _flink_union(A_ROWS, B_ROWS)
    assert len(rows) == 6


@pytest.mark.parametrize(
    ("b_types", "message"),
    [
        ("k BIGINT, v FLOAT, d DECIMAL(10, 1), w INT", "'out\\$union' differs"),
        ("k BIGINT, v DOUBLE, d DECIMAL(10, 1), w DECIMAL(10, 2)", "'out\\$union' differs"),
        ("k STRING, v DOUBLE, d DECIMAL(10, 1), w INT", "'out\\$union' differs"),
    ],
    ids=["int-with-float", "bigint-with-decimal", "int-with-string"],
)
def test_types_flink_and_spark_widen_apart_stay_refused(b_types: str, message: str) -> None:
    program = UNION_HEAD.replace("k BIGINT, v DOUBLE, d DECIMAL(10, 1), w INT", b_types)
    with pytest.raises(flowc.CompileError, match=message):
        flowc.compile(program + UNION, "job.flow")


def test_the_spark_dialect_keeps_refusing_a_union_of_other_types() -> None:
    program = UNION_HEAD.replace("SET sql.dialect = 'flink';\n", "")
    with pytest.raises(flowc.CompileError, match="UNION ALL needs the same columns"):
        flowc.compile(program + UNION, "job.flow")
