"""Flink's CURRENT_WATERMARK on Spark (docs/language.md, "CURRENT_WATERMARK on Spark"):
jobs using it run on the shared Spark session across several micro-batches (one file each)
and a restart, and their rows equal plain Python computing the micro-batch watermark
(the largest event time of the earlier batches minus the delay, NULL before any) and
routing each row on it, as Flink routes rows on the watermark its operator has seen.
"""

from __future__ import annotations

import json
import zoneinfo
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.spark.codegen import generate_pyspark
from tests.helpers.files import T0, read_json_dir, write_batches, write_later_batch
from tests.helpers.spark_run import run_in

pytest.importorskip("pyarrow")

DELAY = timedelta(seconds=15)

#: (client ip, seconds after T0) per micro-batch. Late rows in the 2nd, 3rd and last
#: batch: some behind the watermark of the batch before theirs (z at 5 s, i at 160 s), which
#: Spark would drop before a stateful step, and one exactly at its batch's watermark (w).
BATCHES: list[list[tuple[str, int]]] = [
    [("a", 10), ("b", 60), ("a", 20)],
    [("c", 40), ("d", 50), ("e", 120), ("a", 44), ("w", 45)],
    [("f", 90), ("g", 110), ("h", 180), ("z", 5), ("a", 130)],
]
LATER: list[tuple[str, int]] = [("i", 160), ("j", 170), ("k", 270), ("b", 200)]

#: The Flink cookbook's late-data recipe ("Retrieve previous row value without self-join"'s
#: sibling, "Handle late data"), its connectors made files: on-time rows counted per minute,
#: late rows with the watermark they were judged by, through a positional INSERT.
COOKBOOK = """SET 'sql.dialect' = 'flink';
SET 'max_parallelism' = '8';
CREATE TABLE `mobile_usage` (
    `activity` STRING,
    `client_ip` STRING,
    `ingest_time` AS PROCTIME(),
    `log_time` TIMESTAMP_LTZ(3),
    WATERMARK FOR log_time AS log_time - INTERVAL '15' SECONDS
) WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json',
        'max_files_per_trigger' = '1');
CREATE TABLE `unique_users_per_window` (
    `window_start` TIMESTAMP(3),
    `window_end` TIMESTAMP(3),
    `ip_addresses` BIGINT
) WITH ('connector' = 'files', 'path' = 'windows', 'format' = 'json');
CREATE TABLE `late_usage_events` (
    `activity` STRING,
    `client_ip` STRING,
    `ingest_time` TIMESTAMP_LTZ(3),
    `log_time` TIMESTAMP_LTZ(3),
    `current_watermark` TIMESTAMP_LTZ(3)
) WITH ('connector' = 'files', 'path' = 'late', 'format' = 'json');
CREATE TEMPORARY VIEW `mobile_data` AS
    SELECT * FROM mobile_usage
    WHERE CURRENT_WATERMARK(log_time) IS NULL
          OR log_time > CURRENT_WATERMARK(log_time);
CREATE TEMPORARY VIEW `late_mobile_data` AS
    SELECT * FROM mobile_usage
        WHERE CURRENT_WATERMARK(log_time) IS NOT NULL
              AND log_time <= CURRENT_WATERMARK(log_time);
BEGIN STATEMENT SET;
INSERT INTO `unique_users_per_window`
    SELECT `window_start`, `window_end`, COUNT(DISTINCT client_ip) AS `ip_addresses`
      FROM TABLE(
        TUMBLE(TABLE mobile_data, DESCRIPTOR(log_time), INTERVAL '1' MINUTE))
      GROUP BY window_start, window_end;
INSERT INTO `late_usage_events`
    SELECT *, CURRENT_WATERMARK(log_time) as `current_watermark` from `late_mobile_data`;
END;
"""


