"""Processing time on Spark (issue 13, item 6): `pt AS PROCTIME()` is the start time of the
micro-batch that reads a row, and a processing-time window counts in update mode.

Processing time is the machine's clock, so the expected values are bounds and structure
computed in plain Python from the input and the run's wall-clock interval: every row of a
micro-batch has one time, later micro-batches have later times, all within the run; the
window counts add up to each user's rows.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, source, write_batches
from tests.helpers.spark_run import compiled, into_memory, run_generated, spark_codes

CLICKS: list[list[Row]] = [
    [{"user_id": 1, "batch": 0}, {"user_id": 2, "batch": 0}, {"user_id": 1, "batch": 0}],
    [{"user_id": 2, "batch": 1}, {"user_id": 3, "batch": 1}],
    [{"user_id": 1, "batch": 2}, {"user_id": 1, "batch": 2}, {"user_id": 3, "batch": 2}],
]
COLUMNS = "user_id BIGINT, batch INT, pt AS PROCTIME()"


def _rows(spark: Any, name: str) -> list[Any]:
    return list(spark.sql(f"SELECT * FROM `{name}`").collect())


def test_every_row_of_a_micro_batch_has_its_start_time(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "clicks", CLICKS)
    job = compiled(
        tmp_path,
        source("clicks", COLUMNS)
        + "CREATE SINK seen WITH (connector = 'memory');\n"
        + "INSERT INTO seen FROM clicks |> SELECT batch, pt;\n",
    )
    assert spark_codes(job) == set()
    assert any("pt is current_timestamp()" in line for line in job.spark_plan.to_text())
    started = datetime.now() - timedelta(seconds=1)
    run_generated(spark, tmp_path, job)
    ended = datetime.now() + timedelta(seconds=1)
    times: dict[int, set[datetime]] = defaultdict(set)
    for row in _rows(spark, "seen"):
        times[row["batch"]].add(row["pt"])
    assert sorted(times) == [0, 1, 2]
    assert all(len(t) == 1 for t in times.values()), times  # one time per micro-batch
    ordered = [next(iter(times[b])) for b in (0, 1, 2)]
    assert ordered == sorted(ordered) and len(set(ordered)) == 3
    assert started <= ordered[0] and ordered[-1] <= ended


def test_a_processing_time_window_counts_in_update_mode(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "clicks", CLICKS)
    job = compiled(
        tmp_path,
        source("clicks", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK per_user WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO per_user FROM clicks |> KEY BY user_id\n"
        + "  |> WINDOW TUMBLE(pt, INTERVAL 1 HOUR) |> AGGREGATE count(*) AS n;\n",
    )
    assert spark_codes(job) == set()
    started = datetime.now() - timedelta(seconds=1)
    run_generated(spark, tmp_path, job, into_memory)
    ended = datetime.now() + timedelta(seconds=1)
    latest: dict[tuple[int, datetime], int] = {}
    updates: dict[int, list[int]] = defaultdict(list)
    for row in _rows(spark, "per_user"):
        key = (row["user_id"], row["window_start"])
        latest[key] = max(latest.get(key, 0), row["n"])
        updates[row["user_id"]].append(row["n"])
        assert row["window_end"] - row["window_start"] == timedelta(hours=1)
        assert started.replace(minute=0, second=0, microsecond=0) <= row["window_start"] <= ended
    totals: dict[int, int] = defaultdict(int)
    for (user, _), n in latest.items():
        totals[user] += n
    expected: dict[int, int] = defaultdict(int)
    batches_with: dict[int, int] = defaultdict(int)
    for batch in CLICKS:
        for row in batch:
            expected[row["user_id"]] += 1
        for user in {r["user_id"] for r in batch}:
            batches_with[user] += 1
    assert totals == expected
    # Update mode: a row per micro-batch in which the user's window changed.
    assert {u: len(v) for u, v in updates.items()} == batches_with
