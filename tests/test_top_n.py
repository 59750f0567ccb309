"""TOP n BY ... [PER ...]: Flink's Top-N, on Spark (issue 13, item 2).

Each test runs the generated job on the shared local SparkSession over bids read one
file per micro-batch and compares the sink's rows with the first rows of each group
computed in plain Python from the same input: after every micro-batch for the updating
(unwindowed) form, per closed window for the windowed one.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from flowc.spark.codegen import generate_pyspark
from tests.helpers.files import Row, at, minute_of, source, write_batches
from tests.helpers.spark_run import compiled, into_memory, run_generated, spark_codes, table

#: Prices are distinct, so every order is a total one, as Flink's arrival order would be.
BIDS: list[list[Row]] = [
    [
        {"auction": 1, "price": 10, "ts": at(0)},
        {"auction": 1, "price": 30, "ts": at(2)},
        {"auction": 2, "price": 5, "ts": at(4)},
        {"auction": 1, "price": 20, "ts": at(6)},
    ],
    [
        {"auction": 2, "price": 50, "ts": at(61)},
        {"auction": 1, "price": 25, "ts": at(62)},
        {"auction": 3, "price": 7, "ts": at(63)},
    ],
    [
        {"auction": 1, "price": 40, "ts": at(64)},
        {"auction": 2, "price": 1, "ts": at(130)},
        {"auction": 3, "price": 8, "ts": at(200)},
    ],
]
COLUMNS = "auction BIGINT, price BIGINT, ts TIMESTAMP"


def first_rows(rows: list[Row], n: int, descending: bool) -> list[tuple[Any, ...]]:
    ranked = sorted(rows, key=lambda r: r["price"], reverse=descending)[:n]
    return [(r["auction"], r["price"], datetime.fromisoformat(r["ts"])) for r in ranked]


def test_top_per_key_updates_after_every_batch(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "bids", BIDS)
    job = compiled(
        tmp_path,
        source("bids", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK best WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO best FROM bids |> TOP 2 BY price DESC PER auction AS rn;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    seen: dict[int, list[Row]] = defaultdict(list)
    expected = []
    for batch in BIDS:
        for row in batch:
            seen[row["auction"]].append(row)
        for auction in dict.fromkeys(r["auction"] for r in batch):
            ranked = first_rows(seen[auction], 2, descending=True)
            expected += [(*row, rank) for rank, row in enumerate(ranked, start=1)]
    assert len(expected) == 14
    assert table(spark, "best") == sorted(expected)


def test_top_per_window_is_appended_when_the_window_closes(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "bids", BIDS)
    job = compiled(
        tmp_path,
        source("bids", COLUMNS, watermark="5 SECONDS")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK best WITH (connector = 'memory');\n"
        + "INSERT INTO best FROM bids |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        + "  |> TOP 1 BY price ASC PER auction;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    windows: dict[tuple[int, datetime], list[Row]] = defaultdict(list)
    for batch in BIDS:
        for row in batch:
            start = datetime.fromisoformat(row["ts"]).replace(second=0)
            windows[(row["auction"], start)].append(row)
    closed = datetime.fromisoformat(at(200)) - timedelta(seconds=5)
    expected = sorted(
        (*first_rows(rows, 1, descending=False)[0], start, start + timedelta(minutes=1))
        for (_, start), rows in windows.items()
        if start + timedelta(minutes=1) <= closed
    )
    assert len(expected) == 6
    assert table(spark, "best") == expected


def test_a_global_top_per_window(spark: Any, tmp_path: Path) -> None:
    """No PER and no keys in force: the first rows of each whole window."""
    write_batches(tmp_path / "bids", BIDS)
    job = compiled(
        tmp_path,
        source("bids", COLUMNS, watermark="5 SECONDS")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK best WITH (connector = 'memory');\n"
        + "INSERT INTO best FROM bids |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        + "  |> TOP 2 BY price DESC AS place |> SELECT window_start, place, auction, price;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    windows: dict[datetime, list[Row]] = defaultdict(list)
    for batch in BIDS:
        for row in batch:
            windows[datetime.fromisoformat(row["ts"]).replace(second=0)].append(row)
    closed = datetime.fromisoformat(at(200)) - timedelta(seconds=5)
    expected = sorted(
        (start, place, auction, price)
        for start, rows in windows.items()
        if start + timedelta(minutes=1) <= closed
        for place, (auction, price, _) in enumerate(first_rows(rows, 2, True), start=1)
    )
    assert len(expected) == 5
    assert table(spark, "best") == expected


#: Equal prices within a group: the tie is broken by the rows' other columns; a NULL price
#: is a row too, ordered lowest.
TIED: list[list[Row]] = [
    [
        {"auction": 1, "bidder": 7, "price": 30, "ts": at(0)},
        {"auction": 1, "bidder": 9, "price": 30, "ts": at(1)},
        {"auction": 1, "bidder": 9, "price": 30, "ts": at(3)},
        {"auction": 2, "bidder": 4, "price": 5, "ts": at(4)},
        {"auction": 4, "bidder": 3, "price": None, "ts": at(10)},
    ],
    [
        {"auction": 1, "bidder": 8, "price": 30, "ts": at(5)},
        {"auction": 2, "bidder": 6, "price": 5, "ts": at(20)},
        {"auction": 2, "bidder": 2, "price": 5, "ts": at(21)},
    ],
    [{"auction": 3, "bidder": 1, "price": 1, "ts": at(200)}],
]


def lowest_null(row: Row) -> tuple[Any, ...]:
    """Spark's order of a struct (price, bidder, ts): a NULL price before every price."""
    return (row["price"] is not None, row["price"] or 0, row["bidder"], row["ts"])