def _rows(batch: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [
        {
            "activity": f"visit {n}",
            "client_ip": ip,
            "log_time": (T0 + timedelta(seconds=s)).isoformat(),
        }
        for n, (ip, s) in enumerate(batch)
    ]


def _watermarks(batches: list[list[datetime]]) -> Iterator[datetime | None]:
    """Each micro-batch's watermark: the largest time of the batches before it minus the
    delay; None (Flink's NULL, Spark's 0) before the first."""
    latest: datetime | None = None
    for batch in batches:
        yield None if latest is None else latest - DELAY
        latest = max(batch) if latest is None else max(latest, *batch)


def _times(batches: list[list[tuple[str, int]]]) -> list[list[datetime]]:
    return [[T0 + timedelta(seconds=s) for _, s in batch] for batch in batches]


def _expected(
    batches: list[list[tuple[str, int]]],
) -> tuple[list[tuple[str, datetime, datetime]], dict[datetime, int]]:
    """Plain Python: the late rows with their batch's watermark, and the on-time rows'
    distinct clients per minute, for the minutes the last watermark has closed."""
    late: list[tuple[str, datetime, datetime]] = []
    clients: dict[datetime, set[str]] = {}
    for batch, mark in zip(batches, _watermarks(_times(batches)), strict=True):
        for ip, s in batch:
            ts = T0 + timedelta(seconds=s)
            if mark is not None and ts <= mark:
                late.append((ip, ts, mark))
            else:
                clients.setdefault(ts.replace(second=0), set()).add(ip)
    final = max(T0 + timedelta(seconds=s) for b in batches for _, s in b) - DELAY
    windows = {
        start: len(ips) for start, ips in clients.items() if start + timedelta(minutes=1) <= final
    }
    return sorted(late), windows


def _local(text: str, zone: zoneinfo.ZoneInfo) -> datetime:
    """A timestamp Spark wrote as naive local time of the session's zone."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(zone).replace(tzinfo=None)


def _written(
    folder: Path, zone: zoneinfo.ZoneInfo
) -> tuple[list[tuple[str, datetime, datetime]], dict[datetime, int]]:
    late = [
        (r["client_ip"], _local(r["log_time"], zone), _local(r["current_watermark"], zone))
        for r in read_json_dir(folder / "late")
    ]
    windows = [
        (_local(r["window_start"], zone), r["ip_addresses"])
        for r in read_json_dir(folder / "windows")
    ]
    assert len(windows) == len({start for start, _ in windows}), windows  # each once
    return sorted(late), dict(windows)


@pytest.fixture
def zone(spark: Any) -> zoneinfo.ZoneInfo:
    """The session's time zone, in which Spark reads the input's local times."""
    return zoneinfo.ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))


def test_the_cookbook_recipe_routes_late_rows_across_micro_batches_and_a_restart(
    spark: Any, tmp_path: Path, zone: zoneinfo.ZoneInfo
) -> None:
    """Late rows, with the watermark they were judged by (z and i behind the watermark of
    the batch before theirs, w exactly at its own), go to their sink; the on-time rows'
    minutes are counted once the watermark closes them. Stopped after three files and
    restarted on the same checkpoints with a fourth."""
    job = flowc.compile(COOKBOOK, str(tmp_path / "job.flow"), for_spark=True)
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    assert job.spark_plan.state_store.backend == "rocksdb"
    write_batches(tmp_path / "in", [_rows(b) for b in BATCHES])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None, None]
    assert _written(tmp_path, zone) == _expected(BATCHES)
    write_later_batch(tmp_path / "in", _rows(LATER))
    assert [q.error for q in run_in(job, tmp_path).queries] == [None, None]
    late, windows = _written(tmp_path, zone)
    assert (late, windows) == _expected([*BATCHES, LATER])
    assert {ip for ip, _, _ in late} >= {"z", "i", "w"}
    ingest = [r["ingest_time"] for r in read_json_dir(tmp_path / "late")]
    assert all(isinstance(t, str) for t in ingest)  # PROCTIME() kept its place in SELECT *


ROUND_TRIP_COLUMNS = (
    "s STRING, i INT, b BIGINT, d DOUBLE, f FLOAT, m DECIMAL(38, 8), t BOOLEAN, day DATE, "
    "tags ARRAY<STRING>, counts MAP<STRING, BIGINT>, r ROW<x INT, y STRING>, ts TIMESTAMP(6)"
)


def _typed_rows(second: int) -> list[dict[str, Any]]:
    base = T0 + timedelta(seconds=second)
    return [
        {
            "s": "é\u0000x",
            "i": -(2**31),
            "b": 2**53 + 1,
            "d": 0.1,
            "f": 1.5,
            "m": "12345678901234567890.12345678",
            "t": True,
            "day": "0001-01-01",
            "tags": ["a", None],
            "counts": {"k": 2**62, "n": None},
            "r": {"x": 7, "y": None},
            "ts": (base + timedelta(microseconds=123457)).isoformat(),
        },
        {
            "s": None,
            "i": None,
            "b": None,
            "d": -0.0,
            "f": None,
            "m": "-0.00000001",
            "t": None,
            "day": None,
            "tags": [],
            "counts": {},
            "r": None,
            "ts": (base + timedelta(seconds=1)).isoformat(),
        },
    ]


def test_every_column_type_passes_the_processor_unchanged(
    spark: Any, tmp_path: Path, zone: zoneinfo.ZoneInfo
) -> None:
    """The rows cross into Python and back: each column type, NULLs and extremes included
    (a BIGINT past 2**53, microseconds, nested values), is written exactly as the same job
    writes it without CURRENT_WATERMARK, and each row carries its batch's watermark."""
    program = (
        "SET 'sql.dialect' = 'flink';\n"
        f"CREATE TABLE s ({ROUND_TRIP_COLUMNS}, WATERMARK FOR ts AS ts - INTERVAL '15' SECONDS)"
        " WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json', "
        "'max_files_per_trigger' = '1');\n"
        "CREATE SINK marked WITH (connector = 'files', path = 'marked', format = 'json');\n"
        "CREATE SINK plain WITH (connector = 'files', path = 'plain', format = 'json');\n"
        "INSERT INTO marked FROM s |> EXTEND CURRENT_WATERMARK(ts) AS w, unix_micros(ts) AS us;\n"
        "INSERT INTO plain FROM s |> EXTEND unix_micros(ts) AS us;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    batches = [_typed_rows(0), _typed_rows(100), _typed_rows(200)]
    write_batches(tmp_path / "in", batches)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None, None]
    marked = read_json_dir(tmp_path / "marked")
    plain = read_json_dir(tmp_path / "plain")
    key = json.dumps
    assert sorted(key({k: v for k, v in r.items() if k != "w"}) for r in marked) == sorted(
        key(r) for r in plain
    )
    assert len(plain) == 6 and {r.get("b") for r in plain} == {2**53 + 1, None}
    # JSON holds milliseconds; the microseconds went through the processor too:
    epoch = datetime(1970, 1, 1, tzinfo=zone)
    marks = {
        (epoch + timedelta(microseconds=r["us"])).replace(tzinfo=None): _local(r["w"], zone)
        if "w" in r
        else None
        for r in marked
    }
    times = [[datetime.fromisoformat(r["ts"]) for r in rows] for rows in batches]
    assert sorted(marks) == sorted(t for batch in times for t in batch)
    for batch, mark in zip(times, _watermarks(times), strict=True):
        for ts in batch:
            assert marks[ts] == mark


def test_the_generated_program_puts_the_processor_where_the_plan_says(tmp_path: Path) -> None:
    """Code generation reads the reader from the Spark plan: its groups, and whether it keeps
    only rows ahead of the watermark (the time column then keeps its watermark)."""
    job = flowc.compile(COOKBOOK, str(tmp_path / "job.flow"), for_spark=True)
    readers = sorted(job.spark_plan.watermark_readers.values(), key=lambda r: r.line)
    assert [(r.step, r.column, r.on_time) for r in readers] == [
        ("WHERE", "log_time", "ahead_or_none"),
        ("WHERE", "log_time", None),
        ("SELECT", "log_time", None),
    ]
    text = generate_pyspark(job)
    assert text.count("read_watermark(") == 4  # three calls and the definition
    assert f"'log_time', 'ahead_or_none', {readers[0].buckets})" in text
    changed = {**job.spark_plan.watermark_readers}
    first = readers[0]
    changed[first.node_id] = replace(first, buckets=7)
    object.__setattr__(job.spark_plan, "watermark_readers", changed)
    assert "'log_time', 'ahead_or_none', 7)" in generate_pyspark(job)


def _without_readers() -> str:
    """The cookbook's on-time count, the view's condition without CURRENT_WATERMARK."""
    on_time = (
        "CURRENT_WATERMARK(log_time) IS NULL\n          OR log_time > CURRENT_WATERMARK(log_time)"
    )
    program = COOKBOOK.replace(on_time, "log_time IS NOT NULL")
    assert program != COOKBOOK
    program = program.split("CREATE TEMPORARY VIEW `late_mobile_data`")[0] + (
        "INSERT INTO `unique_users_per_window`\n"
        "    SELECT `window_start`, `window_end`, COUNT(DISTINCT client_ip) AS `ip_addresses`\n"
        "      FROM TABLE(TUMBLE(TABLE mobile_data, DESCRIPTOR(log_time), INTERVAL '1' MINUTE))\n"
        "      GROUP BY window_start, window_end;\n"
    )
    return program


def test_no_reader_keeps_the_default_store(tmp_path: Path) -> None:
    """Without CURRENT_WATERMARK the job keeps Flink's default store and no processor."""
    program = _without_readers()
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    assert job.spark_plan.watermark_readers == {}
    assert job.spark_plan.state_store.backend == "hashmap"
    assert "read_watermark" not in generate_pyspark(job)


def test_a_missing_processor_package_is_refused_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E0816 at the first step reading CURRENT_WATERMARK, naming what the interpreter that
    Spark's Python workers run lacks; a job without a reader is not asked."""
    from flowc.diagnostics import CompileError
    from flowc.runtime import run

    job = flowc.compile(COOKBOOK, str(tmp_path / "job.flow"), for_spark=True)
    run.check_processor_packages(job)  # this interpreter has them all
    monkeypatch.setitem(run.PROCESSOR_PACKAGES, "flowc_no_such.module", "nosuch")
    with pytest.raises(CompileError) as refused:
        run.run_job(job, available_now=True, checkpoint_dir=str(tmp_path / "ck"))
    (diagnostic,) = refused.value.diagnostics
    assert diagnostic.code == "E0816" and "nosuch" in diagnostic.message
    where = COOKBOOK.splitlines().index("    WHERE CURRENT_WATERMARK(log_time) IS NULL") + 1
    assert diagnostic.span.line <= where <= diagnostic.span.end_line  # the on-time view's
    plain = flowc.compile(_without_readers(), str(tmp_path / "plain.flow"), for_spark=True)
    run.check_processor_packages(plain)


def test_a_view_no_query_reads_runs_no_reader(tmp_path: Path) -> None:
    """A view reading CURRENT_WATERMARK that no INSERT reads runs nowhere: no processor in
    the plan, and the job keeps its store."""
    program = _without_readers() + (
        "CREATE TEMPORARY VIEW unused AS SELECT * FROM mobile_usage\n"
        "  WHERE log_time <= CURRENT_WATERMARK(log_time);\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    assert job.spark_plan.watermark_readers == {}
    assert job.spark_plan.state_store.backend == "hashmap"
