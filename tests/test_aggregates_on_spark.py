"""FILTER clauses, distinct aggregates and struct fields, run on Spark (issue 13, items 0, 4).

Spark refuses distinct aggregates on streams; flowc rewrites them over ``collect_set``
(flowc/spark_distinct.py). Each test runs the generated job on the shared local
SparkSession over JSON files read one per micro-batch, and compares what the sink got
after every micro-batch with the same aggregates computed here in plain Python.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, at, minute_of, source, write_batches
from tests.helpers.spark_run import compiled, into_memory, run_generated, spark_codes, table

#: Bids over three micro-batches: a bidder repeating within and across batches, a NULL
#: bidder, prices on both sides of the FILTER's bound.
BIDS: list[list[Row]] = [
    [
        {"k": 1, "bidder": 10, "price": 5, "ts": at(0)},
        {"k": 1, "bidder": 10, "price": 20000, "ts": at(3)},
        {"k": 2, "bidder": 11, "price": 7, "ts": at(5)},
        {"k": 1, "bidder": None, "price": 9, "ts": at(8)},
    ],
    [
        {"k": 1, "bidder": 12, "price": 5, "ts": at(65)},
        {"k": 2, "bidder": 11, "price": 30000, "ts": at(70)},
        {"k": 3, "bidder": 13, "price": 1, "ts": at(71)},
    ],
    [
        {"k": 1, "bidder": 10, "price": 40000, "ts": at(130)},
        {"k": 3, "bidder": 14, "price": 1, "ts": at(200)},
        {"k": 3, "bidder": 13, "price": 2, "ts": at(201)},
    ],
]

COLUMNS = "k BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP"

AGGREGATES = (
    "count(*) FILTER (WHERE price < 10000) AS cheap, "
    "count(DISTINCT bidder) AS bidders, "
    "count(DISTINCT bidder) FILTER (WHERE price < 10000) AS cheap_bidders, "
    "count(DISTINCT bidder, price) AS pairs, "
    "sum(DISTINCT price) AS distinct_total, "
    "avg(DISTINCT price) FILTER (WHERE bidder IS NOT NULL) AS distinct_mean, "
    "max(DISTINCT price) AS top"
)


def expected_row(rows: list[Row]) -> tuple[Any, ...]:
    """The aggregates of one group, by SQL's rules, in plain Python."""
    cheap = [r for r in rows if r["price"] < 10000]
    prices = {r["price"] for r in rows}
    with_bidder = {r["price"] for r in rows if r["bidder"] is not None}
    return (
        len(cheap),
        len({r["bidder"] for r in rows if r["bidder"] is not None}),
        len({r["bidder"] for r in cheap if r["bidder"] is not None}),
        len({(r["bidder"], r["price"]) for r in rows if r["bidder"] is not None}),
        sum(prices),
        sum(with_bidder) / len(with_bidder) if with_bidder else None,
        max(prices),
    )


def per_batch(
    batches: list[list[Row]], group_of: Callable[[Row], Any]
) -> Iterable[tuple[Any, list[Row]]]:
    """Each group a micro-batch changed, with all its rows so far, after every batch."""
    seen: dict[Any, list[Row]] = defaultdict(list)
    for batch in batches:
        for row in batch:
            seen[group_of(row)].append(row)
        for group in dict.fromkeys(group_of(row) for row in batch):
            yield group, list(seen[group])


def rounded(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in rows)