def test_ties_in_the_order_are_broken_by_the_other_columns(spark: Any, tmp_path: Path) -> None:
    """Spark's max_by keeps whichever tied row it meets first; flowc's order goes on with the
    row's other columns (bidder, then ts, the same direction), so the result is the same
    however the rows arrive. A row whose price is NULL counts, lowest (max_by skips a
    NULL order: flowc's order is a struct, never NULL)."""
    write_batches(tmp_path / "bids", TIED)
    job = compiled(
        tmp_path,
        source("bids", "auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP", "5 SECONDS")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK best WITH (connector = 'memory');\n"
        + "INSERT INTO best FROM bids |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        + "  |> TOP 2 BY price DESC PER auction;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    windows: dict[tuple[int, datetime], list[Row]] = defaultdict(list)
    for batch in TIED:
        for row in batch:
            windows[(row["auction"], minute_of(row["ts"]))].append(row)
    closed = datetime.fromisoformat(at(200)) - timedelta(seconds=5)
    expected = sorted(
        (a, r["bidder"], r["price"], datetime.fromisoformat(r["ts"]), s, s + timedelta(minutes=1))
        for (a, s), rows in windows.items()
        if s + timedelta(minutes=1) <= closed
        for r in sorted(rows, key=lowest_null, reverse=True)[:2]
    )
    assert [row[:2] for row in expected] == [(1, 9), (1, 9), (2, 4), (2, 6), (4, 3)]
    assert table(spark, "best") == expected


def _top_call(program: str, tmp_path: Path) -> str:
    """The max_by/min_by call the generated program makes for the program's one TOP."""
    text = generate_pyspark(compiled(tmp_path, program))
    (call,) = re.findall(r"F\.expr\('((?:max|min)_by\(.*?)'\)\.alias\('__flowc_top'\)", text)
    return str(call)


def test_the_tie_break_leaves_out_what_cannot_differ_within_a_group(tmp_path: Path) -> None:
    """Per input row, max_by compares the order; a group key of an exact type and a column
    the order already has cannot break a tie, so they are left out. A DOUBLE key stays:
    Spark groups -0.0 with 0.0, which are different values."""
    head = (
        "SET max_parallelism = 16;\nCREATE SINK best WITH (connector = 'noop', mode = 'update');\n"
    )
    columns = "auction BIGINT, seller STRING, score DOUBLE, price BIGINT, tags MAP<STRING, INT>"
    call = _top_call(
        source("bids", columns)
        + head
        + "INSERT INTO best FROM bids |> TOP 2 BY price PER auction, seller;\n",
        tmp_path,
    )
    assert call == (
        "min_by(struct(`auction`, `seller`, `score`, `price`, `tags`), struct(`price`, `score`), 2)"
    )
    call = _top_call(
        source("bids", columns)
        + head
        + "INSERT INTO best FROM bids |> TOP 1 BY price * 2 DESC PER score;\n",
        tmp_path,
    )
    assert call == (
        "max_by(struct(`auction`, `seller`, `score`, `price`, `tags`), "
        "struct(`price` * 2, `auction`, `seller`, `score`, `price`), 1)"
    )
    narrow = "auction BIGINT, price BIGINT, tags MAP<STRING, INT>"
    call = _top_call(
        source("bids", narrow)
        + head
        + "INSERT INTO best FROM bids |> TOP 3 BY price DESC PER auction;\n",
        tmp_path,
    )
    assert call == "max_by(struct(`auction`, `price`, `tags`), struct(`price`), 3)"
