"""SQL forms real jobs use (issue 27), in Spark's dialect and Flink's: GROUP BY an
expression plans as EXTEND of a computed key before KEY BY (Flink's Calc below the
exchange), UNION ALL of any SELECTs as hidden views read by UNION ALL; on Spark both give
plain Python's rows over several micro-batches."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.files import Row, at, source, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import (
    compiled,
    into_memory,
    run_generated,
    run_in,
    spark_codes,
    table,
)

HEAD = """SET max_parallelism = 64;
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SOURCE asks (item BIGINT, seller BIGINT, amount BIGINT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'console', mode = 'update');
"""
FLINK = "SET sql.dialect = 'flink';\n"


@pytest.mark.parametrize("dialect", ["", FLINK])
def test_group_by_an_expression_plans_as_a_computed_key(dialect: str) -> None:
    sql = (
        dialect
        + HEAD
        + (
            "INSERT INTO o SELECT MOD(auction, 10) AS k, count(*) AS n FROM bids WHERE price > 1\n"
            "  GROUP BY MOD(auction, 10) HAVING MOD(auction, 10) > 2;\n"
        )
    )
    pipe = HEAD + (
        "INSERT INTO o FROM bids |> WHERE price > 1\n"
        "  |> EXTEND MOD(auction, 10) AS `$f0` |> KEY BY `$f0`\n"
        "  |> AGGREGATE count(*) AS n |> WHERE `$f0` > 2 |> SELECT `$f0` AS k, n;\n"
    )
    assert job_graph_json(sql) == job_graph_json(pipe)
    # The exchange is keyed by the computed field, named as Flink's planner names it: the
    # same plan as EXTEND ... AS k but for that name.
    assert '"keys": ["$f0"]' in job_graph_json(sql)
    named = pipe.replace("`$f0` AS k", "k").replace("`$f0`", "k")
    assert job_graph_json(named) == job_graph_json(sql).replace('"keys": ["$f0"]', '"keys": ["k"]')


def test_group_by_expressions_with_a_column_and_a_window() -> None:
    sql = HEAD + (
        "INSERT INTO o SELECT date_format(ts, 'yyyy-MM-dd') AS day, bidder, window.end AS e,\n"
        "  count(*) AS n FROM bids\n"
        "  GROUP BY date_format(ts, 'yyyy-MM-dd'), bidder, window(ts, '1 minute');\n"
    )
    pipe = HEAD + (
        "INSERT INTO o FROM bids |> EXTEND date_format(ts, 'yyyy-MM-dd') AS `$f0`\n"
        "  |> KEY BY `$f0`, bidder |> WINDOW TUMBLE(ts, '1 minute')\n"
        "  |> AGGREGATE count(*) AS n |> SELECT `$f0` AS day, bidder, window_end AS e, n;\n"
    )
    assert job_graph_json(sql) == job_graph_json(pipe)


@pytest.mark.parametrize("dialect", ["", FLINK])
def test_union_all_of_selects_plans_as_views(dialect: str) -> None:
    sql = (
        dialect
        + HEAD
        + (
            "INSERT INTO o SELECT auction, price FROM bids WHERE price > 10\n"
            "  UNION ALL SELECT item, amount * 2 FROM asks WHERE amount < 5\n"
            "  UNION ALL SELECT seller AS other, amount FROM asks;\n"
        )
    )
    views = HEAD + (
        "CREATE VIEW a AS FROM asks |> WHERE amount < 5 |> SELECT item AS auction,\n"
        "  amount * 2 AS price;\n"
        "CREATE VIEW b AS FROM asks |> SELECT seller AS auction, amount AS price;\n"
        "INSERT INTO o FROM bids |> WHERE price > 10 |> SELECT auction, price\n"
        "  |> UNION ALL a |> UNION ALL b;\n"
    )
    assert job_graph_json(sql) == job_graph_json(views)


# ---------------------------------------------------------------- on Spark

BIDS: list[list[Row]] = [
    [
        {"auction": 1, "bidder": 10, "price": 150, "ts": at(0)},
        {"auction": 4, "bidder": 11, "price": 90, "ts": at(1)},
        {"auction": 7, "bidder": 12, "price": 300, "ts": at(2)},
    ],
    [
        {"auction": 3, "bidder": 10, "price": 500, "ts": at(86_400)},
        {"auction": 2, "bidder": 13, "price": 120, "ts": at(86_401)},
        {"auction": 5, "bidder": 14, "price": 200, "ts": at(2)},
    ],
    [
        {"auction": 1, "bidder": 15, "price": 400, "ts": at(86_402)},
        {"auction": 6, "bidder": 16, "price": 101, "ts": at(3)},
        {"auction": 8, "bidder": 16, "price": 99, "ts": at(4)},
    ],
]
ASKS: list[list[Row]] = [
    [{"item": 1, "seller": 5, "amount": 10, "ts": at(0)}],
    [
        {"item": 2, "seller": 6, "amount": 70, "ts": at(1)},
        {"item": 3, "seller": 7, "amount": 20, "ts": at(2)},
    ],
    [{"item": 4, "seller": 8, "amount": 49, "ts": at(3)}],
]


@pytest.mark.parametrize("dialect", ["", FLINK])
def test_group_by_an_expression_on_spark(spark: Any, tmp_path: Path, dialect: str) -> None:
    """Per (auction mod 3, day): counts and sums of bids over 100, kept when the sum is over
    200, after every micro-batch, against plain Python."""
    job = compiled(
        tmp_path,
        dialect
        + source("bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK per_key WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO per_key SELECT MOD(auction, 3) AS k, MOD(auction, 3) + 100 AS k100,\n"
        "  date_format(ts, 'yyyy-MM-dd') AS day, count(*) AS n, sum(price) AS total\n"
        "  FROM bids WHERE price > 100\n"
        "  GROUP BY MOD(auction, 3), date_format(ts, 'yyyy-MM-dd') HAVING sum(price) > 200;\n",
    )
    assert spark_codes(job) == set()
    write_batches(tmp_path / "bids", BIDS)
    run_generated(spark, tmp_path, job, into_memory)
    rows = table(spark, "per_key")
    counts: dict[tuple[int, str], int] = defaultdict(int)
    totals: dict[tuple[int, str], int] = defaultdict(int)
    expected = []
    for batch in BIDS:
        changed = []
        for row in batch:
            if row["price"] > 100:
                key = (row["auction"] % 3, datetime.fromisoformat(row["ts"]).strftime("%Y-%m-%d"))
                counts[key] += 1
                totals[key] += row["price"]
                changed.append(key)
        expected += [
            (k, k + 100, day, counts[(k, day)], totals[(k, day)])
            for k, day in dict.fromkeys(changed)
            if totals[(k, day)] > 200
        ]
    assert len(expected) >= 3
    assert sorted(rows) == sorted(expected)


def test_group_by_an_expression_across_a_restart(spark: Any, tmp_path: Path) -> None:
    """The state is keyed by the computed key: a run restarted from its checkpoint with
    one more file goes on from it (an upsert table keyed by the output's key columns)."""
    job = flowc.compile(
        FLINK
        + source("bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK per_key WITH (connector = 'files', path = 'out', format = 'parquet',\n"
        "  mode = 'update', key = 'k, day');\n"
        + "INSERT INTO per_key SELECT MOD(auction, 3) AS k, date_format(ts, 'yyyy-MM-dd') AS day,\n"
        "  count(*) AS n, sum(price) AS total FROM bids\n"
        "  GROUP BY MOD(auction, 3), date_format(ts, 'yyyy-MM-dd');\n",
        str(tmp_path / "job.flow"),
        for_spark=True,
    )
    write_batches(tmp_path / "bids", BIDS[:2])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    write_batches(tmp_path / "later", BIDS[2:])
    target = tmp_path / "bids" / "part-099.json"
    (tmp_path / "later" / "part-000.json").rename(target)
    os.utime(target, (1_700_001_000, 1_700_001_000))
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    totals: dict[tuple[int, str], tuple[int, int]] = {}
    for row in (r for batch in BIDS for r in batch):
        key = (row["auction"] % 3, datetime.fromisoformat(row["ts"]).strftime("%Y-%m-%d"))
        n, total = totals.get(key, (0, 0))
        totals[key] = (n + 1, total + row["price"])
    pointer = json.loads((tmp_path / "out" / "_current").read_text(encoding="utf-8"))
    rows = spark.read.parquet(str(tmp_path / "out" / pointer["version"])).collect()
    assert {(r["k"], r["day"]): (r["n"], r["total"]) for r in rows} == totals
    assert len(totals) >= 4


def test_union_all_of_selects_on_spark(spark: Any, tmp_path: Path) -> None:
    """Bids over 100 and doubled asks under 50, as one stream named by the first SELECT,
    over several micro-batches, against plain Python."""
    write_batches(tmp_path / "bids", BIDS)
    write_batches(tmp_path / "asks", ASKS)
    job = compiled(
        tmp_path,
        source("bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP")
        + source("asks", "item BIGINT, seller BIGINT, amount BIGINT, ts TIMESTAMP")
        + "CREATE SINK both WITH (connector = 'noop');\n"
        + "INSERT INTO both SELECT auction, price FROM bids WHERE price > 100\n"
        "  UNION ALL SELECT item, amount * 2 FROM asks WHERE amount < 50;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    expected = [(r["auction"], r["price"]) for b in BIDS for r in b if r["price"] > 100]
    expected += [(r["item"], r["amount"] * 2) for b in ASKS for r in b if r["amount"] < 50]
    assert table(spark, "both") == sorted(expected)
    columns = spark.sql("SELECT * FROM `both`").columns
    assert columns == ["auction", "price"]


TOP_HEAD = """SET max_parallelism = 16;
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE TABLE auctions (id BIGINT, category BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK u WITH (connector = 'console', mode = 'update');
"""


@pytest.mark.parametrize("dialect", ["", FLINK])
def test_row_number_over_a_join_side_plans_as_top(dialect: str) -> None:
    """ORDER BY b.price and PARTITION BY a.category name the subquery's join sides: TOP reads
    the subquery's columns of the same text."""
    sql = (
        dialect
        + TOP_HEAD
        + (
            "INSERT INTO u SELECT * FROM (\n"
            "  SELECT b.auction, b.price, a.category,\n"
            "    ROW_NUMBER() OVER (PARTITION BY a.category ORDER BY b.price DESC) AS rn\n"
            "  FROM bids AS b JOIN auctions AS a ON b.auction = a.id) WHERE rn <= 3;\n"
        )
    )
    pipe = TOP_HEAD + (
        "CREATE VIEW j AS SELECT bids.auction, bids.price, auctions.category\n"
        "  FROM bids JOIN auctions ON bids.auction = auctions.id;\n"
        "INSERT INTO u FROM j |> TOP 3 BY price DESC PER category AS rn;\n"
    )
    assert job_graph_json(sql) == job_graph_json(pipe)


def test_row_number_ordered_by_a_column_not_selected_plans_as_top_and_drop() -> None:
    """SQL ranks over the subquery's input, TOP after its projection: what the projection
    does not keep (or renames: ``price`` is the input's, not the item ``b.price * 2 AS
    price``) is computed for TOP and dropped after it."""
    sql = TOP_HEAD + (
        "INSERT INTO u SELECT * FROM (\n"
        "  SELECT b.auction, b.price * 2 AS price,\n"
        "    ROW_NUMBER() OVER (PARTITION BY a.category ORDER BY price DESC) AS rn\n"
        "  FROM bids AS b JOIN auctions AS a ON b.auction = a.id) WHERE rn <= 3;\n"
    )
    pipe = TOP_HEAD + (
        "CREATE VIEW j AS SELECT bids.auction, bids.price * 2 AS price,\n"
        "  price AS `$rank0`, auctions.category AS `$rank1`\n"
        "  FROM bids JOIN auctions ON bids.auction = auctions.id;\n"
        "INSERT INTO u FROM j |> TOP 3 BY `$rank0` DESC PER `$rank1` AS rn\n"
        "  |> DROP `$rank0`, `$rank1`;\n"
    )
    assert job_graph_json(sql) == job_graph_json(pipe)
    job = flowc.compile(sql, "job.flow")
    (insert,) = job.program.inserts
    assert [c.name for c in insert.stream.schema] == ["auction", "price", "rn"]


CATEGORY = {1: 7, 2: 8, 3: 7, 4: 8, 5: 7, 6: 8}  # 7 and 8 have no auction: a join drops them


def test_row_number_over_a_join_side_on_spark(spark: Any, tmp_path: Path) -> None:
    """The two highest bids per category, ordered by the join's b.price, which the
    subquery does not select, after every micro-batch, against plain Python."""
    write_batches(tmp_path / "bids", BIDS)
    (tmp_path / "auctions").mkdir()
    (tmp_path / "auctions" / "a.json").write_text(
        "".join(f'{{"id": {a}, "category": {c}}}\n' for a, c in CATEGORY.items()),
        encoding="utf-8",
    )
    job = compiled(
        tmp_path,
        source("bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP")
        + "SET max_parallelism = 16;\n"
        + "CREATE TABLE auctions (id BIGINT, category BIGINT)"
        " WITH (connector = 'files', path = 'auctions', format = 'json');\n"
        + "CREATE SINK best WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO best SELECT * FROM (\n"
        "  SELECT b.auction, a.category,\n"
        "    ROW_NUMBER() OVER (PARTITION BY a.category ORDER BY b.price DESC) AS rn\n"
        "  FROM bids AS b JOIN auctions AS a ON b.auction = a.id) WHERE rn <= 2;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    seen: dict[int, list[Row]] = defaultdict(list)
    expected = []
    for batch in BIDS:
        touched = []
        for row in batch:
            category = CATEGORY.get(row["auction"])
            if category is not None:
                seen[category].append(row)
                touched.append(category)
        for category in dict.fromkeys(touched):
            ranked = sorted(seen[category], key=lambda r: r["price"], reverse=True)[:2]
            expected += [(r["auction"], category, n) for n, r in enumerate(ranked, start=1)]
    assert len(expected) >= 8
    assert table(spark, "best") == sorted(expected)


JOIN_HEAD = """SET max_parallelism = 16;
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SOURCE sellers (key BIGINT, name STRING)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'console');
"""


@pytest.mark.parametrize("dialect", ["", FLINK])
def test_join_on_an_expression_plans_as_a_computed_key(dialect: str) -> None:
    """The key is computed on its side below the join (Flink's Calc), and SELECT * does not
    show it: the DROP after the join."""
    sql = (
        dialect
        + JOIN_HEAD
        + (
            "INSERT INTO o SELECT * FROM bids AS b JOIN sellers AS s\n"
            "  ON MOD(b.auction, 10000) = s.key AND b.price > 1;\n"
        )
    )
    pipe = JOIN_HEAD + (
        "CREATE VIEW k AS FROM bids |> EXTEND MOD(auction, 10000) AS `$join0`;\n"
        "INSERT INTO o FROM k |> JOIN sellers ON k.`$join0` = sellers.key AND k.price > 1\n"
        "  |> DROP `$join0`;\n"
    )
    assert job_graph_json(sql) == job_graph_json(pipe)
    job = flowc.compile(sql, "job.flow")
    (insert,) = job.program.inserts
    assert [c.name for c in insert.stream.schema] == [
        "auction",
        "bidder",
        "price",
        "ts",
        "key",
        "name",
    ]


def test_join_on_expressions_of_both_sides() -> None:
    sql = JOIN_HEAD + (
        "INSERT INTO o SELECT b.auction, s.name FROM bids AS b JOIN sellers AS s\n"
        "  ON b.auction % 10 = s.key + 1;\n"
    )
    pipe = JOIN_HEAD + (
        "CREATE VIEW k AS FROM bids |> EXTEND auction % 10 AS `$join0`;\n"
        "CREATE VIEW t AS FROM sellers |> EXTEND key + 1 AS `$join1`;\n"
        "INSERT INTO o FROM k |> JOIN t ON k.`$join0` = t.`$join1`\n"
        "  |> SELECT k.auction, t.name;\n"
    )
    assert job_graph_json(sql) == job_graph_json(pipe)


SELLERS: list[list[Row]] = [
    [{"key": 0, "name": "zero"}],
    [{"key": 1, "name": "one"}, {"key": 5, "name": "five"}],
    [{"key": 2, "name": "two"}, {"key": 1, "name": "uno"}],
]


def test_join_on_an_expression_on_spark(spark: Any, tmp_path: Path) -> None:
    """Bids joined with sellers on MOD(b.auction, 3) = s.key, a stream-stream join over
    several micro-batches of each, SELECT * showing no computed key, against plain Python."""
    write_batches(tmp_path / "bids", BIDS)
    write_batches(tmp_path / "sellers", SELLERS)
    job = compiled(
        tmp_path,
        FLINK
        + source("bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP")
        + source("sellers", "key BIGINT, name STRING")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK joined WITH (connector = 'noop');\n"
        + "INSERT INTO joined SELECT * FROM bids AS b JOIN sellers AS s\n"
        "  ON MOD(b.auction, 3) = s.key WHERE b.price > 100;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    expected = [
        (
            b["auction"],
            b["bidder"],
            b["price"],
            datetime.fromisoformat(b["ts"]),
            s["key"],
            s["name"],
        )
        for b in (r for batch in BIDS for r in batch)
        for s in (r for batch in SELLERS for r in batch)
        if b["auction"] % 3 == s["key"] and b["price"] > 100
    ]
    assert len(expected) >= 5
    assert table(spark, "joined") == sorted(expected)
    assert spark.sql("SELECT * FROM joined").columns == [
        "auction",
        "bidder",
        "price",
        "ts",
        "key",
        "name",
    ]