def test_filter_and_distinct_aggregates_in_update_mode(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "s", BIDS)
    job = compiled(
        tmp_path,
        source("s", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK u WITH (connector = 'noop', mode = 'update');\n"
        + f"INSERT INTO u FROM s |> KEY BY k |> AGGREGATE {AGGREGATES};\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    expected = [(k, *expected_row(rows)) for k, rows in per_batch(BIDS, lambda r: r["k"])]
    assert len(expected) == 7
    assert rounded(table(spark, "u")) == rounded(expected)


def test_filter_and_distinct_aggregates_per_window(spark: Any, tmp_path: Path) -> None:
    """Append mode: each (key, minute) written once, when the watermark passes it."""
    write_batches(tmp_path / "s", BIDS)
    job = compiled(
        tmp_path,
        source("s", COLUMNS, watermark="5 SECONDS")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK a WITH (connector = 'memory');\n"
        + "INSERT INTO a FROM s |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        + f"  |> AGGREGATE {AGGREGATES};\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    groups: dict[tuple[int, Any], list[Row]] = defaultdict(list)
    for batch in BIDS:
        for row in batch:
            groups[(row["k"], minute_of(row["ts"]))].append(row)
    # The last batch's watermark (201 s - 5 s) closes every window but the one at 180 s.
    closed = {g: rows for g, rows in groups.items() if g[1] < minute_of(at(180))}
    got = table(spark, "a")
    expected = [
        (k, start, start.replace(minute=start.minute + 1), *expected_row(rows))
        for (k, start), rows in closed.items()
    ]
    assert rounded([(r[0], r[1], r[2], *r[3:]) for r in got]) == rounded(expected)


def test_distinct_aggregates_in_sql_group_by(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "s", BIDS)
    job = compiled(
        tmp_path,
        source("s", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK u WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO u SELECT k, count(DISTINCT bidder) FILTER (WHERE price < 10000) AS n\n"
        + "  FROM s GROUP BY k;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    expected = [(k, expected_row(rows)[2]) for k, rows in per_batch(BIDS, lambda r: r["k"])]
    assert table(spark, "u") == sorted(expected)


#: Nexmark-style events: the bid is a struct column, as in Nexmark's DDL.
EVENTS: list[list[Row]] = [
    [
        {"event_type": 2, "bid": {"auction": 1, "price": 10, "extra": {"channel": "a"}}},
        {"event_type": 1, "bid": None},
        {"event_type": 2, "bid": {"auction": 2, "price": 30, "extra": {"channel": "b"}}},
    ],
    [
        {"event_type": 2, "bid": {"auction": 1, "price": 25, "extra": {"channel": "b"}}},
        {"event_type": 2, "bid": {"auction": 1, "price": 5, "extra": None}},
    ],
    [{"event_type": 2, "bid": {"auction": 2, "price": 31, "extra": {"channel": "b"}}}],
]


def test_struct_fields_are_read_as_fields(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "events", EVENTS)
    job = compiled(
        tmp_path,
        "SET max_parallelism = 16;\n"
        "CREATE SOURCE events (event_type INT, bid STRUCT<auction: BIGINT, price: BIGINT, "
        "extra: STRUCT<channel: STRING>>) WITH (connector = 'files', path = 'events', "
        "format = 'json', max_files_per_trigger = 1);\n"
        "CREATE SINK u WITH (connector = 'noop', mode = 'update');\n"
        "CREATE VIEW bids AS FROM events |> WHERE event_type = 2\n"
        "  |> SELECT bid.auction, bid.price, bid.extra.channel;\n"
        "INSERT INTO u FROM bids |> KEY BY auction\n"
        "  |> AGGREGATE max(price) AS top, count(DISTINCT channel) AS channels;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    bids = [[e["bid"] for e in batch if e["event_type"] == 2] for batch in EVENTS]
    expected = [
        (
            auction,
            max(b["price"] for b in rows),
            len({b["extra"]["channel"] for b in rows if b["extra"] is not None}),
        )
        for auction, rows in per_batch(bids, lambda b: b["auction"])
    ]
    assert table(spark, "u") == sorted(expected)


def test_distinct_aggregates_of_decimals(spark: Any, tmp_path: Path) -> None:
    """sum and avg(DISTINCT) of a DECIMAL(12, 2) run (Spark refused the fold's widened step
    before) in Spark's types, DECIMAL(22, 2) and DECIMAL(16, 6), and equal plain Python's
    Decimal arithmetic (the average rounded half up to 6 places, as Spark's cast) after
    every micro-batch."""
    from decimal import ROUND_HALF_UP, Decimal

    batches: list[list[Row]] = [
        [
            {"k": 1, "amount": "9999999999.99", "ts": at(0)},
            {"k": 1, "amount": "9999999999.99", "ts": at(1)},
            {"k": 2, "amount": "0.01", "ts": at(2)},
        ],
        [{"k": 1, "amount": "1.00", "ts": at(61)}, {"k": 2, "amount": "0.02", "ts": at(62)}],
        [{"k": 2, "amount": "0.02", "ts": at(120)}, {"k": 2, "amount": None, "ts": at(121)}],
    ]
    write_batches(tmp_path / "s", batches)
    job = compiled(
        tmp_path,
        source("s", "k BIGINT, amount DECIMAL(12, 2), ts TIMESTAMP")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK u WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO u FROM s |> KEY BY k "
        "|> AGGREGATE sum(DISTINCT amount) AS total, avg(DISTINCT amount) AS mean;\n",
    )
    (insert,) = job.program.inserts
    assert [c.type for c in insert.stream.schema] == ["BIGINT", "DECIMAL(22, 2)", "DECIMAL(16, 6)"]
    run_generated(spark, tmp_path, job, into_memory)

    def expected(rows: list[Row]) -> tuple[Any, ...]:
        values = {Decimal(r["amount"]) for r in rows if r["amount"] is not None}
        mean = (sum(values) / len(values)).quantize(Decimal("0.000001"), ROUND_HALF_UP)
        return sum(values), mean

    wanted = [(k, *expected(rows)) for k, rows in per_batch(batches, lambda r: r["k"])]
    assert table(spark, "u") == sorted(wanted)
