"""Cascading event time: window_end after a windowed AGGREGATE keeps the watermark
(issue 13, item 3), so a TOP, an AGGREGATE or a second WINDOW can follow it in append
mode: the "hot items" pattern. Each test runs the generated job on the shared local
SparkSession over clicks read one file per micro-batch and compares with plain Python.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, at, source, write_batches
from tests.helpers.spark_run import compiled, run_generated, spark_codes, table

#: Items clicked over eight minutes, in four micro-batches; the last one moves the
#: watermark far enough to close every minute before it.
CLICKS: list[list[Row]] = [
    [{"item": 1, "ts": at(1)}, {"item": 2, "ts": at(2)}, {"item": 1, "ts": at(30)}],
    [{"item": 2, "ts": at(61)}, {"item": 2, "ts": at(62)}, {"item": 3, "ts": at(63)}],
    [
        {"item": 3, "ts": at(125)},
        {"item": 3, "ts": at(130)},
        {"item": 3, "ts": at(170)},
        {"item": 1, "ts": at(175)},
        {"item": 2, "ts": at(250)},
    ],
    [{"item": 1, "ts": at(500)}],
]
COLUMNS = "item BIGINT, ts TIMESTAMP"
PER_MINUTE = (
    source("clicks", COLUMNS, watermark="5 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE VIEW per_minute AS FROM clicks |> KEY BY item\n"
    + "  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n;\n"
)


def counts_per_minute() -> dict[tuple[datetime, int], int]:
    counts: Counter[tuple[datetime, int]] = Counter()
    for batch in CLICKS:
        for row in batch:
            counts[(datetime.fromisoformat(row["ts"]).replace(second=0), row["item"])] += 1
    return dict(counts)


def final_watermark() -> datetime:
    return max(datetime.fromisoformat(r["ts"]) for b in CLICKS for r in b) - timedelta(seconds=5)


def test_hot_items_top_per_window_after_an_aggregate(spark: Any, tmp_path: Path) -> None:
    """Count per item per minute, then the most clicked item of each minute (append)."""
    write_batches(tmp_path / "clicks", CLICKS)
    job = compiled(
        tmp_path,
        PER_MINUTE
        + "CREATE SINK hot WITH (connector = 'memory');\n"
        + "INSERT INTO hot FROM per_minute\n"
        + "  |> TOP 1 BY n DESC PER window_start, window_end |> SELECT window_start, item, n;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    best: dict[datetime, tuple[int, int]] = {}
    for (minute, item), n in counts_per_minute().items():
        if minute + timedelta(minutes=1) <= final_watermark():
            best[minute] = max(best.get(minute, (0, 0)), (n, item))
    expected = sorted((minute, item, n) for minute, (n, item) in best.items())
    assert len(expected) == 4
    assert table(spark, "hot") == expected


def test_a_second_aggregate_grouped_by_window_end(spark: Any, tmp_path: Path) -> None:
    """The items clicked and the busiest item's count, per minute, from the per-item counts."""
    write_batches(tmp_path / "clicks", CLICKS)
    job = compiled(
        tmp_path,
        PER_MINUTE
        + "CREATE SINK per_window WITH (connector = 'memory');\n"
        + "INSERT INTO per_window FROM per_minute |> KEY BY window_end\n"
        + "  |> AGGREGATE count(*) AS items, max(n) AS busiest;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    groups: dict[datetime, list[int]] = defaultdict(list)
    for (minute, _), n in counts_per_minute().items():
        end = minute + timedelta(minutes=1)
        if end <= final_watermark():
            groups[end].append(n)
    expected = sorted((end, len(ns), max(ns)) for end, ns in groups.items())
    assert table(spark, "per_window") == expected


def test_a_window_over_window_end(spark: Any, tmp_path: Path) -> None:
    """A 5-minute window over the 1-minute counts' window_end: each count falls in the
    window that contains its window_end (docs/language.md, "Cascading windows")."""
    write_batches(tmp_path / "clicks", CLICKS)
    job = compiled(
        tmp_path,
        PER_MINUTE
        + "CREATE SINK per_five WITH (connector = 'memory');\n"
        + "INSERT INTO per_five FROM per_minute\n"
        + "  |> WINDOW TUMBLE(window_end, INTERVAL 5 MINUTES) |> AGGREGATE sum(n) AS clicks;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    totals: Counter[datetime] = Counter()
    for (minute, _), n in counts_per_minute().items():
        end = minute + timedelta(minutes=1)
        if end <= final_watermark():
            five = end.replace(minute=end.minute - end.minute % 5)
            totals[five] += n
    closed = {s: n for s, n in totals.items() if s + timedelta(minutes=5) <= final_watermark()}
    expected = sorted((s, s + timedelta(minutes=5), n) for s, n in closed.items())
    assert expected
    assert table(spark, "per_five") == expected


def test_window_end_of_an_unwatermarked_window_has_no_watermark(tmp_path: Path) -> None:
    job = compiled(
        tmp_path,
        source("clicks", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK hot WITH (connector = 'memory');\n"
        + "INSERT INTO hot FROM clicks |> KEY BY item |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        + "  |> AGGREGATE count(*) AS n |> TOP 1 BY n DESC PER window_start, window_end;\n",
    )
    assert "E0705" in spark_codes(job) and "E0704" in spark_codes(job)
