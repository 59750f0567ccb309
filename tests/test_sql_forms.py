"""Spark SQL forms (issue 13, item 8, and the SQL half of item 2): a query written with
CTEs, subqueries in FROM and aliases has the plans of the same query written with views;
Flink's ROW_NUMBER() Top-N has the plans of TOP; and on Spark both give plain Python's
rows over several micro-batches."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import flowc
from tests.helpers.files import Row, at, source, write_batches
from tests.helpers.spark_run import compiled, into_memory, run_generated, spark_codes, table

HEAD = """SET parallelism = 2;
SET max_parallelism = 64;
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE TABLE auctions (id BIGINT, category BIGINT)
  WITH (connector = 'files', path = 'a', format = 'json');
CREATE SINK o WITH (connector = 'console', mode = 'update');
"""


def _plans(text: str) -> tuple[str, str]:
    job = flowc.compile(text, "job.flow", for_spark=True)
    return job.job_graph.to_json(), job.stream_graph.to_json()


def test_ctes_subqueries_and_aliases_plan_as_views_would() -> None:
    with_ctes = HEAD + (
        "CREATE VIEW per_category AS\n"
        "  WITH big AS (SELECT auction, price FROM bids WHERE price > 100),\n"
        "       typed AS (SELECT b.auction AS auction, b.price AS price, a.category AS category\n"
        "                 FROM big AS b JOIN auctions AS a ON b.auction = a.id)\n"
        "  SELECT category, count(*) AS n FROM (SELECT * FROM typed WHERE category > 0) AS t\n"
        "  GROUP BY category;\n"
        "INSERT INTO o FROM per_category;\n"
    )
    with_views = HEAD + (
        "CREATE VIEW big AS SELECT auction, price FROM bids WHERE price > 100;\n"
        "CREATE VIEW typed AS SELECT big.auction AS auction, big.price AS price,\n"
        "  auctions.category AS category FROM big JOIN auctions ON big.auction = auctions.id;\n"
        "CREATE VIEW t AS SELECT * FROM typed WHERE category > 0;\n"
        "CREATE VIEW per_category AS SELECT category, count(*) AS n FROM t GROUP BY category;\n"
        "INSERT INTO o FROM per_category;\n"
    )
    ctes, views = _plans(with_ctes), _plans(with_views)
    # Operators carry their line: the same query on other lines differs only there.
    assert _without_lines(ctes[0]) == _without_lines(views[0])
    assert _without_lines(ctes[1]) == _without_lines(views[1])
    job = flowc.compile(with_ctes, "job.flow")
    assert [v.name for v in job.program.views] == [
        "per_category$big",
        "per_category$typed",
        "per_category$t",
        "per_category",
    ]


def _without_lines(text: str) -> str:
    import json
    import re

    data = json.loads(text)
    return re.sub(r'"(line|column|end_line|end_column)": \d+', "", json.dumps(data))


def test_row_number_top_n_plans_as_top() -> None:
    row_number = HEAD + (
        "INSERT INTO o SELECT auction, price, rn FROM (\n"
        "  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn\n"
        "  FROM bids) WHERE rn <= 3;\n"
    )
    top = HEAD + (
        "INSERT INTO o FROM bids\n"
        "  |> TOP 3 BY price DESC PER auction AS rn\n"
        "  |> SELECT auction, price, rn;\n"
    )
    assert _without_lines(_plans(row_number)[0]) == _without_lines(_plans(top)[0])
    bounds = {"rn <= 3": 3, "rn < 4": 3, "3 >= rn": 3, "rn = 1": 1, "rn = 1 AND price > 0": 1}
    for condition, count in bounds.items():
        job = flowc.compile(row_number.replace("rn <= 3", condition), "job.flow")
        (rank,) = [n for n in job.stream_graph.nodes.values() if n.name.startswith("Rank(")]
        assert rank.name.startswith(f"Rank(rankEnd={count}, partitionBy=[auction]")


# ---------------------------------------------------------------- on Spark

BIDS: list[list[Row]] = [
    [
        {"auction": 1, "bidder": 10, "price": 150, "ts": at(0)},
        {"auction": 2, "bidder": 11, "price": 90, "ts": at(1)},
        {"auction": 1, "bidder": 12, "price": 300, "ts": at(2)},
    ],
    [
        {"auction": 3, "bidder": 10, "price": 500, "ts": at(61)},
        {"auction": 1, "bidder": 13, "price": 120, "ts": at(62)},
        {"auction": 2, "bidder": 14, "price": 200, "ts": at(63)},
    ],
    [
        {"auction": 1, "bidder": 15, "price": 400, "ts": at(120)},
        {"auction": 4, "bidder": 16, "price": 101, "ts": at(121)},
    ],
]
CATEGORY = {1: 7, 2: 8, 3: 7}  # auction 4 has no category: an inner join drops it


def test_ctes_and_a_subquery_on_spark(spark: Any, tmp_path: Path) -> None:
    """Counts per category of bids over 100, via two CTEs, an aliased dimension join and a
    subquery in FROM, after every micro-batch, against plain Python."""
    write_batches(tmp_path / "bids", BIDS)
    (tmp_path / "auctions").mkdir()
    (tmp_path / "auctions" / "a.json").write_text(
        "".join(f'{{"id": {a}, "category": {c}}}\n' for a, c in CATEGORY.items()),
        encoding="utf-8",
    )
    job = compiled(
        tmp_path,
        source(
            "bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP, pt AS PROCTIME()"
        )
        + "SET max_parallelism = 16;\n"
        + "CREATE TABLE auctions (id BIGINT, category BIGINT)"
        " WITH (connector = 'files', path = 'auctions', format = 'json');\n"
        + "CREATE SINK per_category WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO per_category\n"
        "  WITH big AS (SELECT auction, price, pt FROM bids WHERE price > 100),\n"
        "       typed AS (SELECT b.price AS price, a.category AS category\n"
        "                 FROM big AS b JOIN auctions FOR SYSTEM_TIME AS OF b.pt AS a\n"
        "                 ON b.auction = a.id)\n"
        "  SELECT category, count(*) AS n, max(price) AS top\n"
        "  FROM (SELECT * FROM typed WHERE category > 0) AS t GROUP BY category;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    counts: dict[int, int] = defaultdict(int)
    tops: dict[int, int] = {}
    expected = []
    for batch in BIDS:
        changed = []
        for row in batch:
            category = CATEGORY.get(row["auction"])
            if row["price"] > 100 and category is not None:
                counts[category] += 1
                tops[category] = max(tops.get(category, 0), row["price"])
                changed.append(category)
        expected += [(c, counts[c], tops[c]) for c in dict.fromkeys(changed)]
    assert table(spark, "per_category") == sorted(expected)


def test_row_number_top_n_on_spark(spark: Any, tmp_path: Path) -> None:
    """The two highest bids of each auction after every micro-batch, as Flink's Top-N."""
    write_batches(tmp_path / "bids", BIDS)
    job = compiled(
        tmp_path,
        source("bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK best WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO best SELECT auction, bidder, price, rn FROM (\n"
        "  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn\n"
        "  FROM bids) WHERE rn <= 2;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    seen: dict[int, list[Row]] = defaultdict(list)
    expected = []
    for batch in BIDS:
        for row in batch:
            seen[row["auction"]].append(row)
        for auction in dict.fromkeys(r["auction"] for r in batch):
            ranked = sorted(seen[auction], key=lambda r: r["price"], reverse=True)[:2]
            expected += [
                (auction, r["bidder"], r["price"], rank) for rank, r in enumerate(ranked, start=1)
            ]
    assert table(spark, "best") == sorted(expected)
