"""Comma joins (issue 27): ``FROM a x, b y WHERE x.k = y.k AND <time bound>``, as Flink's
documentation writes its interval join, is the inner join with those conditions in ON
(the plans are equal), in both dialects; the WHERE's other conditions stay a filter. On
Spark the interval join's rows equal plain Python's over micro-batches and a restart."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.files import Row, read_json_dir, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, run_generated, spark_codes

HEAD = """SET max_parallelism = 16;
CREATE SOURCE orders (order_id STRING, num BIGINT, order_time TIMESTAMP,
  WATERMARK FOR order_time AS order_time - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'orders', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE shipments (id STRING, order_id STRING, ship_time TIMESTAMP,
  WATERMARK FOR ship_time AS ship_time - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'shipments', format = 'json', max_files_per_trigger = 1);
CREATE SINK shipped WITH (connector = 'files', path = 'shipped', format = 'json');
"""
COMMA = """INSERT INTO shipped SELECT o.order_id, o.num, s.id AS ship_id
FROM orders o, shipments s
WHERE o.order_id = s.order_id AND o.num > 1
  AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time;
"""
EXPLICIT = """INSERT INTO shipped SELECT o.order_id, o.num, s.id AS ship_id
FROM orders o JOIN shipments s
  ON o.order_id = s.order_id
  AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time
WHERE o.num > 1;
"""


@pytest.mark.parametrize("dialect", ["", "SET sql.dialect = 'flink';\n"], ids=["spark", "flink"])
def test_a_comma_join_plans_as_the_join_with_its_conditions_in_on(dialect: str) -> None:
    assert job_graph_json(dialect + HEAD + COMMA) == job_graph_json(dialect + HEAD + EXPLICIT)


def test_a_comma_join_no_condition_reaches_stays_refused() -> None:
    """Without a condition over both sides it is still a cross join: refused as before."""
    with pytest.raises(flowc.CompileError, match="JOIN needs a condition"):
        flowc.compile(
            HEAD + "INSERT INTO shipped SELECT o.order_id, s.id FROM orders o, shipments s\n"
            "WHERE o.num > 1;\n",
            "job.flow",
        )


def _at(minutes: float) -> str:
    return (datetime(2026, 1, 1, 10) + timedelta(minutes=minutes)).isoformat(sep=" ")


ORDERS: list[list[Row]] = [
    [
        {"order_id": "o1", "num": 2, "order_time": _at(0)},
        {"order_id": "o2", "num": 3, "order_time": _at(1)},
        {"order_id": "o3", "num": 1, "order_time": _at(2)},
    ],
    [{"order_id": "o1", "num": 5, "order_time": _at(30)}],
    [{"order_id": "o4", "num": 4, "order_time": _at(200)}],
]
SHIPMENTS: list[list[Row]] = [
    [{"id": "s1", "order_id": "o1", "ship_time": _at(120)}],
    [
        {"id": "s2", "order_id": "o2", "ship_time": _at(400)},
        {"id": "s3", "order_id": "o3", "ship_time": _at(60)},
    ],
    [{"id": "s4", "order_id": "o4", "ship_time": _at(230)}],
]


def test_a_comma_interval_join_on_spark(spark: Any, tmp_path: Path) -> None:
    """Orders shipped within four hours after them, with more than one item: plain
    Python over the same rows, across three micro-batches and a restart."""
    write_batches(tmp_path / "orders", ORDERS[:2])
    write_batches(tmp_path / "shipments", SHIPMENTS[:2])
    program = "SET sql.dialect = 'flink';\n" + HEAD + COMMA
    job = compiled(tmp_path, program)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "orders", ORDERS)
    write_batches(tmp_path / "shipments", SHIPMENTS)
    run_generated(spark, tmp_path, compiled(tmp_path, program))
    expected = sorted(
        (o["order_id"], o["num"], s["id"])
        for o in (r for b in ORDERS for r in b)
        for s in (r for b in SHIPMENTS for r in b)
        if o["order_id"] == s["order_id"]
        and o["num"] > 1
        and datetime.fromisoformat(s["ship_time"]) - timedelta(hours=4)
        <= datetime.fromisoformat(o["order_time"])
        <= datetime.fromisoformat(s["ship_time"])
    )
    rows = sorted(
        (r["order_id"], r["num"], r["ship_id"]) for r in read_json_dir(tmp_path / "shipped")
    )
    assert rows == expected
    assert len(expected) == 3  # o1 twice (s1), o4; o2 shipped too late, o3 one item
