"""Flink's PARTITIONED BY (dt, hr) of a files table the job writes, and TUMBLE_ROWTIME(...)
inside an expression (the Flink SQL cookbook's statement sets): hourly counts written
under dt=.../hr=... folders named from each window's rowtime (its end minus 1 ms)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, run_generated, spark_codes

HEAD = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE logs (b STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'files', path = 'logs', format = 'json', max_files_per_trigger = 1);
"""
FLINK = (
    HEAD
    + "CREATE TABLE hourly (b STRING, dt STRING, hr STRING, n BIGINT) PARTITIONED BY (dt, hr)\n"
    + "  WITH (connector = 'files', path = 'hourly', format = 'json');\n"
    + "INSERT INTO hourly SELECT b,\n"
    + "  DATE_FORMAT(TUMBLE_ROWTIME(ts, INTERVAL '1' HOUR), 'yyyy-MM-dd') AS dt,\n"
    + "  DATE_FORMAT(TUMBLE_ROWTIME(ts, INTERVAL '1' HOUR), 'HH') AS hr, COUNT(*) AS n\n"
    + "FROM logs GROUP BY b, TUMBLE(ts, INTERVAL '1' HOUR);\n"
)
WRITTEN = (
    HEAD
    + "CREATE SINK hourly (b STRING, dt STRING, hr STRING, n BIGINT)\n"
    + "  WITH (connector = 'files', path = 'hourly', format = 'json', partition_by = 'dt, hr');\n"
    + "INSERT INTO hourly SELECT b,\n"
    + "  DATE_FORMAT(TUMBLE_END(ts, INTERVAL '1' HOUR) - INTERVAL '1' MILLISECOND, 'yyyy-MM-dd')"
    + " AS dt,\n"
    + "  DATE_FORMAT(TUMBLE_END(ts, INTERVAL '1' HOUR) - INTERVAL '1' MILLISECOND, 'HH') AS hr,\n"
    + "  COUNT(*) AS n FROM logs GROUP BY b, TUMBLE(ts, INTERVAL '1' HOUR);\n"
)


def test_partitioned_by_plans_as_partition_by() -> None:
    assert job_graph_json(FLINK) == job_graph_json(WRITTEN)


DAY = datetime(2026, 3, 1)


def _log(b: str, hours: float) -> Row:
    return {"b": b, "ts": (DAY + timedelta(hours=hours)).isoformat()}


#: Around midnight, so the hour [23:00, 24:00) has its rowtime on the first day and its
#: end on the next: the folder is named from the rowtime, as Flink names it.
BATCHES: list[list[Row]] = [
    [_log("ff", 22.5), _log("ch", 23.1), _log("ff", 23.9)],
    [_log("ch", 23.99), _log("ff", 24.2)],
    [_log("ch", 25.5), _log("ff", 27.0)],
]


def test_partitioned_hourly_counts_equal_flinks_on_spark(spark: Any, tmp_path: Path) -> None:
    """Each closed hour's count per browser, under dt=<rowtime's day>/hr=<rowtime's hour>,
    across three micro-batches and a restart: plain Python's."""
    write_batches(tmp_path / "logs", BATCHES[:2])
    job = compiled(tmp_path, FLINK)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "logs", BATCHES)
    run_generated(spark, tmp_path, compiled(tmp_path, FLINK))

    rows = []
    for part in sorted((tmp_path / "hourly").glob("dt=*/hr=*/part-*.json")):
        dt = part.parent.parent.name.removeprefix("dt=")
        hr = part.parent.name.removeprefix("hr=")
        for line in part.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            assert set(record) == {"b", "n"}  # partition columns are folders, not fields
            rows.append((record["b"], dt, hr, record["n"]))

    logs = [row for batch in BATCHES for row in batch]
    watermark = max(datetime.fromisoformat(r["ts"]) for r in logs) - timedelta(seconds=1)
    hours: Counter[tuple[str, datetime]] = Counter()
    for r in logs:
        ts = datetime.fromisoformat(r["ts"])
        hours[(r["b"], ts.replace(minute=0, second=0, microsecond=0))] += 1
    expected = []
    for (b, start), n in hours.items():
        end = start + timedelta(hours=1)
        if end <= watermark:
            rowtime = end - timedelta(milliseconds=1)
            expected.append((b, rowtime.strftime("%Y-%m-%d"), rowtime.strftime("%H"), n))
    assert sorted(rows) == sorted(expected)
    assert ("ch", "2026-03-01", "23", 2) in rows
