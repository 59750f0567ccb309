"""Dimension joins: a stream joined with a CREATE TABLE, on Spark (issue 13, item 1).

The table is Spark's static side of a stream-static join: no state, no watermark. Each
test runs the generated job on the shared local SparkSession over bids read one file
per micro-batch, and compares the rows with plain Python's join of the same input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, source, write_batches, write_table
from tests.helpers.spark_run import compiled, into_memory, run_generated, table

BIDS: list[list[Row]] = [
    [{"auction": 1, "price": 10}, {"auction": 2, "price": 20}, {"auction": 9, "price": 90}],
    [{"auction": 1, "price": 11}, {"auction": 3, "price": 30}],
    [{"auction": 2, "price": 21}, {"auction": 4, "price": 40}],
]
AUCTIONS: list[Row] = [
    {"id": 1, "category": 100, "seller": 7},
    {"id": 2, "category": 200, "seller": 8},
    {"id": 3, "category": 100, "seller": 99},
    {"id": 4, "category": None, "seller": 7},
]
PERSONS: list[Row] = [{"id": 7, "city": "Oslo"}, {"id": 8, "city": "Lisbon"}]

TABLES = (
    "CREATE TABLE auctions (id BIGINT, category BIGINT, seller BIGINT)\n"
    "  WITH (connector = 'files', path = 'auctions', format = 'json');\n"
    "CREATE TABLE persons (id BIGINT, city STRING)\n"
    "  WITH (connector = 'files', path = 'persons', format = 'json');\n"
)


def test_inner_and_left_joins_with_tables(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "bids", BIDS)
    write_table(tmp_path / "auctions", AUCTIONS)
    write_table(tmp_path / "persons", PERSONS)
    job = compiled(
        tmp_path,
        source("bids", "auction BIGINT, price BIGINT")
        + TABLES
        + "CREATE SINK enriched WITH (connector = 'memory');\n"
        + "INSERT INTO enriched FROM bids\n"
        + "  |> JOIN auctions ON auction = auctions.id\n"
        + "  |> LEFT JOIN persons ON seller = persons.id\n"
        + "  |> SELECT auction, price, category, city;\n",
    )
    assert {d.code for d in job.spark_diagnostics} == set(), "a table join needs no watermark"
    assert all(not q.stateful for q in job.spark_plan.queries), "no state on Spark"
    run_generated(spark, tmp_path, job)
    auctions = {a["id"]: a for a in AUCTIONS}
    cities = {p["id"]: p["city"] for p in PERSONS}
    expected = sorted(
        (
            b["auction"],
            b["price"],
            auctions[b["auction"]]["category"],
            cities.get(auctions[b["auction"]]["seller"]),
        )
        for batch in BIDS
        for b in batch
        if b["auction"] in auctions
    )
    assert len(expected) == 6 and any(row[3] is None for row in expected)
    assert table(spark, "enriched") == expected


def test_a_join_with_a_table_in_update_mode_feeds_an_aggregate(spark: Any, tmp_path: Path) -> None:
    """Bids per category, after each micro-batch: the join before the aggregate is stateless."""
    write_batches(tmp_path / "bids", BIDS)
    write_table(tmp_path / "auctions", AUCTIONS)
    write_table(tmp_path / "persons", PERSONS)
    job = compiled(
        tmp_path,
        source("bids", "auction BIGINT, price BIGINT")
        + TABLES
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK per_category WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO per_category SELECT category, count(*) AS bids, sum(price) AS total\n"
        + "  FROM bids JOIN auctions ON bids.auction = auctions.id GROUP BY category;\n",
    )
    assert {d.code for d in job.spark_diagnostics} == set()
    run_generated(spark, tmp_path, job, into_memory)
    category = {a["id"]: a["category"] for a in AUCTIONS}
    seen: dict[Any, list[int]] = {}
    expected = []
    for batch in BIDS:
        changed = []
        for bid in batch:
            if bid["auction"] in category:
                key = category[bid["auction"]]
                seen.setdefault(key, []).append(bid["price"])
                changed.append(key)
        expected += [(k, len(seen[k]), sum(seen[k])) for k in dict.fromkeys(changed)]
    got = [tuple(r) for r in spark.sql("SELECT * FROM per_category").collect()]
    assert any(k is None for k, _, _ in expected), "an auction without a category"
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_files_added_to_a_table_between_runs_are_read_by_the_next_run(
    spark: Any, tmp_path: Path
) -> None:
    """Spark lists a table's folder when the query starts and joins every micro-batch of
    that run with what it found; a file added later is read by the next run (and a run
    that restarts from its checkpoint joins only the micro-batches it has not written)."""
    write_table(tmp_path / "auctions", AUCTIONS[:2])
    write_table(tmp_path / "persons", PERSONS)
    write_batches(tmp_path / "bids", BIDS[:1])
    program = (
        source("bids", "auction BIGINT, price BIGINT")
        + TABLES
        + "CREATE SINK joined WITH (connector = 'files', path = 'out', format = 'json');\n"
        + "INSERT INTO joined FROM bids |> JOIN auctions ON auction = auctions.id\n"
        + "  |> SELECT auction, price, category;\n"
    )
    run_generated(spark, tmp_path, compiled(tmp_path, program))
    write_table(tmp_path / "auctions", AUCTIONS[2:], "part-1.json")
    write_batches(tmp_path / "bids", BIDS)  # the same first file, then two more
    run_generated(spark, tmp_path, compiled(tmp_path, program))
    rows = [
        json.loads(line)
        for part in sorted((tmp_path / "out").glob("part-*.json"))
        for line in part.read_text(encoding="utf-8").splitlines()
    ]
    category = {a["id"]: a["category"] for a in AUCTIONS}
    first = {a["id"] for a in AUCTIONS[:2]}
    expected = [(b["auction"], b["price"]) for b in BIDS[0] if b["auction"] in first] + [
        (b["auction"], b["price"]) for batch in BIDS[1:] for b in batch if b["auction"] in category
    ]
    assert sorted((r["auction"], r["price"]) for r in rows) == sorted(expected)
    assert all(r.get("category") == category[r["auction"]] for r in rows)
